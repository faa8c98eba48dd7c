"""The key sampler against a real 4.0 broker: every sampled key's hash lies in the ranges of the
consumer that received its messages, counts match what was published, and sampling leaves no
subscription behind; then `collect --once --sample-keys` feeds `analyze sticky-ranges`."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pulsar as pulsar_client_lib
import pytest

from pulsar_lens.collectors.keys import collect_key_samples, sample_keys
from pulsar_lens.core.keyload import UNCOVERED, compute_key_load
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.lens_cli import run_lens
from tests.live.lens_polls import admin, pulsar_client, topic_stats, wait_for

SUB = "lens-ks"
# (how the key is set, the key the broker routes by, messages): a skewed mix
PLAN: list[tuple[str, str, int]] = [
    ("ordering", "hot", 24),
    ("partition", "warm", 12),
    ("both", "both-ok", 4),  # ordering key "both-ok" beside partition key "pk-ignored"
    *[("partition", f"cold-{i}", 1) for i in range(6)],
    *[("ordering", f"chill-{i}", 1) for i in range(3)],
    ("none", "", 6),
]
KEYED = Counter({key: n for how, key, n in PLAN if how != "none"})
KEYLESS = sum(n for how, _, n in PLAN if how == "none")
TOTAL = sum(n for _, _, n in PLAN)


@dataclass(frozen=True)
class Workload:
    namespace: str
    topic: str
    received: dict[str, str]  # payload -> consumer name
    sent_keys: dict[str, str]  # payload -> routing key ("" for key-less)
    ranges: dict[str, list[tuple[int, int]]]  # consumer name -> broker keyHashRangeArrays
    subscriptions: frozenset[str]


def _send_all(producer: Any) -> dict[str, str]:
    sent: dict[str, str] = {}
    for how, key, count in PLAN:
        for i in range(count):
            payload = f"{how}-{key}-{i}"
            if how == "ordering":
                producer.send(payload.encode(), ordering_key=key)
            elif how == "partition":
                producer.send(payload.encode(), partition_key=key)
            elif how == "both":
                producer.send(payload.encode(), partition_key="pk-ignored", ordering_key=key)
            else:
                producer.send(payload.encode())
            sent[payload] = key
    return sent


@pytest.fixture(scope="module")
def workload(pulsar: LocalPulsar) -> Iterator[Workload]:
    """A Key_Shared subscription of two consumers that received every message published."""
    namespace = f"public/keys-{uuid.uuid4().hex[:8]}"
    admin(pulsar, "PUT", f"/admin/v2/namespaces/{namespace}")
    topic = f"persistent://{namespace}/orders"
    client = pulsar_client(pulsar)
    received: dict[str, str] = {}
    lock = threading.Lock()

    def listener(name: str) -> Any:
        def on_message(consumer: Any, message: Any) -> None:
            with lock:
                received[message.data().decode()] = name
            consumer.acknowledge(message)

        return on_message

    try:
        for name in ("c0", "c1"):
            client.subscribe(
                topic,
                SUB,
                consumer_type=pulsar_client_lib.ConsumerType.KeyShared,
                consumer_name=name,
                message_listener=listener(name),
            )
        producer = client.create_producer(topic, batching_enabled=False)
        sent = _send_all(producer)
        wait_for(lambda: len(received) == TOTAL, what="every message received", timeout=30)
        stats = topic_stats(pulsar, topic)
        ranges = {
            c["consumerName"]: [tuple(r) for r in c["keyHashRangeArrays"]]
            for c in stats["subscriptions"][SUB]["consumers"]
        }
        yield Workload(
            namespace, topic, dict(received), sent, ranges, frozenset(stats["subscriptions"])
        )
    finally:
        client.close()


def _in(hash_value: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= hash_value <= end for start, end in ranges)


def test_key_sampler_hashes_land_in_the_receiving_consumers_ranges(
    pulsar: LocalPulsar, workload: Workload
) -> None:
    (sample,) = collect_key_samples(pulsar.service_url, [workload.topic], timeout=30)
    assert sample.error is None and sample.stopped == "caught-up"
    receiver_of_key: dict[str, set[str]] = {}
    for payload, key in workload.sent_keys.items():
        receiver_of_key.setdefault(key, set()).add(workload.received[payload])
    assert len(sample.records) == sum(KEYED.values())
    for record in sample.records:
        (receiver,) = receiver_of_key[record.key]  # the broker keeps a key on one consumer
        assert _in(record.sticky_hash, workload.ranges[receiver]), (record, workload.ranges)


def test_key_sampler_counts_what_was_published_in_the_window(
    pulsar: LocalPulsar, workload: Workload
) -> None:
    (sample,) = collect_key_samples(pulsar.service_url, [workload.topic], timeout=30)
    assert Counter(r.key for r in sample.records) == KEYED
    assert sample.read == TOTAL and sample.unresolved == KEYLESS  # no sequence id in 3.13
    assert all(r.topic == workload.topic and r.publish_time for r in sample.records)


def test_key_sampler_leaves_no_subscription_behind(pulsar: LocalPulsar, workload: Workload) -> None:
    sample_keys(pulsar.service_url, [workload.topic], timeout=30)
    wait_for(
        lambda: (
            frozenset(topic_stats(pulsar, workload.topic)["subscriptions"])
            == workload.subscriptions
        ),
        what="the subscriptions as before sampling",
        timeout=10,
    )
    backlog = topic_stats(pulsar, workload.topic)["subscriptions"][SUB]["msgBacklog"]
    assert backlog == 0


def test_key_sampler_stops_at_the_per_topic_limit(pulsar: LocalPulsar, workload: Workload) -> None:
    (sample,) = collect_key_samples(pulsar.service_url, [workload.topic], per_topic=10, timeout=30)
    assert sample.read == 10 and sample.stopped == "limit"


def test_key_load_from_samples_matches_what_each_consumer_received(
    pulsar: LocalPulsar, workload: Workload
) -> None:
    records = sample_keys(pulsar.service_url, [workload.topic], timeout=30)
    load = compute_key_load(pd.DataFrame({"key": [r.key for r in records]}), workload.ranges)
    keyed_received = Counter(
        consumer for payload, consumer in workload.received.items() if workload.sent_keys[payload]
    )
    got = dict(zip(load["consumer_name"], load["sampled_messages"], strict=True))
    assert UNCOVERED not in got
    assert got == {name: keyed_received.get(name, 0) for name in workload.ranges}


def test_key_sampler_reads_every_partition_of_a_partitioned_topic(pulsar: LocalPulsar) -> None:
    topic = f"persistent://public/default/keys-parted-{uuid.uuid4().hex[:8]}"
    admin(
        pulsar,
        "PUT",
        topic.replace("persistent://", "/admin/v2/persistent/") + "/partitions",
        json=2,
    )
    client = pulsar_client(pulsar)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        keys = [f"k{i}" for i in range(12)]
        for key in keys:
            producer.send(key.encode(), partition_key=key)
    finally:
        client.close()
    records = sample_keys(pulsar.service_url, [topic], timeout=30)
    assert sorted(r.key for r in records) == sorted(keys)
    assert {r.topic for r in records} == {f"{topic}-partition-0", f"{topic}-partition-1"}


def _bulk_stats_list(pulsar: LocalPulsar, words: list[str]) -> bool:
    text = admin(pulsar, "GET", "/admin/v2/broker-stats/topics").text
    return all(word in text for word in words)


def test_collect_sample_keys_feeds_sticky_ranges(
    pulsar: LocalPulsar, workload: Workload, tmp_path: Path
) -> None:
    wait_for(
        lambda: _bulk_stats_list(pulsar, [workload.topic.split("//")[1], SUB]),
        what="the bulk stats listing the topic",
    )
    store_dir = tmp_path / "store"
    started = time.monotonic()
    done = run_lens(
        "collect", "--once", "--sample-keys",
        "--admin-url", pulsar.admin_url,
        "--service-url", pulsar.service_url,
        "--namespace", workload.namespace,
        "--store", str(store_dir),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - started < 60
    store = Store(store_dir)
    rows = store.read_latest("key_samples").to_pandas()
    assert set(rows["topic"]) == {workload.topic}
    assert Counter(rows["key"]) == KEYED

    done = run_lens("analyze", "sticky-ranges", "--store", str(store_dir), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    plan = result["summary"]["plan"]
    assert plan["samples"] == sum(KEYED.values())
    assert plan["sampled_imbalance"] is not None and plan["sampled_imbalance"] >= 1.0
    shares = [row["sampled_share"] for row in result["frames"]["plan_balance"]]
    assert sum(shares) == pytest.approx(1.0)
