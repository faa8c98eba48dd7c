"""key-distribution against real brokers: every key produced to a Key_Shared subscription (one
topic, and one of three partitions) is sampled, and key-distribution on Spark gives each
consumer exactly the messages it received, on 4.0.7 under consistent hashing and under auto
split, and on 3.0.7 under its consistent hashing, each counted on the line it reports."""

from __future__ import annotations

import os
import random
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pulsar as pulsar_client_lib
import pytest

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.sampling import KeySampling
from pulsar_lens.core.digest import snapshot_id
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.key_distribution import KeyDistribution
from tests.brokers import BrokerPool
from tests.live.lens_polls import admin, listed_consumers, pulsar_client, wait_for, wait_for_bulk

SUB = "lens-dist"
CONSUMERS = ("c-alpha", "c-beta", "c-gamma")
MESSAGES = 600  # per topic; the sampler reads up to PER_TOPIC of each partition
PER_TOPIC = 1000
PARTITIONS = 3
AUTO_SPLIT = {"subscriptionKeySharedUseConsistentHashing": "false"}


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """The process's one Spark session (`tests/spark/conftest.py` makes the same)."""
    os.environ.setdefault("SPARK_TESTING", "1")
    from pulsar_lens.plugins.spark import session

    yield session.get("local[2]")


@dataclass
class Received:
    """What each consumer received, per topic (a partitioned topic counted as a whole)."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def listener(self, topic: str, name: str) -> Any:
        def on_message(consumer: Any, message: Any) -> None:
            with self.lock:
                self.counts[(topic, name)] += 1
            consumer.acknowledge(message)

        return on_message

    def all_of(self, topic: str) -> bool:
        with self.lock:
            return sum(n for (t, _), n in self.counts.items() if t == topic) == MESSAGES

    def of(self, topic: str) -> dict[str, int]:
        with self.lock:
            return {name: n for (t, name), n in self.counts.items() if t == topic}


def _keys(seed: int) -> list[str]:
    """MESSAGES keys: 150 customers, some far busier than others, and one hot key."""
    rng = random.Random(seed)
    weights = [1 + (i % 7) ** 2 for i in range(150)]
    customers = rng.choices([f"customer-{i}" for i in range(150)], weights, k=MESSAGES - 60)
    return customers + ["hot"] * 60


def _settled(broker: LocalPulsar, namespace: str, topics: list[str]) -> Snapshot:
    """A poll that lists the three consumers, with their ranges, on every topic partition."""
    for topic in topics:  # the poll details a topic once its bulk stats list the consumers
        wait_for_bulk(
            broker,
            topic,
            lambda s: listed_consumers(s, SUB) == sorted(CONSUMERS),
            what=f"the consumers {CONSUMERS}",
        )
    client = AdminClient(broker.admin_url, retries=1)
    try:

        def ready() -> Snapshot | None:
            snapshot = poll(client, namespaces=[namespace])
            listed = Counter(
                c.topic for c in snapshot.consumers if c.subscription == SUB and c.hash_ranges
            )
            done = not snapshot.errors and all(listed[t] == len(CONSUMERS) for t in topics)
            return snapshot if done else None

        return wait_for(ready, what="a poll listing every consumer's ranges", timeout=90, every=0.5)
    finally:
        client.close()


def _produce_and_sample(broker: LocalPulsar, store: Store) -> tuple[list[str], Received]:
    """Two topics (one with PARTITIONS partitions), each with three Key_Shared consumers that
    joined before MESSAGES keyed messages; then one stored poll with every key sampled."""
    namespace = f"public/dist-{uuid.uuid4().hex[:8]}"
    admin(broker, "PUT", f"/admin/v2/namespaces/{namespace}")
    single, parted = f"persistent://{namespace}/orders", f"persistent://{namespace}/payments"
    admin(broker, "PUT", f"/admin/v2/persistent/{namespace}/payments/partitions", json=PARTITIONS)
    received = Received()
    client = pulsar_client(broker)
    try:
        for topic in (single, parted):
            for name in CONSUMERS:
                client.subscribe(
                    topic,
                    SUB,
                    consumer_type=pulsar_client_lib.ConsumerType.KeyShared,
                    consumer_name=name,
                    message_listener=received.listener(topic, name),
                )
        for seed, topic in enumerate((single, parted)):
            producer = client.create_producer(topic, batching_enabled=False)
            for i, key in enumerate(_keys(seed)):
                producer.send(f"m{i}".encode(), partition_key=key)
            producer.close()
        for topic in (single, parted):
            wait_for(partial(received.all_of, topic), what=f"every message of {topic}")
        partitions = [f"{parted}-partition-{i}" for i in range(PARTITIONS)]
        snapshot = _settled(broker, namespace, [single, *partitions])
        store.write(snapshot)
        sampling = KeySampling(
            store, service_url=broker.service_url, per_topic=PER_TOPIC, timeout=60
        )
        samples = sampling.sample(snapshot, snapshot_id(snapshot))
    finally:
        client.close()
    assert sorted(s.topic for s in samples) == sorted([single, *partitions])
    assert all(s.error is None and s.stopped == "caught-up" for s in samples), samples
    assert sum(len(s.records) for s in samples) == 2 * MESSAGES
    return [single, parted], received


def _predicted(frames: Any, topic: str) -> dict[str, int]:
    """Per consumer, the messages key-distribution counted over the topic's partitions."""
    rows = frames["consumers"]
    parents = [re.sub(r"-partition-\d+$", "", label.split(" | ")[0]) for label in rows["label"]]
    totals = rows[[p == topic for p in parents]].groupby("consumer_name")["messages"].sum()
    return {str(name): int(n) for name, n in totals.items()}


@pytest.mark.parametrize(
    ("line", "selector"),
    [("4.0", "consistent"), ("4.0", "auto-split"), ("3.0", "consistent")],
)
def test_key_distribution_predicts_what_each_consumer_received(
    broker_pool: BrokerPool, spark: object, tmp_path: Path, line: str, selector: str
) -> None:
    """On 3.0.7 (consistent hashing by default there) the analysis reads the version the
    brokers report and counts on 3.0's 31-bit ring and hash."""
    broker = broker_pool.get(AUTO_SPLIT if selector == "auto-split" else None, version=line)
    assert broker.version.startswith(f"{line}.")
    store = Store(tmp_path / "store")
    topics, received = _produce_and_sample(broker, store)
    result = runner.run(KeyDistribution(), store, use_cache=False, use_stored=False).result
    frames = result.frames
    for topic in topics:
        assert _predicted(frames, topic) == received.of(topic), topic
    assert set(frames["skew"]["selector"]) == {selector}
    assert (result.summary["pulsar"], result.summary["broker_versions"]) == (
        line,
        [broker.version],
    )
    assert result.summary["model"] == f"Pulsar {line} model (brokers: {broker.version})"
    assert result.summary["messages"] == 2 * MESSAGES and result.summary["uncovered"] == 0
    hot = frames["hot_keys"][frames["hot_keys"]["label"] == f"{topics[0]} | {SUB}"].iloc[0]
    assert (hot["key"], hot["messages"]) == ("hot", 60)
