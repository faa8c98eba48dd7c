"""Our Key_Shared selectors agree with a real Pulsar 4.0 broker, range for range, key for key,
our 3.0 default selector (`--pulsar 3.0`: consistent hashing as 3.0.7 implements it) with a
real Pulsar 3.0.7 broker, and the 4.0 models (which the product applies to 4.2.x) with a real
Pulsar 4.2.4 broker: each test parametrised by line runs on every line of `LIVE_LINES`, or of
those the product models alike.

After every join and leave the broker's `keyHashRangeArrays` (topic stats, matched to our
handles by a consumer property) must equal the model's, in the same consumer order; then
thousands of distinct keys must each reach the consumer the model names.

The broker of each line also gets one poll by the collector, on which every light built-in
analysis must run without an error and the release-dependent pages must name the model the
product applies to that line.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

import pulsar as pulsar_client
import pytest

from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import resolve_sticky_key
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.selectors import (
    AutoSplitSelector,
    ConsistentHashingSelector,
    Consumer,
    StickySelector,
    make_selector,
    validate_sticky_ranges,
)
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.lab.runtime import release
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.brokers import LIVE_LINES, BrokerPool, lines_modelled_as, modelled_line
from tests.live.key_shared_clients import Group, jvm_name_encoding, new_topic, publish, topic_stats
from tests.live.lens_polls import Recorder, admin

NINE_POINTS = {"subscriptionKeySharedConsistentHashingReplicaPoints": "9"}
AUTO_SPLIT = {"subscriptionKeySharedUseConsistentHashing": "false"}
KEY_BASED = {"batching_enabled": True, "batching_type": pulsar_client.BatchingType.KeyBased}
KEYS = 2000

NAME_SETS = {
    "distinct": ["alpha", "beta", "gamma", "delta"],
    "duplicates": ["dup", "dup", "solo", "dup"],
    "digits": ["consumer1", "consumer11", "consumer111", "consumer1"],
    "non-ascii": ["Zoë", "消费者", "🚀-rocket", "Zoë"],
}


def assert_ranges_agree(group: Group, when: str) -> None:
    broker, model = group.broker_ranges(), group.model_ranges()
    assert [(h.name, r) for h, r in broker] == [(h.name, r) for h, r in model], when
    assert [h for h, _ in broker] == [h for h, _ in model], when


def assert_routing_agrees(group: Group, label: str, count: int = KEYS) -> None:
    keys = [f"{label}-key-{i}" for i in range(count)]
    group.received.clear()
    publish(group.client, group.topic, ((k, {"partition_key": k}) for k in keys), **KEY_BASED)
    group.wait_received(count)
    wrong = [
        (k, group.received[k].name, expected.name)
        for k in keys
        if (expected := group.model.select_key(k.encode())) is not group.received[k]
    ]
    assert not wrong, f"{len(wrong)} of {count} keys reached another consumer, e.g. {wrong[:3]}"


def run_join_leave_sequence(group: Group, names: Sequence[str]) -> None:
    """Join all, route; the first leaves and its name rejoins; the rest leave one by one."""
    handles = []
    for name in names:
        handles.append(group.join(name)[0])
        assert_ranges_agree(group, f"after {name!r} joined")
    assert_routing_agrees(group, "all")
    group.leave(handles[0])
    assert_ranges_agree(group, "after the first consumer left")
    rejoined, _ = group.join(names[0])  # takes back the freed name index
    assert_ranges_agree(group, "after the first name rejoined")
    for handle in handles[2:]:
        group.leave(handle)
        assert_ranges_agree(group, f"after one {handle.name!r} left")
    assert_routing_agrees(group, "two", count=500)
    for handle in (handles[1], rejoined):
        group.leave(handle)
        assert_ranges_agree(group, f"after one {handle.name!r} left")


@pytest.mark.parametrize("names", NAME_SETS.values(), ids=NAME_SETS.keys())
@pytest.mark.parametrize("points", [100, 9], ids=["default-100-points", "9-points"])
def test_consistent_hashing_matches_broker_through_joins_and_leaves(
    broker_pool: BrokerPool, names: list[str], points: int
) -> None:
    broker = broker_pool.get(NINE_POINTS if points == 9 else None)
    model = ConsistentHashingSelector(points=points, name_encoding=jvm_name_encoding())
    if points == 100:  # keep first-come collisions and FIFO takeovers in what the broker judges
        preview = ConsistentHashingSelector(points=points, name_encoding=model.name_encoding)
        for name in names:
            preview.add(Consumer(name))
        assert preview.collisions()
    group = Group(broker, new_topic(f"ch{points}"), model)
    try:
        run_join_leave_sequence(group, names)
    finally:
        group.close()


@pytest.mark.parametrize("line", [line for line in LIVE_LINES if line != "4.0"])
def test_default_selector_matches_the_broker_of_each_line(
    broker_pool: BrokerPool, line: str
) -> None:
    """The model the product applies to a line's brokers (`--pulsar 3.0`: consistent hashing,
    100 points, variant 3.0.7; the 4.0 one on 4.2.4) against that release's standalone with its
    default settings: the ranges after each join and leave, and the consumer each of 2500 keys
    reaches. The names repeat, so 3.0.7's name index (a repeated name's points) is in what the
    broker judges. 4.0.7's is the test above, with every name set."""
    broker = broker_pool.get(version=line)
    assert broker.version == release(line).version
    model = make_selector(
        "consistent", pulsar=modelled_line(line), name_encoding=jvm_name_encoding()
    )
    group = Group(broker, new_topic(f"ch{line.replace('.', '')}"), model)
    try:
        run_join_leave_sequence(group, NAME_SETS["duplicates"])
    finally:
        group.close()


