"""key-shared-map on real Pulsar brokers: no drift, exact what-if, lookups that hold.

Consumers join a Key_Shared subscription (one name twice, the first of them leaving and coming
back, so name indexes are not in connection order); the collector polls the broker into a
store and the plugin runs on it. The model rebuilt from the names must give the broker's
ranges (replica points inferred: the default 100 on each line of `LIVE_LINES`, and 9 on a 4.0
broker set to 9; on a 3.0.7 broker 3.0.7's 31-bit ring, on 4.2.4 4.0's); the what-if "add
consumer X" must equal what the broker reports once X really joins (range for range on 4.x; on
3.0, which lists one range per ring point, hash for hash); keys looked up must reach the
consumer named.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from pulsar_lens.core.assignments import merge_ranges
from pulsar_lens.core.keyshared.ranges import Member
from pulsar_lens.core.keyshared.rebuild import rebuild
from pulsar_lens.core.legacy_selectors import RING_TOP
from pulsar_lens.core.model import Snapshot
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from tests.brokers import LIVE_LINES, BrokerPool, modelled_line
from tests.lens_cli import run_lens
from tests.live.lens_polls import (
    Recorder,
    listed_consumers,
    new_topic,
    pulsar_client,
    topic_stats,
    wait_for,
    wait_for_bulk,
)

SUB = "map"
PLUGIN = KeySharedMap()
NINE_POINTS = {"subscriptionKeySharedConsistentHashingReplicaPoints": "9"}


class Receiver:
    """A message listener that acknowledges and remembers which consumer got which key."""

    def __init__(self) -> None:
        self.got: dict[str, str] = {}
        self._lock = threading.Lock()

    def listener(self, name: str) -> Any:
        def on_message(consumer: pulsar.Consumer, message: pulsar.Message) -> None:
            with self._lock:
                self.got[message.partition_key()] = name
            consumer.acknowledge(message)

        return on_message

    def count(self) -> int:
        with self._lock:
            return len(self.got)


class Subscription:
    """Key_Shared consumers of one topic, joined and closed on demand."""

    def __init__(self, broker: LocalPulsar, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.client = pulsar_client(broker)
        self.receiver = Receiver()
        self.consumers: list[pulsar.Consumer] = []

    def join(self, name: str) -> pulsar.Consumer:
        consumer = self.client.subscribe(
            self.topic,
            SUB,
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=name,
            message_listener=self.receiver.listener(name),
        )
        self.consumers.append(consumer)
        return consumer

    def broker_ranges(self) -> list[tuple[str, list[list[int]]]]:
        """Each consumer's ranges: 4.0's `keyHashRangeArrays`, else 3.0's `keyHashRanges`."""
        consumers = topic_stats(self.broker, self.topic)["subscriptions"][SUB]["consumers"]
        return [(c["consumerName"], _ranges_of(c)) for c in consumers]

    def close(self) -> None:
        self.client.close()


def _ranges_of(consumer: dict[str, Any]) -> list[list[int]]:
    if consumer.get("keyHashRangeArrays"):
        return [list(map(int, r)) for r in consumer["keyHashRangeArrays"]]
    texts = consumer.get("keyHashRanges") or []
    return [[int(n) for n in re.findall(r"\d+", t)] for t in texts]


def owned(ranges: list[list[int]]) -> list[tuple[int, int]]:
    """Ranges as the hashes they hold: merged, within what the broker lists (3.0.7 lists its
    ring up to 2147483646 and per point; the model's assignments run to 2**31 - 1, merged)."""
    return merge_ranges((s, min(e, RING_TOP)) for s, e in ranges)


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Any]:
    made: list[Recorder] = []

    def make(broker: LocalPulsar) -> Recorder:
        made.append(Recorder(broker, tmp_path / f"store-{len(made)}"))
        return made[-1]

    yield make
    for r in made:
        r.close()


def settled_poll(rec: Recorder, subscription: Subscription, consumers: int) -> None:
    """Store a poll with `consumers` consumers, once the broker lists them: the bulk stats
    the poll reads catch up a refresh or more later."""
    wait_for(
        lambda: len(subscription.broker_ranges()) == consumers,
        what=f"{consumers} consumers on {subscription.topic}",
    )
    rec.poll_until(
        lambda s: _polled_consumers(s, subscription.topic) == consumers,
        what=f"a poll with {consumers} consumers on {subscription.topic}",
        show=lambda s: _polled_consumers(s, subscription.topic),
    )


def _polled_consumers(snapshot: Snapshot, topic: str) -> int:
    return sum(1 for c in snapshot.consumers if c.topic == topic and c.subscription == SUB)


def ranges_by_position(frame: Any, label: str) -> list[tuple[int, str, list[list[int]]]]:
    mine = frame[frame["label"] == label]
    if "source" in mine:
        mine = mine[mine["source"] == "broker"]
    out: dict[int, tuple[str, list[list[int]]]] = {}
    for row in mine.itertuples(index=False):
        _, ranges = out.setdefault(int(row.position), (str(row.consumer_name), []))
        ranges.append([int(row.start), int(row.end)])
    return [(p, n, sorted(r)) for p, (n, r) in sorted(out.items())]


RELEASES = {
    **{f"{line}-default-100-points": (line, None, 100) for line in LIVE_LINES},
    "4.0-9-points": ("4.0", NINE_POINTS, 9),
}


