"""`pulsar-lens collect` against a real Pulsar 4.0 broker: what it stores is what we created."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar as pulsar_client
import pytest
import requests

from pulsar_lens.cli.collect_cmd import admin_source
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.lens_cli import run_lens


def wait_bulk_stats(broker: LocalPulsar, words: list[str], *, timeout: float = 30.0) -> None:
    """Wait until GET /admin/v2/broker-stats/topics mentions every word.

    The broker rebuilds that answer every statsUpdateFrequencyInSecs (2 s here), and poll()
    reads it first: a topic or consumer it does not list yet is not polled.
    """
    deadline = time.monotonic() + timeout
    while True:
        resp = requests.get(f"{broker.admin_url}/admin/v2/broker-stats/topics", timeout=5)
        resp.raise_for_status()
        if all(word in resp.text for word in words):
            return
        assert time.monotonic() < deadline, f"broker-stats/topics never listed {words}"
        time.sleep(0.5)


@pytest.fixture
def workload(pulsar: LocalPulsar) -> Iterator[dict[str, str]]:
    """A fresh namespace with two topics, a Key_Shared consumer on one, and a producer."""
    namespace = f"public/lens-{uuid.uuid4().hex[:8]}"
    resp = requests.put(f"{pulsar.admin_url}/admin/v2/namespaces/{namespace}", timeout=10)
    assert resp.status_code in (200, 204), resp.text
    topics = [f"persistent://{namespace}/orders", f"persistent://{namespace}/payments"]
    client = pulsar_client.Client(pulsar.service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(
            topics[0],
            "lens-sub",
            consumer_type=pulsar_client.ConsumerType.KeyShared,
            consumer_name="lens-c0",
        )
        producer = client.create_producer(topics[1])
        producer.send(b"hello", partition_key="k1")
        wait_bulk_stats(pulsar, [f"{namespace}/orders", f"{namespace}/payments", "lens-c0"])
        yield {"namespace": namespace, "orders": topics[0], "payments": topics[1]}
        consumer.close()
    finally:
        client.close()


def test_collect_cli_once_stores_the_topics_created_here(
    pulsar: LocalPulsar, workload: dict[str, str], tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    result = run_lens(
        "collect", "--once", "--admin-url", pulsar.admin_url, "--store", str(store_dir)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("poll ") and " errors=0 " in lines[0]
    store = Store(store_dir)
    topics = store.read_latest("topics").to_pandas()
    mine = topics[topics["namespace"] == workload["namespace"]]["topic"].tolist()
    # the broker adds its own system topic (__change_events, for topic policies) beside ours
    ours = sorted(t for t in mine if not t.rsplit("/", 1)[1].startswith("__"))
    assert ours == sorted([workload["orders"], workload["payments"]])
    subs = store.read_latest("subscriptions").to_pandas()
    sub = subs[subs["topic"] == workload["orders"]]
    assert sub["subscription"].tolist() == ["lens-sub"]
    assert sub["type"].tolist() == ["Key_Shared"]
    consumers = store.read_latest("consumers").to_pandas()
    consumer = consumers[consumers["topic"] == workload["orders"]]
    assert consumer["consumer_name"].tolist() == ["lens-c0"]
    assert len(consumer["hash_ranges"].iloc[0]) > 0  # a lone consumer owns hash ranges
    index = store.snapshots()
    assert len(index) == 1 and not index["partial"].iloc[0]
    assert f"topics={len(topics)} " in lines[0]


def test_collect_cli_interval_prints_one_heartbeat_per_poll(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    started = time.monotonic()
    result = run_lens(
        "collect",
        "--interval",
        "1s",
        "--max-polls",
        "3",
        "--admin-url",
        pulsar.admin_url,
        "--store",
        str(store_dir),
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    beats = [line for line in result.stdout.splitlines() if line.startswith("poll ")]
    assert len(beats) == 3
    assert all(" errors=0 " in line for line in beats)
    assert len(Store(store_dir).snapshots()) == 3
    assert elapsed >= 1.6  # two waits of 1 s ±10% between three polls


def test_collect_loop_stores_a_consumer_joining_as_an_event(
    pulsar: LocalPulsar, workload: dict[str, str], tmp_path: Path
) -> None:
    source = admin_source(pulsar.admin_url, [workload["namespace"]])
    loop = PollLoop(source.poll, Store(tmp_path), diff=source.diff, on_heartbeat=lambda b: None)
    client = pulsar_client.Client(pulsar.service_url, operation_timeout_seconds=30)
    try:
        first = loop.poll_once()
        client.subscribe(
            workload["orders"],
            "lens-sub",
            consumer_type=pulsar_client.ConsumerType.KeyShared,
            consumer_name="lens-c1",
        )
        wait_bulk_stats(pulsar, ["lens-c1"])
        second = loop.poll_once()
    finally:
        client.close()
        source.close()
    assert first.errors == 0 and second.errors == 0
    events = loop.store.read("events").to_pandas()
    # the broker's own reader of the namespace's __change_events topic may join too
    joined = events[(events["kind"] == "consumer_joined") & (events["topic"] == workload["orders"])]
    assert joined["consumer_name"].tolist() == ["lens-c1"]
    assert joined["snapshot_id"].tolist() == [second.snapshot_id]
