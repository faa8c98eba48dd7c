"""bundle-ownership: the ownership map, per-broker totals and events derived between snapshots."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from core.model import (
    BundleRecord,
    ConsumerRecord,
    EndpointError,
    EventRecord,
    Snapshot,
    TopicRecord,
)
from plugins.api import Chart, Table
from plugins.builtin.bundle_ownership import BundleOwnership
from plugins.runner import RunOutput, run_on_inputs
from plugins.testing import at, make_inputs, make_snapshot

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
    inputs = make_inputs(snapshots, PLUGIN.inputs, events=events)
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
    assert output.result.summary == {"bundles": 3, "brokers": 2, "unowned": 1, "events": {}}
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
    inputs = make_inputs(snaps, PLUGIN.inputs)
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
