"""key-distribution against a real 4.0 broker: the keys sampled from a Key_Shared topic, counted
on Spark under the ranges the broker reported, give each consumer exactly the messages it
received."""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pulsar as pulsar_client_lib

from lab.localpulsar import LocalPulsar
from tests.lens_cli import run_lens
from tests.live.lens_polls import admin, pulsar_client, wait_for

SUB = "lens-dist"
CONSUMERS = ("c-alpha", "c-beta", "c-gamma")
MESSAGES = 180  # under the sampler's 200 per topic, so every message is sampled


def test_key_distribution_predicts_what_each_consumer_received(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    namespace = f"public/dist-{uuid.uuid4().hex[:8]}"
    admin(pulsar, "PUT", f"/admin/v2/namespaces/{namespace}")
    topic = f"persistent://{namespace}/orders"
    rng = random.Random(7)
    keys = [f"customer-{rng.randint(0, 59)}" for _ in range(MESSAGES - 30)] + ["hot"] * 30
    received: Counter[str] = Counter()
    lock = threading.Lock()

    def listener(name: str) -> Any:
        def on_message(consumer: Any, message: Any) -> None:
            with lock:
                received[name] += 1
            consumer.acknowledge(message)

        return on_message

    client = pulsar_client(pulsar)
    try:
        for name in CONSUMERS:  # all connected before the first message
            client.subscribe(
                topic,
                SUB,
                consumer_type=pulsar_client_lib.ConsumerType.KeyShared,
                consumer_name=name,
                message_listener=listener(name),
            )
        producer = client.create_producer(topic, batching_enabled=False)
        for i, key in enumerate(keys):
            producer.send(f"m{i}".encode(), partition_key=key)
        wait_for(lambda: sum(received.values()) == MESSAGES, what="every message", timeout=30)
        wait_for(
            lambda: SUB in admin(pulsar, "GET", "/admin/v2/broker-stats/topics").text,
            what="the bulk stats listing the subscription",
        )
        store = tmp_path / "store"
        done = run_lens(
            "collect", "--once", "--sample-keys",
            "--admin-url", pulsar.admin_url,
            "--service-url", pulsar.service_url,
            "--namespace", namespace,
            "--store", str(store),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        client.close()
    done = run_lens(
        "analyze", "key-distribution", "--engine", "spark", "--store", str(store), "--json"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    rows = result["frames"]["consumers"]
    predicted = {r["consumer_name"]: r["messages"] for r in rows if r["label"].startswith(topic)}
    assert predicted == dict(received), (predicted, received)
    assert sum(predicted.values()) == MESSAGES
    hot = result["frames"]["hot_keys"][0]
    assert hot["key"] == "hot" and hot["messages"] == 30
