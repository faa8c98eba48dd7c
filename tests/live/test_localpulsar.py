"""The local standalone harness starts a real broker that serves admin and binary protocol."""

from __future__ import annotations

import uuid

import pulsar as pulsar_client
import requests

from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.lab.runtime import PULSAR_VERSION, find_java, java_version
from tests.brokers import BrokerPool


def test_localpulsar_serves_public_default(pulsar: LocalPulsar) -> None:
    resp = requests.get(f"{pulsar.admin_url}/admin/v2/namespaces/public", timeout=5)
    assert resp.status_code == 200
    assert "public/default" in resp.json()


def test_localpulsar_round_trips_a_message(pulsar: LocalPulsar) -> None:
    topic = f"persistent://public/default/harness-{uuid.uuid4().hex[:8]}"
    client = pulsar_client.Client(pulsar.service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "harness")
        producer = client.create_producer(topic)
        producer.send(b"hello")
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        assert msg.data() == b"hello"
    finally:
        client.close()


def test_localpulsar_runs_the_pinned_4_0_release(pulsar: LocalPulsar) -> None:
    resp = requests.get(f"{pulsar.admin_url}/admin/v2/brokers/version", timeout=5)
    assert resp.status_code == 200
    assert resp.text.strip('"') == PULSAR_VERSION
    assert PULSAR_VERSION.startswith("4.0.")
    assert java_version(find_java()) >= (17, 0, 17)


def test_localpulsar_applies_extra_settings(broker_pool: BrokerPool) -> None:
    broker = broker_pool.get({"subscriptionKeySharedConsistentHashingReplicaPoints": "9"})
    resp = requests.get(f"{broker.admin_url}/admin/v2/brokers/configuration/runtime", timeout=5)
    assert resp.status_code == 200
    assert resp.json()["subscriptionKeySharedConsistentHashingReplicaPoints"] == "9"
