"""diff(previous, current): bundle moves, consumers joining and leaving, hash range and
active consumer changes; no invented events from partial snapshots."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.events import EVENT_KINDS, carry_forward
from pulsar_lens.collectors.poll import diff, poll
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    EndpointError,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
)
from tests.collectors.recorded import BASE, Recording, register

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(seconds=30)
T2 = T1 + dt.timedelta(seconds=30)
TOPIC = "persistent://t/ns/orders"


def snapshot(
    at: dt.datetime = T0,
    *,
    owner: str | None = "b0:8080",
    consumers: tuple[ConsumerRecord, ...] = (),
    active: str | None = "c1",
    errors: tuple[EndpointError, ...] = (),
    bundles: tuple[str, ...] = ("0x00000000_0x80000000", "0x80000000_0xffffffff"),
) -> Snapshot:
    bundle_records = tuple(
        BundleRecord("t/ns", "t", b, int(b[:10], 16), int(b[11:], 16), owner_broker=owner)
        for b in bundles
    )
    topic = TopicRecord(TOPIC, "t", "t/ns", bundle=bundles[0], owner_broker=owner)
    subs = (
        SubscriptionRecord(TOPIC, "fo", "Failover", active_consumer_name=active),
        SubscriptionRecord(TOPIC, "ks", "Key_Shared"),
    )
    return Snapshot(
        "c",
        at,
        bundles=bundle_records,
        topics=(topic,),
        subscriptions=subs,
        consumers=consumers,
        errors=errors,
    )


def ks(name: str, *ranges: tuple[int, int]) -> ConsumerRecord:
    return ConsumerRecord(TOPIC, "ks", name, hash_ranges=tuple(ranges))


def kinds(events: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(e.kind, e.subject) for e in events]


def test_diff_identical_snapshots_has_no_events() -> None:
    consumers = (ks("a", (1, 65535)),)
    assert diff(snapshot(consumers=consumers), snapshot(T1, consumers=consumers)) == []


def test_diff_bundle_owner_changed() -> None:
    events = diff(snapshot(owner="b0:8080"), snapshot(T1, owner="b1:8080"))
    moved = [e for e in events if e.kind == "bundle_owner_changed"]
    assert [(e.subject, e.before, e.after, e.at) for e in moved] == [
        ("t/ns/0x00000000_0x80000000", "b0:8080", "b1:8080", T1),
        ("t/ns/0x80000000_0xffffffff", "b0:8080", "b1:8080", T1),
    ]
    assert all(e.namespace == "t/ns" for e in moved)


def test_diff_bundle_unloaded_is_an_owner_change_to_none() -> None:
    events = diff(snapshot(owner="b0:8080"), snapshot(T1, owner=None))
    assert {(e.before, e.after) for e in events if e.kind == "bundle_owner_changed"} == {
        ("b0:8080", None)
    }


def test_diff_bundle_split_adds_and_removes_bundles() -> None:
    before = snapshot(bundles=("0x00000000_0x80000000", "0x80000000_0xffffffff"))
    after = snapshot(
        T1, bundles=("0x00000000_0x80000000", "0x80000000_0xbfffffff", "0xbfffffff_0xffffffff")
    )
    assert sorted(kinds(diff(before, after))) == [
        ("bundle_added", "t/ns/0x80000000_0xbfffffff"),
        ("bundle_added", "t/ns/0xbfffffff_0xffffffff"),
        ("bundle_removed", "t/ns/0x80000000_0xffffffff"),
    ]


def test_diff_consumer_joined_and_left() -> None:
    before = snapshot(consumers=(ks("a", (1, 65535)),))
    after = snapshot(T1, consumers=(ks("b", (1, 65535)),))
    events = diff(before, after)
    assert sorted(kinds(events)) == [
        ("consumer_joined", f"{TOPIC}/ks/b"),
        ("consumer_left", f"{TOPIC}/ks/a"),
    ]
    joined = next(e for e in events if e.kind == "consumer_joined")
    assert (joined.topic, joined.subscription, joined.consumer_name) == (TOPIC, "ks", "b")


def test_diff_counts_consumers_sharing_a_name() -> None:
    before = snapshot(consumers=(ks("a", (1, 100)),))
    after = snapshot(T1, consumers=(ks("a", (1, 100)), ks("a", (101, 65535))))
    assert [e.kind for e in diff(before, after)] == ["consumer_joined", "hash_ranges_changed"]


def test_diff_hash_ranges_changed() -> None:
    before = snapshot(consumers=(ks("a", (1, 30000)), ks("b", (30001, 65535))))
    after = snapshot(T1, consumers=(ks("a", (1, 20000)), ks("b", (20001, 65535))))
    events = [e for e in diff(before, after) if e.kind == "hash_ranges_changed"]
    assert [(e.consumer_name, e.before, e.after) for e in events] == [
        ("a", "[[1,30000]]", "[[1,20000]]"),
        ("b", "[[30001,65535]]", "[[20001,65535]]"),
    ]


def test_diff_active_consumer_changed() -> None:
    events = diff(snapshot(active="c1"), snapshot(T1, active="c2"))
    assert [(e.kind, e.subject, e.before, e.after) for e in events] == [
        ("active_consumer_changed", f"{TOPIC}/fo", "c1", "c2")
    ]


def test_diff_ignores_active_consumer_of_shared_types() -> None:
    before = snapshot()
    after = replace(
        snapshot(T1),
        subscriptions=(SubscriptionRecord(TOPIC, "fo", "Shared", active_consumer_name=None),),
    )
    before = replace(
        before,
        subscriptions=(SubscriptionRecord(TOPIC, "fo", "Shared", active_consumer_name="x"),),
    )
    assert diff(before, after) == []


def test_diff_skips_a_topic_whose_stats_failed() -> None:
    before = snapshot(consumers=(ks("a", (1, 30000)), ks("b", (30001, 65535))))
    error = EndpointError(
        "GET http://b0:8080/admin/v2/persistent/t/ns/orders/stats", None, "timed out"
    )
    after = snapshot(T1, consumers=(ks("a"), ks("b")), active=None, errors=(error,))
    assert diff(before, after) == []


def test_diff_skips_topics_of_a_broker_whose_bulk_stats_failed() -> None:
    before = snapshot(consumers=(ks("a", (1, 65535)),))
    error = EndpointError("GET http://b0:8080/admin/v2/broker-stats/topics", 401, "denied")
    after = snapshot(T1, errors=(error,), active=None)
    assert diff(before, after) == []


def test_diff_skips_bundles_of_a_namespace_whose_listing_failed() -> None:
    error = EndpointError("GET /admin/v2/namespaces/t/ns/bundles", 404, "gone")
    after = snapshot(T1, bundles=("0x00000000_0xffffffff",), errors=(error,))
    assert diff(snapshot(), after) == []


def test_diff_skips_owner_changes_involving_a_broker_whose_ownership_failed() -> None:
    error = EndpointError(
        "GET http://b0:8080/admin/v2/brokers/c/b0:8080/ownedNamespaces", None, "timed out"
    )
    after = snapshot(T1, owner=None, errors=(error,))
    assert diff(snapshot(owner="b0:8080"), after) == []


def test_a_move_across_partial_polls_is_told_from_the_last_known_owner() -> None:
    """b0 dies: while its ownedNamespaces call fails its bundles are listed unowned (no event),
    then b1 takes them: the event says b0 -> b1, not - -> b1 (the gap carried forward)."""
    error = EndpointError(
        "GET http://b0:8080/admin/v2/brokers/c/b0:8080/ownedNamespaces", None, "refused"
    )
    owned = snapshot(owner="b0:8080")
    gap = snapshot(T1, owner=None, errors=(error,))
    assert diff(owned, gap) == []
    carried = carry_forward(owned, gap)
    assert {b.owner_broker for b in carried.bundles} == {"b0:8080"}
    assert carried.errors == () and carried.collected_at == T1  # b0's bundles known again
    moved = diff(carried, snapshot(T2, owner="b1:8080"))
    assert {(e.kind, e.before, e.after) for e in moved if e.kind.startswith("bundle")} == {
        ("bundle_owner_changed", "b0:8080", "b1:8080")
    }


def test_carry_forward_keeps_the_bundles_of_a_namespace_whose_listing_failed() -> None:
    error = EndpointError("GET /admin/v2/namespaces/t/ns/bundles", 503, "busy")
    gap = replace(snapshot(T1, errors=(error,)), bundles=())
    carried = carry_forward(snapshot(), gap)
    assert carried.bundles == snapshot().bundles
    assert carry_forward(snapshot(), snapshot(T1)) == snapshot(T1)  # nothing unknown: as is


def test_diff_after_a_failed_discovery_has_no_events() -> None:
    error = EndpointError("GET /admin/v2/clusters", None, "could not reach")
    empty = Snapshot("c", T1, errors=(error,))
    assert diff(snapshot(consumers=(ks("a", (1, 65535)),)), empty) == []


def test_diff_event_kinds_are_documented_snake_case() -> None:
    assert set(EVENT_KINDS) == {
        "bundle_owner_changed",
        "bundle_added",
        "bundle_removed",
        "consumer_joined",
        "consumer_left",
        "hash_ranges_changed",
        "active_consumer_changed",
        "load_manager_unloaded",
        "load_manager_split",
    }
    assert all(k == k.lower() and " " not in k for k in EVENT_KINDS)


def test_diff_of_two_recorded_polls_is_empty(recording: Recording) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        register(mock, recording.default)
        first = poll(AdminClient(BASE))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        register(mock, recording.default)
        second = poll(AdminClient(BASE))
    assert diff(first, second) == []


def test_diff_recorded_default_against_classic_sees_range_changes(recording: Recording) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        register(mock, recording.default)
        first = poll(AdminClient(BASE))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        register(mock, recording.modular)
        second = poll(AdminClient(BASE))
    events = diff(first, second)
    changed = {(e.topic, e.consumer_name) for e in events if e.kind == "hash_ranges_changed"}
    assert ("persistent://public/default/orders", "ks-1") in changed
    assert all(e.kind in EVENT_KINDS for e in events)


def _counting(at: dt.datetime, unloaded: int | None, split: int | None = 0) -> Snapshot:
    leader = BrokerRecord("b0:8080", is_leader=True, lb_bundles_unloaded=unloaded)
    leader = replace(leader, lb_bundles_split=split)
    return replace(snapshot(at), brokers=(leader, BrokerRecord("b1:8080", lb_bundles_unloaded=0)))


def test_diff_the_load_managers_counts_that_grew_are_events() -> None:
    events = diff(_counting(T0, 2, 0), _counting(T1, 5, 1))
    assert [(e.kind, e.subject, e.before, e.after) for e in events] == [
        ("load_manager_unloaded", "b0:8080", "2", "5"),
        ("load_manager_split", "b0:8080", "0", "1"),
    ]
    assert diff(_counting(T0, 2), _counting(T1, 2)) == []


def test_diff_an_unread_or_restarted_counter() -> None:
    assert diff(_counting(T0, None), _counting(T1, 5)) == []
    assert diff(_counting(T0, 5), _counting(T1, None)) == []
    restarted = diff(_counting(T0, 9), _counting(T1, 1))  # counted 1 since the restart
    assert [(e.kind, e.before, e.after) for e in restarted] == [("load_manager_unloaded", "9", "1")]


def test_carry_forward_keeps_an_unread_counter_so_a_gap_loses_no_count() -> None:
    gap = _counting(T1, None, None)  # that poll's broker-stats/metrics call failed
    carried = carry_forward(_counting(T0, 2, 0), gap)
    assert (carried.brokers[0].lb_bundles_unloaded, carried.brokers[0].lb_bundles_split) == (2, 0)
    events = diff(carried, _counting(T1 + (T1 - T0), 5, 0))
    assert [(e.kind, e.before, e.after) for e in events] == [("load_manager_unloaded", "2", "5")]
    assert carry_forward(_counting(T0, 2), _counting(T1, 3)) == _counting(T1, 3)  # read: as is
