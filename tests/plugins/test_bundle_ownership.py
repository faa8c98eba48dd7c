"""bundle-ownership: the ownership map, per-broker totals and events derived between snapshots."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Table
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    EndpointError,
    EventRecord,
    Snapshot,
    TopicRecord,
)
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.runner import RunOutput, run_on_inputs
from pulsar_lens.plugins.testing import at, make_inputs, make_snapshot, read_by

PLUGIN = BundleOwnership()
NS = "public/default"
B1, B2 = "127.0.0.1:8080", "127.0.0.2:8080"
FOUR = (0x00000000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF)


def bundle(lower: int, upper: int, owner: str | None = B1, **fields: Any) -> BundleRecord:
    return BundleRecord(
        NS, "public", f"0x{lower:08x}_0x{upper:08x}", lower, upper, owner_broker=owner, **fields
    )


def default_bundles(*owners: str | None) -> tuple[BundleRecord, ...]:
    owners = owners or (B1,) * 4
    return tuple(bundle(lo, hi, o) for lo, hi, o in zip(FOUR, FOUR[1:], owners, strict=False))


def analyze(snapshots: Sequence[Snapshot], events: Any = None, **params: Any) -> RunOutput:
    inputs = make_inputs(snapshots, read_by(PLUGIN), events=events)
    return run_on_inputs(PLUGIN, inputs, params)


def events_of(output: RunOutput) -> list[tuple[str, str, Any, Any]]:
    frame = output.result.frames["events"]
    return [
        (
            r.kind,
            r.bundle,
            None if pd.isna(r.before) else r.before,
            None if pd.isna(r.after) else r.after,
        )
        for r in frame.itertuples()
    ]


def test_ownership_map_and_broker_totals() -> None:
    rows = (
        bundle(0, 0x40000000, B1, topic_count=3, msg_rate_in=10.0, msg_rate_out=4.0),
        bundle(0x40000000, 0x80000000, B2, topic_count=1, msg_rate_in=1.0, msg_rate_out=1.0),
        bundle(0x80000000, 0xFFFFFFFF, None),
    )
    output = analyze([make_snapshot(0, bundles=rows)])
    brokers = output.result.frames["brokers"].set_index("owner_broker")
    assert brokers.loc[B1, ["bundles", "topics", "msg_rate_in"]].tolist() == [1, 3, 10.0]
    assert brokers.loc["(unowned)", "bundles"] == 1
    assert output.result.summary == {
        "bundles": 3,
        "brokers": 2,
        "unowned": 1,
        "events": {},
        "load_manager_unloads": 0,
        "load_manager_splits": 0,
        "load_manager_unseen": 0,
    }
    assert output.result.frames["bundles"]["bundle"].iloc[0] == "0x00000000_0x40000000"


def test_ownership_move_is_an_event() -> None:
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=default_bundles(B1, B2, B1, B1)),
    ]
    assert events_of(analyze(snaps)) == [("moved", "0x40000000_0x80000000", B1, B2)]


def test_ownership_a_broker_that_stops_answering_has_unloaded_nothing() -> None:
    """B2 dies: while its ownedNamespaces call fails its bundles are listed unowned, which is
    no unload (it may still own them); when B1 takes them over, the move is from B2."""
    failed = EndpointError(
        f"GET http://{B2}/admin/v2/brokers/standalone/{B2}/ownedNamespaces", None, "refused"
    )
    gap = make_snapshot(10, bundles=default_bundles(B1, None, B1, B1), errors=(failed,))
    snaps = [
        make_snapshot(0, bundles=default_bundles(B1, B2, B1, B1)),
        gap,
        dataclasses.replace(gap, collected_at=at(20)),
        make_snapshot(30, bundles=default_bundles()),
    ]
    assert events_of(analyze(snaps)) == [("moved", "0x40000000_0x80000000", B2, B1)]


def test_ownership_a_poll_that_could_not_list_the_cluster_changes_nothing() -> None:
    blind = EndpointError("GET /admin/v2/clusters", None, "refused")
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=default_bundles(None, None, None, None), errors=(blind,)),
        make_snapshot(20, bundles=default_bundles()),
    ]
    assert events_of(analyze(snaps)) == []


def test_ownership_unload_then_reacquire_by_the_same_broker() -> None:
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=default_bundles(B1, None, B1, B1)),
        make_snapshot(20, bundles=default_bundles(B1, None, B1, B1)),
        make_snapshot(30, bundles=default_bundles()),
    ]
    output = analyze(snaps)
    assert events_of(output) == [
        ("reacquired", "0x40000000_0x80000000", None, B1),
        ("unloaded", "0x40000000_0x80000000", B1, None),
    ]
    assert output.result.frames["events"]["at"].tolist() == [at(30), at(10)]
    counts = output.result.frames["bundles"].set_index("bundle")["events"]
    assert counts["0x40000000_0x80000000"] == 2 and counts["0x00000000_0x40000000"] == 0


def test_ownership_acquired_by_another_broker_after_unload() -> None:
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=default_bundles(None, B1, B1, B1)),
        make_snapshot(20, bundles=default_bundles(B2, B1, B1, B1)),
    ]
    assert events_of(analyze(snaps))[0] == ("acquired", "0x00000000_0x40000000", None, B2)


def test_ownership_split_from_bundles_that_tile_the_parent() -> None:
    before = default_bundles()
    after = (*before[:3], bundle(0xC0000000, 0xDFFFFFFF), bundle(0xDFFFFFFF, 0xFFFFFFFF))
    snaps = [make_snapshot(0, bundles=before), make_snapshot(10, bundles=after)]
    assert events_of(analyze(snaps)) == [
        (
            "split",
            "0xc0000000_0xffffffff",
            "0xc0000000_0xffffffff",
            "0xc0000000_0xdfffffff, 0xdfffffff_0xffffffff",
        )
    ]


def test_ownership_unexplained_listing_changes() -> None:
    before = default_bundles()
    after = (*before[:3], bundle(0xC0000000, 0xD0000000))
    kinds = [
        e[0]
        for e in events_of(
            analyze([make_snapshot(0, bundles=before), make_snapshot(10, bundles=after)])
        )
    ]
    assert sorted(kinds) == ["appeared", "disappeared"]


def test_ownership_new_namespace_is_not_an_event() -> None:
    other = BundleRecord("acme/prod", "acme", "0x00000000_0xffffffff", 0, 0xFFFFFFFF, B1)
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=(*default_bundles(), other)),
    ]
    assert events_of(analyze(snaps)) == []


def _reconnect_snapshot(seconds: float, connected: float | None) -> Snapshot:
    topic = "persistent://public/default/t1"
    consumers = (
        ()
        if connected is None
        else (ConsumerRecord(topic, "s", "c1", connected_since=at(connected)),)
    )
    return make_snapshot(
        seconds,
        bundles=default_bundles(),
        topics=(TopicRecord(topic, "public", NS, bundle="0x00000000_0x40000000", owner_broker=B1),),
        consumers=consumers,
    )


def test_ownership_reload_inferred_from_reconnected_consumers() -> None:
    snaps = [_reconnect_snapshot(0, -60), _reconnect_snapshot(10, 5)]
    events = analyze(snaps).result.frames["events"]
    assert list(events["kind"]) == ["reloaded"]
    assert "1 client(s)" in events["detail"].iloc[0]


def _publisher_snapshot(
    seconds: float, oldest: float | None, consumer: float | None = None
) -> Snapshot:
    """A topic with two producers (the oldest connected at `oldest`), maybe a consumer."""
    topic = "persistent://public/default/t1"
    consumers = (
        ()
        if consumer is None
        else (ConsumerRecord(topic, "s", "c1", connected_since=at(consumer)),)
    )
    record = TopicRecord(
        topic,
        "public",
        NS,
        bundle="0x00000000_0x40000000",
        owner_broker=B1,
        producer_count=None if oldest is None else 2,
        oldest_publisher_since=None if oldest is None else at(oldest),
    )
    return make_snapshot(seconds, bundles=default_bundles(), topics=(record,), consumers=consumers)


def test_ownership_reload_inferred_from_reconnected_publishers() -> None:
    events = analyze([_publisher_snapshot(0, -60), _publisher_snapshot(10, 4)]).result.frames[
        "events"
    ]
    assert list(events["kind"]) == ["reloaded"]
    assert "2 client(s)" in events["detail"].iloc[0]


def test_ownership_no_reload_while_a_publisher_kept_its_connection() -> None:
    snaps = [_publisher_snapshot(0, -60), _publisher_snapshot(10, -60)]
    assert analyze(snaps).result.frames["events"].empty
    # consumers all reconnected, but a producer did not: not every client was cut off
    snaps = [_publisher_snapshot(0, -60, consumer=-60), _publisher_snapshot(10, -60, consumer=5)]
    assert analyze(snaps).result.frames["events"].empty
    # a topic whose producers appeared only now says nothing about an unload
    assert (
        analyze([_publisher_snapshot(0, None), _publisher_snapshot(10, 4)])
        .result.frames["events"]
        .empty
    )


def test_ownership_reload_seen_across_a_snapshot_without_the_consumer() -> None:
    snaps = [
        _reconnect_snapshot(0, -60),
        _reconnect_snapshot(10, None),
        _reconnect_snapshot(20, 12),
    ]
    events = analyze(snaps).result.frames["events"]
    assert events[["kind", "at"]].values.tolist() == [["reloaded", at(20)]]


def test_ownership_no_reload_when_consumers_keep_their_connection() -> None:
    snaps = [_reconnect_snapshot(0, -60), _reconnect_snapshot(10, -60)]
    assert analyze(snaps).result.frames["events"].empty


def test_ownership_stored_collector_events_are_kept_when_not_derived() -> None:
    stored = EventRecord(
        at(5),
        "bundle_owner_changed",
        f"{NS}/0xc0000000_0xffffffff",
        namespace=NS,
        before=B2,
        after=B1,
    )
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=default_bundles()),
    ]
    events = analyze(snaps, events={1: [stored]}).result.frames["events"]
    assert events[["kind", "bundle", "source"]].values.tolist() == [
        ["bundle_owner_changed", "0xc0000000_0xffffffff", "collector"]
    ]


def test_ownership_namespace_param_and_choices() -> None:
    other = BundleRecord("acme/prod", "acme", "0x00000000_0xffffffff", 0, 0xFFFFFFFF, B2)
    snaps = [make_snapshot(0, bundles=(*default_bundles(), other))]
    inputs = make_inputs(snaps, read_by(PLUGIN))
    assert PLUGIN.param_choices(inputs) == {"namespace": ["", "acme/prod", NS]}
    output = run_on_inputs(PLUGIN, inputs, {"namespace": "acme/prod"})
    assert output.result.frames["bundles"]["bundle"].tolist() == ["0x00000000_0xffffffff"]


def test_ownership_render_views() -> None:
    snaps = [
        make_snapshot(0, bundles=default_bundles()),
        make_snapshot(10, bundles=default_bundles(B1, B2, B1, B1)),
    ]
    views = analyze(snaps).views
    charts = [v for v in views if isinstance(v, Chart)]
    assert [c.chart.to_dict()["mark"]["type"] for c in charts] == ["rect", "tick"]
    assert any(isinstance(v, Table) and v.title == "Events" for v in views)


def test_ownership_empty_inputs() -> None:
    output = analyze([])
    assert all(frame.empty for frame in output.result.frames.values())


# ---- the load manager's own counters -------------------------------------------------------


def counted(
    seconds: float, owners: Sequence[str | None], unloaded: int | None, **kw: Any
) -> Snapshot:
    """A poll where the leader B1's load manager has counted `unloaded` bundle unloads (None:
    its counters could not be read); B2 counted none."""
    brokers = (
        BrokerRecord(B1, is_leader=True, lb_bundles_unloaded=unloaded, lb_bundles_split=0),
        BrokerRecord(B2, lb_bundles_unloaded=None if unloaded is None else 0, lb_bundles_split=0),
    )
    return make_snapshot(seconds, bundles=default_bundles(*owners), brokers=brokers, **kw)


def by_of(output: RunOutput) -> list[tuple[str, Any]]:
    frame = output.result.frames["events"]
    return [(r.kind, None if pd.isna(r.by) else r.by) for r in frame.itertuples()]


def test_ownership_a_move_the_leader_counted_is_by_the_load_manager() -> None:
    snaps = [
        counted(0, (B1, B1, B1, B1), 3),
        counted(10, (B1, B2, B1, B1), 4),
        counted(20, (B1, B2, B1, B1), 4),
    ]
    output = analyze(snaps)
    assert by_of(output) == [("moved", "load manager")]
    windows = output.result.frames["load_manager"]
    assert windows[["at", "since", "broker", "unloaded", "split", "unseen"]].values.tolist() == [
        [at(10), at(0), B1, 1, 0, 0]
    ]
    assert output.result.summary["load_manager_unloads"] == 1


def test_ownership_a_move_no_counter_counted_is_not_the_load_manager() -> None:
    """Judged once the polls read the counters for COUNT_LAG after it (the leader publishes
    its count when its shedding round's unload calls have returned): at 30 s apart, the
    next poll; at 10 s apart, two polls."""
    snaps = [counted(0, (B1, B1, B1, B1), 3), counted(30, (B1, B2, B1, B1), 3)]
    assert by_of(analyze(snaps)) == [("moved", None)]
    snaps.append(counted(60, (B1, B2, B1, B1), 3))
    assert by_of(analyze(snaps)) == [("moved", "not the load manager")]

    snaps = [counted(0, (B1, B1, B1, B1), 3), counted(10, (B1, B2, B1, B1), 3)]
    snaps.append(counted(20, (B1, B2, B1, B1), 3))
    assert by_of(analyze(snaps)) == [("moved", None)]
    snaps.append(counted(30, (B1, B2, B1, B1), 3))
    assert by_of(analyze(snaps)) == [("moved", "not the load manager")]


@pytest.mark.parametrize(("every", "by"), [(5, "load manager"), (30, "not the load manager")])
def test_ownership_a_count_published_after_the_next_poll(every: int, by: str) -> None:
    """The count read two polls after the owner change: within COUNT_LAG when the polls are
    5 s apart (it is the shedder's), not when they are 30 s apart (then it is unseen)."""
    owners = [(B1, B1, B1, B1), (B1, B2, B1, B1), (B1, B2, B1, B1), (B1, B2, B1, B1)]
    counts = [0, 0, 0, 1]
    snaps = [counted(every * i, o, c) for i, (o, c) in enumerate(zip(owners, counts, strict=True))]
    snaps += [counted(every * 4 + every * i, owners[-1], 1) for i in range(4)]
    output = analyze(snaps)
    assert by_of(output) == [("moved", by)]
    unseen = 0 if by == "load manager" else 1
    assert output.result.summary["load_manager_unseen"] == unseen


def test_ownership_an_owner_change_takes_the_count_before_an_inferred_reload() -> None:
    """One count, two events in its window: the bundle that moved, and one whose clients
    all reconnected (a client's dropped connection looks like that too)."""
    snaps = [
        dataclasses.replace(_reconnect_snapshot(0, -60), brokers=counted(0, (), 0).brokers),
        dataclasses.replace(
            _reconnect_snapshot(10, 5),
            bundles=default_bundles(B1, B2, B1, B1),
            brokers=counted(10, (), 1).brokers,
        ),
        counted(20, (B1, B2, B1, B1), 1),
        counted(30, (B1, B2, B1, B1), 1),  # COUNT_LAG after the reload: judged
    ]
    assert sorted(by_of(analyze(snaps))) == [
        ("moved", "load manager"),
        ("reloaded", "not the load manager"),
    ]


def test_ownership_without_counters_nobody_is_named() -> None:
    snaps = [counted(0, (B1, B1, B1, B1), None), counted(10, (B1, B2, B1, B1), None)]
    assert by_of(analyze(snaps)) == [("moved", None)]
    snaps = [counted(0, (B1, B1, B1, B1), 3), counted(10, (B1, B2, B1, B1), None)]
    assert by_of(analyze(snaps)) == [("moved", None)]


def test_ownership_a_count_read_one_poll_before_the_move_still_matches() -> None:
    """The counter and the ownership are read by one poll but not at one instant: the
    shedder may unload between the two calls."""
    snaps = [
        counted(0, (B1, B1, B1, B1), 0),
        counted(10, (B1, B1, B1, B1), 1),
        counted(20, (B1, B2, B1, B1), 1),
    ]
    output = analyze(snaps)
    assert by_of(output) == [("moved", "load manager")]
    assert output.result.summary["load_manager_unseen"] == 0


def test_ownership_counted_unloads_no_poll_saw_are_unseen() -> None:
    snaps = [counted(0, (B1, B1, B1, B1), 0), counted(10, (B1, B2, B1, B1), 3)]
    output = analyze(snaps)
    assert by_of(output) == [("moved", "load manager")]
    assert output.result.frames["load_manager"]["unseen"].tolist() == [2]
    assert output.result.summary["load_manager_unseen"] == 2


def test_ownership_a_restarted_leader_counts_from_zero() -> None:
    snaps = [counted(0, (B1, B1, B1, B1), 7), counted(10, (B1, B2, B1, B1), 1)]
    output = analyze(snaps)
    assert by_of(output) == [("moved", "load manager")]
    assert output.result.frames["load_manager"]["unloaded"].tolist() == [1]


def test_ownership_render_says_what_the_load_manager_counted() -> None:
    snaps = [counted(0, (B1, B1, B1, B1), 0), counted(10, (B1, B2, B1, B1), 2)]
    views = PLUGIN.render(analyze(snaps).result)
    notes = [v.markdown for v in views if type(v).__name__ == "Note"]
    assert any("counted 2 bundle unload(s)" in n and "1 of the unloads" in n for n in notes)
    assert any(isinstance(v, Table) and v.title == "Load manager's counts" for v in views)


def test_ownership_a_neighbours_count_goes_to_its_own_move_first() -> None:
    """An admin move at 10 s, then a shed counted with its move at 20 s: the count is the
    second move's, though it is in the first one's neighbouring window."""
    snaps = [
        counted(0, (B1, B1, B1, B1), 0),
        counted(10, (B1, B2, B1, B1), 0),
        counted(20, (B1, B2, B2, B1), 1),
        counted(30, (B1, B2, B2, B1), 1),
    ]
    output = analyze(snaps)
    assert by_of(output) == [("moved", "load manager"), ("moved", "not the load manager")]