@pytest.mark.parametrize("line", LIVE_LINES)
def test_auto_split_matches_broker_through_joins_and_leaves(
    broker_pool: BrokerPool, line: str
) -> None:
    """The auto-split selector (`subscriptionKeySharedUseConsistentHashing=false`) on each
    release line: the model's ranges after each join and leave, and where keys go."""
    broker = broker_pool.get(AUTO_SPLIT, version=line)
    assert broker.version.startswith(line)
    group = Group(broker, new_topic("split"), AutoSplitSelector(pulsar=modelled_line(line)))
    try:
        run_join_leave_sequence(group, ["s1", "s2", "s2", "s3", "s4"])
    finally:
        group.close()


def sticky_policy(ranges: Sequence[tuple[int, int]]) -> pulsar_client.ConsumerKeySharedPolicy:
    return pulsar_client.ConsumerKeySharedPolicy(
        key_shared_mode=pulsar_client.KeySharedMode.Sticky, sticky_ranges=list(ranges)
    )


def sticky_join(group: Group, name: str, ranges: list[tuple[int, int]]) -> Consumer:
    group.subscribe_args = {"key_shared_policy": sticky_policy(ranges)}
    return group.join(name, sticky=ranges)[0]


@pytest.mark.parametrize("line", lines_modelled_as("4.0"))
def test_sticky_ranges_gaps_and_conflicts_match_broker(broker_pool: BrokerPool, line: str) -> None:
    """The 4.0 sticky model on each line the product models as 4.0 (4.0.7, 4.2.4): a hash
    between a consumer's ranges reaches nobody, and the broker's refusals are the model's."""
    pulsar = broker_pool.get(version=line)
    group = Group(pulsar, new_topic("sticky"), StickySelector())
    try:
        sticky_join(group, "low", [(0, 9999), (40000, 49999)])
        sticky_join(group, "high", [(50000, 65535), (10000, 20000)])
        assert_ranges_agree(group, "after both sticky consumers joined")
        assert_sticky_rejections_agree(group, pulsar)
        keys = [f"sticky-key-{i}" for i in range(KEYS)]
        expected = {k: group.model.select_key(k.encode()) for k in keys}
        gap = {k for k, c in expected.items() if c is None}
        assert 300 < len(gap) < KEYS - 300  # the gap 20001..39999 is about 30% of the space
        # a consumer gets its messages in the order the broker read them: once a marker sent
        # after every key reached each consumer (and the count is right), no key is to come
        markers = marker_keys(group, {c for c in expected.values() if c is not None})
        expected |= {m: group.model.select_key(m.encode()) for m in markers}
        sent = keys + markers
        publish(group.client, group.topic, ((k, {"partition_key": k}) for k in sent), **KEY_BASED)
        group.wait_received(KEYS - len(gap) + len(markers))
        assert set(group.received) == set(keys) - gap | set(markers)
        assert all(group.received[k] is expected[k] for k in group.received)
        assert wait_backlog(pulsar, group.topic, len(gap)) == len(gap)
    finally:
        group.close()


