"""stuck-hashes on a real Pulsar 4.0 broker (and on 4.2.4, which the product models as 4.0):
a Key_Shared consumer that never acknowledges.

c1 receives keyed messages and holds them; c2 joins and takes part of the hash space; the
broker drains, for c1, the pending hashes that moved to c2; messages sent with those keys wait.
After K polls the plugin must flag exactly those hashes and name c1; once c1 acknowledges,
they clear. The classic dispatcher instead holds c2 back until c1's messages are acknowledged:
on each line, 3.0.7's only Key_Shared dispatcher and a switch away on 4.x.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pulsar
import pytest

from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from tests.brokers import LIVE_LINES, BrokerPool, lines_modelled_as, modelled_line
from tests.live.lens_polls import (
    Recorder,
    listed_consumers,
    new_topic,
    pulsar_client,
    topic_stats,
    wait_for,
    wait_for_bulk,
)

SUB = "orders-ks"
KEYS = [f"customer-{i}" for i in range(40)]
POLLS = 3
CLASSIC = {"subscriptionKeySharedUseClassicPersistentImplementation": "true"}


def sticky_hash(key: str) -> int:
    """The 4.0 consistent-hashing selector's sticky hash of a partition key."""
    return murmur3_31(key.encode()) % 65535 + 1


def consumer_stats(broker: LocalPulsar, topic: str, name: str) -> dict[str, Any]:
    consumers = topic_stats(broker, topic)["subscriptions"][SUB]["consumers"]
    (found,) = [c for c in consumers if c["consumerName"] == name]
    return dict(found)


def subscribe(client: pulsar.Client, topic: str, name: str, **kwargs: Any) -> pulsar.Consumer:
    return client.subscribe(
        topic, SUB, consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name, **kwargs
    )


