"""sticky-ranges on a real Pulsar 4.0 broker: the reported gap is what the broker does not
deliver, and a planned set of ranges is accepted and covers every hash.

Two STICKY consumers leave 20001..39999 uncovered. Keys are sent on both sides of the gap: the
keys whose sticky hash lies in a reported gap must be exactly those that never arrive (they
wait in the backlog). Then three consumers subscribe with the ranges the planner proposes for
three nodes: the broker must accept all of them (no range conflict) and, polled again, the
subscription must have no gap at all, 0..65535.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import pulsar

from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.model import HashRange, Snapshot
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges
from tests.live.lens_polls import (
    Recorder,
    new_topic,
    pulsar_client,
    topic_stats,
    wait_for,
)

SUB = "sticky"
PLUGIN = StickyRanges()
KEYS = [f"sensor-{i}" for i in range(600)]


class Sticky:
    """STICKY consumers of one topic that acknowledge and remember the keys they got."""

    def __init__(self, broker: LocalPulsar, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.client = pulsar_client(broker)
        self.got: dict[str, str] = {}
        self._lock = threading.Lock()

    def join(self, name: str, ranges: Sequence[HashRange]) -> pulsar.Consumer:
        policy = pulsar.ConsumerKeySharedPolicy(
            key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges)
        )

        def on_message(consumer: pulsar.Consumer, message: pulsar.Message) -> None:
            with self._lock:
                self.got[message.partition_key()] = name
            consumer.acknowledge(message)

        return self.client.subscribe(
            self.topic,
            SUB,
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=name,
            key_shared_policy=policy,
            message_listener=on_message,
        )

    def send(self, keys: Sequence[str]) -> None:
        producer = self.client.create_producer(self.topic, batching_enabled=False)
        for key in keys:
            producer.send(key.encode(), partition_key=key)
        producer.close()

    def received(self) -> dict[str, str]:
        with self._lock:
            return dict(self.got)

    def consumers(self) -> int:
        return len(topic_stats(self.broker, self.topic)["subscriptions"][SUB]["consumers"])

    def close(self) -> None:
        self.client.close()


def poll_with(rec: Recorder, group: Sticky, consumers: int) -> None:
    """Store a poll that holds the subscription with all its consumers and their ranges."""
    wait_for(lambda: group.consumers() == consumers, what=f"{consumers} sticky consumers")

    def mine(snapshot: Snapshot) -> list[tuple[str, int]]:
        listed = [c for c in snapshot.consumers if c.topic == group.topic]
        return [(c.consumer_name, len(c.hash_ranges or ())) for c in listed]

    rec.poll_until(
        lambda s: len(mine(s)) == consumers and all(n for _, n in mine(s)),
        what="a poll with every sticky consumer and its ranges",
        show=mine,
    )


def marker_keys(ranges: Sequence[Sequence[tuple[int, int]]]) -> list[str]:
    """One key per consumer, hashing into that consumer's `ranges`, sent after the others."""
    candidates = (f"marker-{i}" for i in range(100_000))
    hashes = ((k, sticky_key_hash(k.encode(), selector="sticky")) for k in candidates)
    found: list[str] = []
    for key, value in hashes:
        if len(found) == len(ranges):
            break
        if in_any(value, ranges[len(found)]):
            found.append(key)
    return found


def in_any(value: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(start <= value <= end for start, end in ranges)


def test_sticky_ranges_live_gap_is_what_the_broker_does_not_deliver(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    rec = Recorder(pulsar, tmp_path / "store")
    group = Sticky(pulsar, new_topic("stickygap"))
    label = f"{group.topic} | {SUB}"
    low, high = [(0, 9999), (40000, 49999)], [(50000, 65535), (10000, 20000)]
    try:
        group.join("low", low)
        group.join("high", high)
        poll_with(rec, group, 2)
        output = rec.run(PLUGIN, subscription=label)
        gaps = output.result.frames["gaps"]
        reported = [
            (int(s), int(e)) for s, e in gaps.loc[gaps["label"] == label, ["start", "end"]].values
        ]
        assert reported == [(20001, 39999)]

        stalled = {
            k for k in KEYS if in_any(sticky_key_hash(k.encode(), selector="sticky"), reported)
        }
        assert 100 < len(stalled) < len(KEYS) - 100
        # each consumer gets its messages in the order the broker read them, so once a
        # marker sent after every key has reached each consumer, no key is still to come
        markers = marker_keys([low, high])
        group.send(KEYS + markers)
        wait_for(
            lambda: set(markers) <= set(group.received()),
            what=f"the markers {markers} on both consumers",
            seen=lambda: len(group.received()),
        )
        assert set(group.received()) == set(KEYS) - stalled | set(markers)
        # the stalled messages stay in the backlog: the broker holds them, it did not lose them
        wait_for(lambda: _backlog(group) == len(stalled), what="only the stalled keys in backlog")
    finally:
        group.close()
        rec.close()


def _backlog(group: Sticky) -> int:
    stats = topic_stats(group.broker, group.topic)["subscriptions"][SUB]
    return int(stats["msgBacklog"])


def test_sticky_ranges_live_planned_ranges_are_accepted_and_cover_everything(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    rec = Recorder(pulsar, tmp_path / "store")
    group = Sticky(pulsar, new_topic("stickyplan"))
    label = f"{group.topic} | {SUB}"
    try:
        plan = rec.run(PLUGIN, nodes=3, points=100).result.frames["plan"]
        for index in range(3):
            mine = plan[plan["node_index"] == index]
            ranges = [(int(s), int(e)) for s, e in mine[["start", "end"]].values]
            group.join(f"node-{index}", ranges)  # a range conflict would raise here
        poll_with(rec, group, 3)
        output = rec.run(PLUGIN, subscription=label)
        row = output.result.frames["groups"].set_index("label").loc[label]
        assert (row["gap_hashes"], row["overlap_hashes"], row["covered_hashes"]) == (0, 0, 65535)
        gaps = output.result.frames["gaps"]
        assert gaps[gaps["label"] == label].empty  # not even hash 0
        broker = output.result.frames["ranges"]
        broker = broker[broker["label"] == label]
        spans = sorted((int(s), int(e)) for s, e in broker[["start", "end"]].values)
        assert spans[0][0] == 0 and spans[-1][1] == 65535
        assert all(a[1] + 1 == b[0] for a, b in pairwise(spans))
        group.send(KEYS[:200])
        wait_for(lambda: len(group.received()) == 200, what="every key delivered")
    finally:
        group.close()
        rec.close()
