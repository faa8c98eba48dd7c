"""bundle-ownership on a real Pulsar 4.0 broker: unloading a bundle shows as an event.

`PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/unload` releases a bundle. With no client
the bundle stays unowned until a lookup re-acquires it (on a single standalone, by the same
broker): `unloaded` then `reacquired`. With a connected consumer the client reconnects at once,
so polls see the same owner but a new connection: `reloaded`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulsar import ConsumerType

from pulsar_lens.collectors.namespaces import bundle_for, parse_boundaries
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from tests.live.lens_polls import (
    Recorder,
    admin,
    pulsar_client,
    topic_stats,
    wait_for,
    wait_for_bulk,
)


def new_namespace(broker: LocalPulsar) -> tuple[str, tuple[int, ...]]:
    """A fresh namespace (default bundles) that no other test touches, and its boundaries."""
    namespace = f"public/lens-own-{uuid.uuid4().hex[:8]}"
    admin(broker, "PUT", f"/admin/v2/namespaces/{namespace}")
    boundaries = parse_boundaries(
        admin(broker, "GET", f"/admin/v2/namespaces/{namespace}/bundles").json()
    )
    return namespace, boundaries


def topic_away_from_system_topics(namespace: str, boundaries: tuple[int, ...], prefix: str) -> str:
    """A topic whose bundle holds no system topic of the namespace (their readers reconnect)."""
    system = bundle_for(f"persistent://{namespace}/__change_events", boundaries)
    for i in range(100):
        topic = f"persistent://{namespace}/{prefix}-{i}"
        if bundle_for(topic, boundaries) != system:
            return topic
    raise AssertionError("no topic name away from the system topic's bundle")


def broker_bundle(broker: LocalPulsar, topic: str) -> str:
    path = topic.replace("persistent://", "/lookup/v2/topic/persistent/")
    return admin(broker, "GET", f"{path}/bundle").text.strip()  # plain text, not JSON


def consumer_since(stats: Mapping[str, Any]) -> list[str]:
    """connectedSince of each consumer of the "watch" subscription in a topic's stats."""
    return [c["connectedSince"] for c in stats["subscriptions"]["watch"]["consumers"]]


def publisher_since(stats: Mapping[str, Any]) -> list[str]:
    """connectedSince of each producer in a topic's stats."""
    return [p["connectedSince"] for p in stats["publishers"]]


def owner_of(recorder: Recorder, namespace: str, bundle: str) -> str | None:
    (record,) = [
        b for b in recorder.snapshots[-1].bundles if (b.namespace, b.bundle) == (namespace, bundle)
    ]
    return record.owner_broker


def bundle_events(recorder: Recorder, namespace: str, bundle: str) -> list[tuple[str, str]]:
    output = recorder.run(BundleOwnership(), namespace=namespace)
    events = output.result.frames["events"]
    mine = events[events["bundle"] == bundle]
    return list(zip(mine["kind"], mine["source"], strict=True))


def test_bundle_ownership_live_unload_then_reacquire(pulsar: LocalPulsar, tmp_path: Path) -> None:
    namespace, boundaries = new_namespace(pulsar)
    topic = topic_away_from_system_topics(namespace, boundaries, "quiet")
    client = pulsar_client(pulsar)
    recorder = Recorder(pulsar, tmp_path / "store", namespaces=[namespace])
    try:
        producer = client.create_producer(topic)
        producer.send(b"hello")
        producer.close()
        bundle = broker_bundle(pulsar, topic)
        assert bundle == bundle_for(topic, boundaries)
        recorder.poll()
        broker_id = owner_of(recorder, namespace, bundle)
        assert broker_id is not None

        admin(pulsar, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload")
        recorder.poll()
        assert owner_of(recorder, namespace, bundle) is None

        client.create_producer(topic).close()  # a lookup: the broker takes the bundle again
        recorder.poll()
        assert owner_of(recorder, namespace, bundle) == broker_id
        assert bundle_events(recorder, namespace, bundle) == [
            ("reacquired", "snapshots"),
            ("unloaded", "snapshots"),
        ]
        stored = recorder.store.read("events").to_pandas()
        stored = stored[stored["subject"] == f"{namespace}/{bundle}"]
        assert stored[["kind", "before", "after"]].fillna("-").values.tolist() == [
            ["bundle_owner_changed", broker_id, "-"],
            ["bundle_owner_changed", "-", broker_id],
        ]
    finally:
        recorder.close()
        client.close()


def test_bundle_ownership_live_unload_under_a_connected_consumer(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    namespace, boundaries = new_namespace(pulsar)
    topic = topic_away_from_system_topics(namespace, boundaries, "busy")
    client = pulsar_client(pulsar)
    recorder = Recorder(pulsar, tmp_path / "store", namespaces=[namespace])
    try:
        client.subscribe(topic, "watch", consumer_type=ConsumerType.Shared)
        bundle = broker_bundle(pulsar, topic)
        before = topic_stats(pulsar, topic)["subscriptions"]["watch"]["consumers"][0]
        since = before["connectedSince"]
        wait_for_bulk(pulsar, topic, lambda s: consumer_since(s) == [since], what="the consumer")
        recorder.poll()
        assert topic in {c.topic for c in recorder.snapshots[-1].consumers}

        admin(pulsar, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload")
        wait_for(
            lambda: [
                c
                for c in topic_stats(pulsar, topic)["subscriptions"]["watch"]["consumers"]
                if c["connectedSince"] != before["connectedSince"]
            ],
            what="the consumer to reconnect",
        )
        wait_for_bulk(
            pulsar,
            topic,
            lambda s: consumer_since(s) not in ([], [since]),
            what="the consumer reconnected",
        )
        recorder.poll()
        assert bundle_events(recorder, namespace, bundle) == [("reloaded", "snapshots")]
    finally:
        recorder.close()
        client.close()


def test_bundle_ownership_live_unload_under_a_connected_producer(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    """No consumer at all: the producer's reconnection (its publisher's connectedSince) is
    what shows the unload and re-acquire between two polls."""
    namespace, boundaries = new_namespace(pulsar)
    topic = topic_away_from_system_topics(namespace, boundaries, "sender")
    client = pulsar_client(pulsar)
    recorder = Recorder(pulsar, tmp_path / "store", namespaces=[namespace])
    try:
        producer = client.create_producer(topic)
        producer.send(b"hello")
        bundle = broker_bundle(pulsar, topic)
        before = topic_stats(pulsar, topic)["publishers"][0]["connectedSince"]
        wait_for_bulk(pulsar, topic, lambda s: publisher_since(s) == [before], what="the producer")
        recorder.poll()
        (record,) = [t for t in recorder.snapshots[-1].topics if t.topic == topic]
        assert record.oldest_publisher_since is not None

        admin(pulsar, "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/unload")
        wait_for(
            lambda: [
                p for p in topic_stats(pulsar, topic)["publishers"] if p["connectedSince"] != before
            ],
            what="the producer to reconnect",
        )
        wait_for_bulk(
            pulsar,
            topic,
            lambda s: publisher_since(s) not in ([], [before]),
            what="the producer reconnected",
        )
        recorder.poll()
        assert bundle_events(recorder, namespace, bundle) == [("reloaded", "snapshots")]
    finally:
        recorder.close()
        client.close()