class Acking:
    """A message listener that acknowledges and remembers each message's key."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        with self._lock:
            self.keys.append(message.partition_key())
        consumer.acknowledge(message)

    def count(self) -> int:
        with self._lock:
            return len(self.keys)


def ack_everything(consumer: pulsar.Consumer, count: int) -> None:
    for _ in range(count):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))


def blocked_attempts(broker: LocalPulsar, topic: str) -> dict[int, int]:
    """blockedAttempts of each hash draining for c1, as the broker counts them now."""
    draining = consumer_stats(broker, topic, "c1")["drainingHashes"]
    return {int(d["hash"]): int(d["blockedAttempts"]) for d in draining}


def send(producer: pulsar.Producer, keys: list[str], tag: str) -> None:
    for key in keys:
        producer.send(f"{tag}-{key}".encode(), partition_key=key)


def only(frame: pd.DataFrame, topic: str) -> pd.DataFrame:
    return frame[frame["topic"] == topic].reset_index(drop=True)


@pytest.mark.parametrize("line", lines_modelled_as("4.0"))
def test_stuck_hashes_live_flags_the_held_hashes_then_clears(
    broker_pool: BrokerPool, tmp_path: Path, line: str
) -> None:
    pulsar = broker_pool.get(version=line)
    topic = new_topic("stuck")
    client = pulsar_client(pulsar)
    recorder = Recorder(pulsar, tmp_path / "store")
    try:
        c1 = subscribe(client, topic, "c1")
        producer = client.create_producer(topic, batching_enabled=False)
        send(producer, KEYS, "first")
        wait_for(
            lambda: consumer_stats(pulsar, topic, "c1")["unackedMessages"] == len(KEYS),
            what="c1 to hold every first message",
        )
        on_c2 = Acking()
        subscribe(client, topic, "c2", message_listener=on_c2)
        c2_ranges = wait_for(
            lambda: consumer_stats(pulsar, topic, "c2").get("keyHashRangeArrays"),
            what="c2's hash ranges",
        )
        moved = [k for k in KEYS if any(a <= sticky_hash(k) <= b for a, b in c2_ranges)]
        expected = sorted({sticky_hash(k) for k in moved})
        assert moved, "c2 took no hash of the pending keys; use more keys"
        draining = consumer_stats(pulsar, topic, "c1")["drainingHashes"]
        assert sorted(d["hash"] for d in draining) == expected

        # the poll details the topic once its bulk stats list the Key_Shared consumers
        wait_for_bulk(
            pulsar, topic, lambda s: listed_consumers(s, SUB) == ["c1", "c2"], what="c1 and c2"
        )
        sent = Counter(sticky_hash(k) for k in moved)
        for round_ in range(POLLS):
            send(producer, moved, f"blocked-{round_}")
            wanted = {h: n * (round_ + 1) for h, n in sent.items()}
            wait_for(
                lambda w=wanted: all(
                    blocked_attempts(pulsar, topic).get(h, 0) >= n for h, n in w.items()
                ),
                what=f"a blocked attempt for each message of round {round_}: {wanted}",
                seen=lambda: blocked_attempts(pulsar, topic),
            )
            recorder.poll()

        output = recorder.run(StuckHashes(), polls=POLLS, seconds=3600)
        hashes = only(output.result.frames["hashes"], topic)
        stuck = hashes[hashes["state"] == "stuck"]
        assert sorted(int(h) for h in stuck["hash"]) == expected
        assert set(hashes["state"]) == {"stuck"}
        assert set(stuck["consumer_name"]) == {"c1"}
        assert set(stuck["waiting_consumer"]) == {"c2"}
        assert set(stuck["holder_unacked_messages"]) == {len(KEYS)}
        assert (stuck["polls_without_progress"] == POLLS).all()
        # at least one blocked attempt per message sent to a draining hash (retries add more)
        per_hash = pd.Series(sent) * POLLS
        attempts = stuck.set_index("hash")["blocked_attempts"]
        assert (attempts >= per_hash.reindex(attempts.index)).all()
        assert (stuck["blocked_growth"] > 0).all()
        assert (stuck["msg_in_replay"] >= len(moved)).all()
        assert only(output.result.frames["violations"], topic).empty
        assert on_c2.count() == 0, "a blocked message reached c2 before c1 acknowledged"
        # key-shared-map's lookup names both sides of a moved key: the consumer that owns its
        # hash now (c2) and the one it still drains to (c1), as the broker reports them
        label = f"{topic} | {SUB}"
        for key in (moved[0], next(k for k in KEYS if k not in moved)):
            found = recorder.run(KeySharedMap(), subscription=label, key=key).result
            lookup = found.summary["lookup"]
            draining_for = "c1" if key in moved else None
            owner = "c2" if key in moved else "c1"
            assert (lookup["hash"], lookup["consumer"], lookup["draining_for"]) == (
                sticky_hash(key),
                owner,
                draining_for,
            )

        ack_everything(c1, len(KEYS))
        wait_for(
            lambda: consumer_stats(pulsar, topic, "c1")["drainingHashesCount"] == 0,
            what="the draining hashes to clear",
        )
        wait_for(lambda: on_c2.count() == len(moved) * POLLS, what="c2 to get the held messages")
        recorder.poll()
        after = recorder.run(StuckHashes(), polls=POLLS, seconds=3600)
        assert only(after.result.frames["hashes"], topic).empty
    finally:
        recorder.close()
        client.close()


CLASSIC_BROKERS = {
    f"{line}-default" if modelled_line(line) == "3.0" else f"{line}-classic": (
        None if modelled_line(line) == "3.0" else CLASSIC,
        line,
    )
    for line in LIVE_LINES
}
"""The classic dispatcher on each line: 3.0's only one, 4.x's behind its switch."""


@pytest.mark.parametrize(("settings", "line"), CLASSIC_BROKERS.values(), ids=CLASSIC_BROKERS.keys())
def test_stuck_hashes_live_classic_dispatcher_holds_back_the_new_consumer(
    broker_pool: BrokerPool, tmp_path: Path, settings: dict[str, str] | None, line: str
) -> None:
    """The classic dispatcher: 4.0.7 and 4.2.4 with the switch that brings it back, and
    3.0.7, whose only Key_Shared dispatcher it is."""
    broker = broker_pool.get(settings, version=line)
    topic = new_topic("classic")
    client = pulsar_client(broker)
    recorder = Recorder(broker, tmp_path / "store")
    try:
        c1 = subscribe(client, topic, "c1")
        producer = client.create_producer(topic, batching_enabled=False)
        send(producer, KEYS, "first")
        wait_for(
            lambda: consumer_stats(broker, topic, "c1")["unackedMessages"] == len(KEYS),
            what="c1 to hold every message",
        )
        subscribe(client, topic, "c2", message_listener=Acking())
        joined = wait_for(
            lambda: topic_stats(broker, topic)["subscriptions"][SUB].get(
                "consumersAfterMarkDeletePosition"
            ),
            what="c2 among the recently joined consumers",
        )
        assert list(joined) == ["c2"]
        wait_for_bulk(
            broker, topic, lambda s: listed_consumers(s, SUB) == ["c1", "c2"], what="c1 and c2"
        )
        recorder.poll()
        time.sleep(1.0)  # held_for_s is the time between the polls that saw c2 held back
        recorder.poll()
        output = recorder.run(StuckHashes())
        held = only(output.result.frames["held_back"], topic)
        assert held["consumer_name"].tolist() == ["c2"]
        c2 = consumer_stats(broker, topic, "c2")
        assert held["read_position_when_joining"].tolist() == [c2["readPositionWhenJoining"]]
        assert held["held_for_s"].iloc[0] >= 0.9
        assert only(output.result.frames["hashes"], topic).empty

        ack_everything(c1, len(KEYS))
        wait_for(
            lambda: (
                not topic_stats(broker, topic)["subscriptions"][SUB].get(
                    "consumersAfterMarkDeletePosition"
                )
            ),
            what="c2 to be released",
        )
        recorder.poll()
        assert only(recorder.run(StuckHashes()).result.frames["held_back"], topic).empty
    finally:
        recorder.close()
        client.close()