@pytest.mark.parametrize(("line", "settings", "points"), RELEASES.values(), ids=RELEASES.keys())
def test_key_shared_map_live_no_drift_and_exact_what_if(
    broker_pool: BrokerPool,
    recorder: Any,
    line: str,
    settings: dict[str, str] | None,
    points: int,
) -> None:
    broker = broker_pool.get(settings, version=line)
    rec = recorder(broker)
    sub = Subscription(broker, new_topic("ksmap"))
    label = f"{sub.topic} | {SUB}"
    try:
        first = None
        for name in ("alpha", "dup", "beta", "dup"):
            joined = sub.join(name)
            first = first or (joined if name == "dup" else None)
        assert first is not None
        first.close()  # frees name index 0 of "dup"; the rejoining one takes it
        sub.join("dup")
        settled_poll(rec, sub, 4)
        output = rec.run(PLUGIN, subscription=label, add_consumer="delta")
        assert output.result.summary["pulsar"] == modelled_line(line)
        row = output.result.frames["subscriptions"].set_index("label").loc[label]
        assert (row["selector"], row["replica_points"]) == ("consistent", points)
        assert not row["drift"], row["drift_reason"]
        assert row["drift_hashes"] == 0
        predicted = ranges_by_position(output.result.frames["what_if_ranges"], label)

        sub.join("delta")
        settled_poll(rec, sub, 5)
        after = rec.run(PLUGIN, subscription=label)
        observed = ranges_by_position(after.result.frames["ranges"], label)
        assert [(p, n, owned(r)) for p, n, r in observed] == [
            (p, n, owned(r)) for p, n, r in predicted
        ]
        if modelled_line(line) == "4.0":  # 4.x lists merged ranges, as the model's are
            assert observed == predicted
        assert observed[-1][1] == "delta"
        broker_now = [(n, sorted(r)) for n, r in sub.broker_ranges()]
        assert [(n, r) for _, n, r in observed] == broker_now
        assert not after.result.frames["subscriptions"].set_index("label").loc[label, "drift"]
        assert_keys_reach_the_model_consumer(sub, rec.snapshots[-1], line)
    finally:
        sub.close()


def assert_keys_reach_the_model_consumer(sub: Subscription, polled: Snapshot, line: str) -> None:
    """Keys sent now reach the consumer (by name) that the model rebuilt from the polled
    snapshot names, as the plugin's lookup does for one key."""
    mine = sorted(
        (c for c in polled.consumers if c.topic == sub.topic and c.subscription == SUB),
        key=lambda c: c.connected_since,
    )
    members = [Member(c.consumer_name, c.hash_ranges) for c in mine]
    model = rebuild("consistent", members, pulsar=modelled_line(line))
    assert model.selector is not None and not model.drift
    keys = [f"{line}-key-{i}" for i in range(300)]
    producer = sub.client.create_producer(sub.topic, batching_enabled=False)
    for key in keys:
        producer.send(key.encode(), partition_key=key)
    producer.close()
    wait_for(lambda: sub.receiver.count() >= len(keys), what=f"{len(keys)} keys delivered")
    wrong = []
    for key in keys:
        chosen = model.selector.select_key(key.encode())
        if chosen is None or chosen.name != sub.receiver.got[key]:
            wrong.append((key, sub.receiver.got[key], chosen))
    assert not wrong, f"{len(wrong)} of {len(keys)} keys reached another consumer: {wrong[:3]}"


def test_key_shared_map_live_lookup_names_the_receiving_consumer(
    pulsar: LocalPulsar, recorder: Any
) -> None:
    rec = recorder(pulsar)
    sub = Subscription(pulsar, new_topic("kslookup"))
    label = f"{sub.topic} | {SUB}"
    try:
        for name in ("north", "south", "east"):
            sub.join(name)
        settled_poll(rec, sub, 3)
        keys = [f"account-{i}" for i in range(30)]
        named = {
            key: rec.run(PLUGIN, subscription=label, key=key).result.summary["lookup"]
            for key in keys
        }
        producer = sub.client.create_producer(sub.topic, batching_enabled=False)
        for key in keys:
            producer.send(key.encode(), partition_key=key)
        producer.close()
        wait_for(lambda: sub.receiver.count() == len(keys), what="every key delivered")
        assert {k: v["consumer"] for k, v in named.items()} == sub.receiver.got
        assert all(v["consumer"] == v["model_consumer"] for v in named.values())
        assert len(set(sub.receiver.got.values())) == 3
    finally:
        sub.close()


def test_key_shared_map_live_cli_json(pulsar: LocalPulsar, tmp_path: Path) -> None:
    sub = Subscription(pulsar, new_topic("kscli"))
    label = f"{sub.topic} | {SUB}"
    store = tmp_path / "store"
    try:
        for name in ("one", "two"):
            sub.join(name)
        wait_for(lambda: len(sub.broker_ranges()) == 2, what="two consumers")
        wait_for_bulk(
            pulsar, sub.topic, lambda s: listed_consumers(s, SUB) == ["one", "two"], what="both"
        )
        done = run_lens("collect", "--once", "--admin-url", pulsar.admin_url, "--store", str(store))
        assert done.returncode == 0, done.stdout + done.stderr
        result = analyze_json(store, label)
        (row,) = [r for r in result["frames"]["subscriptions"] if r["label"] == label]
        assert (row["selector"], row["replica_points"], row["drift"]) == ("consistent", 100, False)
        assert result["summary"]["what_if"]["change"] == "add three"
        assert result["summary"]["what_if"]["losers"] == ["one", "two"]
        ranges = {
            (r["consumer_name"], r["start"], r["end"])
            for r in result["frames"]["ranges"]
            if r["label"] == label
        }
        assert ranges == {(n, s, e) for n, rs in sub.broker_ranges() for s, e in rs}
    finally:
        sub.close()


def analyze_json(store: Path, label: str) -> dict[str, Any]:
    done = run_lens(
        "analyze",
        "key-shared-map",
        "--store",
        str(store),
        "--json",
        "--param",
        f"subscription={label}",
        "--param",
        "add_consumer=three",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["plugin"] == "key-shared-map"
    return result