def test_pulsar_3_0_sticky_consumer_receives_the_gap_between_its_ranges(
    broker_pool: BrokerPool,
) -> None:
    """On a 3.0.7 broker the hashes between two ranges of one STICKY consumer (10000..39999
    here, no other consumer's range between) reach that consumer; our 3.0 model says so, and
    every key reaches the consumer it names (none is left in the backlog)."""
    broker = broker_pool.get(version="3.0")
    group = Group(broker, new_topic("sticky30"), StickySelector(pulsar="3.0"))
    try:
        solo = sticky_join(group, "solo", [(0, 9999), (40000, 49999)])
        sticky_join(group, "other", [(50000, 65535)])
        assert_ranges_agree(group, "after both sticky consumers joined")
        keys = [f"sticky30-key-{i}" for i in range(KEYS // 4)]
        expected = {k: group.model.select_key(k.encode()) for k in keys}
        in_gap = [k for k in keys if 10000 <= group.model.key_hash(k.encode()) % 65536 < 40000]
        assert len(in_gap) > 100 and all(expected[k] is solo for k in in_gap)
        publish(group.client, group.topic, ((k, {"partition_key": k}) for k in keys), **KEY_BASED)
        group.wait_received(len(keys))
        assert all(group.received[k] is expected[k] for k in keys)
    finally:
        group.close()


def marker_keys(group: Group, consumers: set[Consumer]) -> list[str]:
    """One key per consumer in `consumers`, routed to it by the model."""
    found: dict[Consumer, str] = {}
    for i in range(100_000):
        key = f"marker-{i}"
        chosen = group.model.select_key(key.encode())
        if chosen in consumers:
            found.setdefault(chosen, key)
        if len(found) == len(consumers):
            break
    return list(found.values())


def assert_sticky_rejections_agree(group: Group, broker: LocalPulsar) -> None:
    """A range overlapping another consumer's, and start > end: both refuse, same words."""
    for name, ranges, words in [
        ("clash", [(45000, 45010)], "Range conflict with consumer Consumer{"),
        ("backwards", [(30000, 20001)], "Fixed hash range start > end for range: [30000,20001]"),
    ]:
        with pytest.raises(pulsar_client.ConsumerAssignError):
            sticky_join(group, name, ranges)
        handle = Consumer(name, tuple(ranges))
        with pytest.raises(ModelError) as refused:
            group.model.add(handle)
        assert str(refused.value).startswith(words)
        line = wait_log_line(broker, group.topic, words)
        if name == "clash":
            assert str(refused.value) == "Range conflict with consumer Consumer{consumerName=low}"
            assert re.search(r"consumerName=low\b", line)
        else:
            assert words in line
    # the Python client refuses these itself, so the broker never sees them
    with pytest.raises(ValueError, match="overlap"):
        sticky_policy([(1, 5), (3, 9)])
    with pytest.raises(ModelError, match=r"own ranges conflict: \[1,5\] overlaps with \[3,9\]"):
        validate_sticky_ranges(((3, 9), (1, 5)))


def wait_log_line(broker: LocalPulsar, topic: str, words: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in broker.log_path.read_text(errors="replace").splitlines():
            if words in line and ("Failed to create consumer" in line and topic in line):
                return line
        time.sleep(0.2)
    raise AssertionError(f"broker log has no 'Failed to create consumer' line with {words!r}")


def wait_backlog(broker: LocalPulsar, topic: str, expected: int, timeout: float = 15.0) -> int:
    deadline, backlog = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        backlog = topic_stats(broker, topic)["subscriptions"]["lens"]["msgBacklog"]
        if backlog == expected:
            return int(backlog)
        time.sleep(0.5)
    return int(backlog)


def test_keyless_and_ordering_key_messages_route_as_predicted(pulsar: LocalPulsar) -> None:
    group = Group(pulsar, new_topic("keyless"), ConsistentHashingSelector())
    try:
        for name in ("k1", "k2", "k3"):
            group.join(name)
        model = group.model
        # no batching: every message is its own entry, keyed by producer name and sequence id
        publish(
            group.client,
            group.topic,
            ((f"solo-{i}", {}) for i in range(300)),
            producer_name="lens-solo",
        )
        # key-based batching: key-less messages share a batch; the first message's id decides
        batches = [[f"kb-{b}-{i}" for i in range(10)] for b in range(30)]
        send_in_batches(group, batches, "lens-kb", pulsar_client.BatchingType.KeyBased, keyed=False)
        # default batching with keys: the whole batch follows its first message's key
        mixed = [[f"mx-{b}-{i}" for i in range(10)] for b in range(30)]
        send_in_batches(group, mixed, "lens-mx", pulsar_client.BatchingType.Default, keyed=True)
        # ordering key beats partition key
        publish(
            group.client,
            group.topic,
            (
                (f"ok-{i}", {"ordering_key": f"ok-{i}", "partition_key": f"pk-{i}"})
                for i in range(300)
            ),
            producer_name="lens-ok",
        )
        group.wait_received(300 + 300 + 300 + 300)
        expect = {
            f"solo-{i}": model.select_key(
                resolve_sticky_key(producer_name="lens-solo", sequence_id=i)
            )
            for i in range(300)
        }
        for b, batch in enumerate(batches):
            first = resolve_sticky_key(producer_name="lens-kb", sequence_id=10 * b)
            expect.update(dict.fromkeys(batch, model.select_key(first)))
        for batch in mixed:
            expect.update(dict.fromkeys(batch, model.select_key(batch[0].encode())))
        expect.update(
            {
                f"ok-{i}": model.select_key(
                    resolve_sticky_key(ordering_key=f"ok-{i}".encode(), partition_key=f"pk-{i}")
                )
                for i in range(300)
            }
        )
        wrong = [
            (k, c.name if c else None, group.received[k].name)
            for k, c in expect.items()
            if group.received[k] is not c
        ]
        assert not wrong, f"{len(wrong)} of {len(expect)} misrouted, e.g. {wrong[:3]}"
        assert len({expect[b[0]] for b in batches}) == 3  # the batches spread over everyone
    finally:
        group.close()


def send_in_batches(
    group: Group,
    batches: list[list[str]],
    producer_name: str,
    batching: pulsar_client.BatchingType,
    *,
    keyed: bool,
) -> None:
    """One flush per batch, so each list becomes exactly one batch entry."""
    prod = group.client.create_producer(
        group.topic,
        producer_name=producer_name,
        batching_enabled=True,
        batching_type=batching,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=60_000,
    )
    try:
        for batch in batches:
            for payload in batch:
                kwargs = {"partition_key": payload} if keyed else {}
                prod.send_async(payload.encode(), None, **kwargs)
            prod.flush()
    finally:
        prod.close()


@pytest.mark.parametrize("line", lines_modelled_as("4.0"))
def test_draining_hashes_are_the_pending_hashes_that_moved(
    broker_pool: BrokerPool, line: str
) -> None:
    """PIP-379 on each line the product models as 4.0: the hashes a newcomer takes from a
    holder's pending messages are the draining hashes the broker lists, with their counts."""
    pulsar = broker_pool.get(version=line)
    group = Group(pulsar, new_topic("drain"), ConsistentHashingSelector())
    try:
        holder, _ = group.join("holder")
        group.ack = False  # the holder keeps every message unacknowledged
        keys = [f"drain-key-{i}" for i in range(200)]
        publish(group.client, group.topic, ((k, {"partition_key": k}) for k in keys))
        group.wait_received(len(keys))
        pending = [group.model.key_hash(k.encode()) for k in keys]
        _, impact = group.join("newcomer")
        assert_ranges_agree(group, "after the newcomer joined")
        expected = impact.draining({holder: pending})[holder]
        assert 20 < len(expected) < 180
        stats = {c["consumerName"]: c for c in group.broker_consumers()}["holder"]
        assert [d["hash"] for d in stats["drainingHashes"]] == expected
        counts = {h: pending.count(h) for h in expected}
        assert [d["unackMsgs"] for d in stats["drainingHashes"]] == [counts[h] for h in expected]
        assert stats["drainingHashesCount"] == len(expected)
        group.ack_held()
        assert wait_draining_cleared(group) == 0
    finally:
        group.close()


def wait_draining_cleared(group: Group, timeout: float = 15.0) -> int:
    deadline, count = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        count = sum(c.get("drainingHashesCount", 0) for c in group.broker_consumers())
        if count == 0:
            return 0
        time.sleep(0.3)
    return count


@pytest.mark.parametrize("line", LIVE_LINES)
def test_every_light_plugin_analyses_a_snapshot_polled_from_each_line(
    broker_pool: BrokerPool, tmp_path: Path, line: str
) -> None:
    """The collector polls a standalone of each line holding a Key_Shared subscription and a
    Failover one on a partitioned topic; every light built-in analyses the snapshots without
    an error, and the pages whose model depends on the release name the line's model (4.0's
    on 4.2.4) and the version that answered."""
    broker = broker_pool.get(version=line)
    model, version = modelled_line(line), release(line).version
    shared, parted = new_topic(f"all{line[0]}{line[2]}"), new_topic(f"all{line[0]}{line[2]}p")
    admin(
        broker,
        "PUT",
        f"{parted.replace('persistent://', '/admin/v2/persistent/')}/partitions",
        json=3,
    )
    client = pulsar_client.Client(broker.service_url, operation_timeout_seconds=30)
    rec = Recorder(broker, tmp_path / "store")
    try:
        for name in ("k-1", "k-2"):
            client.subscribe(
                shared, "ks", consumer_type=pulsar_client.ConsumerType.KeyShared, consumer_name=name
            )
        for name in ("f-1", "f-2"):
            client.subscribe(
                parted, "fo", consumer_type=pulsar_client.ConsumerType.Failover, consumer_name=name
            )
        rec.poll()
        rec.poll_until(
            lambda s: _ready(s, shared, parted),
            what="ranges and active consumers",
            show=lambda s: [(c.topic, c.subscription) for c in s.consumers],
        )
        light = [p for p in discover(entry_points=False) if p.engine == "light"]
        outcomes = compute_results(rec.store, light, results=ResultStore(rec.store.root))
        assert {o.plugin for o in outcomes} == {p.name for p in light}
        assert [(o.plugin, o.error) for o in outcomes if o.status != "ok"] == []
        pages = {p.name: runner.run(p, rec.store, {}, use_cache=False) for p in light}
        for name in ("key-shared-map", "sticky-ranges", "failover-assignment"):
            summary = pages[name].result.summary
            assert (summary["pulsar"], summary["broker_versions"]) == (model, [version]), name
            assert summary["model"] == f"Pulsar {model} model (brokers: {version})", name
        subs = pages["key-shared-map"].result.frames["subscriptions"].set_index("label")
        row = subs.loc[f"{shared} | ks"]
        assert (row["selector"], row["replica_points"], bool(row["drift"])) == (
            "consistent",
            100,
            False,
        ), row["drift_reason"]
        groups = pages["failover-assignment"].result.frames["groups"].set_index("subscription")
        assert (groups.loc["fo", "partitions"], groups.loc["fo", "unexplained"]) == (3, 0)
        assert pages["failover-assignment"].result.summary["pip_392"] is (model != "3.0")
    finally:
        rec.close()
        client.close()


def _ready(snapshot: Snapshot, shared: str, parted: str) -> bool:
    """Both Key_Shared consumers listed with their ranges, and an active consumer on each of
    the three partitions."""
    ranged = [c for c in snapshot.consumers if c.topic == shared and c.hash_ranges]
    active = [
        s
        for s in snapshot.subscriptions
        if s.topic.startswith(f"{parted}-partition-") and s.active_consumer_name
    ]
    return len(ranged) == 2 and len(active) == 3
