"""subscription-status on a real Pulsar 4.0 broker: STALL, STOP, OK and ERROR for real.

A consumer that receives but never acknowledges while messages keep arriving must be STALL;
a durable subscription whose consumer left, with a backlog, STOP; a consumer that acknowledges
everything OK; a consumer the broker blocks for too many unacknowledged messages ERROR.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
from pulsar import Consumer, ConsumerType, Message

from pulsar_lens.core.model import Snapshot
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from tests.brokers import BrokerPool
from tests.live.lens_polls import (
    Recorder,
    new_topic,
    pulsar_client,
    topic_stats,
    wait_for,
    wait_for_bulk,
)

POLLS = 3
BURST = 10
BLOCKING = {"maxUnackedMessagesPerConsumer": "10"}


class Holding:
    """A listener that receives and keeps every message without acknowledging it."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._lock = threading.Lock()

    def __call__(self, consumer: Consumer, message: Message) -> None:
        with self._lock:
            self.messages.append(message)

    def count(self) -> int:
        with self._lock:
            return len(self.messages)


def statuses(frame: pd.DataFrame, topic: str) -> dict[str, str]:
    mine = frame[frame["topic"] == topic]
    return dict(zip(mine["subscription"], mine["status"], strict=True))


def polled_subscriptions(snapshot: Snapshot, topic: str) -> dict[str, tuple[int | None, float]]:
    """(msgBacklog, msgRateOut) of each subscription of `topic` in a snapshot."""
    return {
        s.subscription: (s.msg_backlog, s.msg_rate_out or 0.0)
        for s in snapshot.subscriptions
        if s.topic == topic
    }


def shows_round(snapshot: Snapshot, topic: str, backlog: int, *, dispatched: bool) -> bool:
    """Whether a poll shows a round's messages: held by "stalled" (and dispatched to it since
    the previous refresh, when the round needs it), acknowledged on "healthy", and waiting
    on "stopped"."""
    subs = polled_subscriptions(snapshot, topic)
    stalled = subs.get("stalled", (None, 0.0))
    return (
        stalled[0] == backlog
        and (stalled[1] > 0 or not dispatched)
        and subs.get("healthy", (None, 0.0))[0] == 0
        and subs.get("stopped", (None, 0.0))[0] == backlog
    )


def test_subscription_status_live_stall_stop_and_ok(pulsar: LocalPulsar, tmp_path: Path) -> None:
    topic = new_topic("status")
    client = pulsar_client(pulsar)
    recorder = Recorder(pulsar, tmp_path / "store")
    try:
        shared = ConsumerType.Shared
        holding = Holding()
        client.subscribe(topic, "stalled", consumer_type=shared, message_listener=holding)
        client.subscribe(
            topic, "healthy", consumer_type=shared, message_listener=lambda c, m: c.acknowledge(m)
        )
        client.subscribe(topic, "stopped", consumer_type=shared).close()
        producer = client.create_producer(topic, batching_enabled=False)
        for round_ in range(POLLS):
            for i in range(BURST):
                producer.send(f"{round_}-{i}".encode())
            backlog = (round_ + 1) * BURST
            wait_for(lambda n=backlog: holding.count() == n, what="delivery")
            # STALL needs a dispatch rate in a poll after the first: the bulk stats show one
            # for a single refresh, so poll until a snapshot holds it
            recorder.poll_until(
                lambda s, n=backlog, later=round_ > 0: shows_round(s, topic, n, dispatched=later),
                what=f"a poll with round {round_}'s {backlog} messages",
                show=lambda s: polled_subscriptions(s, topic),
            )

        output = recorder.run(SubscriptionStatus(), window=POLLS)
        status = output.result.frames["status"]
        assert statuses(status, topic) == {"stalled": "STALL", "stopped": "STOP", "healthy": "OK"}
        rows = status[status["topic"] == topic].set_index("subscription")
        assert rows.loc["stalled", "msg_backlog"] == POLLS * BURST
        assert rows.loc["stalled", "backlog_change"] == (POLLS - 1) * BURST
        assert rows.loc["stopped", "consumer_count"] == 0
        assert rows.loc["stopped", "msg_backlog"] == POLLS * BURST
        broker = topic_stats(pulsar, topic)["subscriptions"]
        assert broker["stalled"]["unackedMessages"] == POLLS * BURST
        assert broker["stalled"]["lastAckedTimestamp"] == 0
    finally:
        recorder.close()
        client.close()


def test_subscription_status_live_error_when_blocked_on_unacked(
    broker_pool: BrokerPool, tmp_path: Path
) -> None:
    broker = broker_pool.get(BLOCKING)
    topic = new_topic("blocked")
    client = pulsar_client(broker)
    recorder = Recorder(broker, tmp_path / "store")
    try:
        holding = Holding()
        client.subscribe(
            topic, "greedy", consumer_type=ConsumerType.Shared, message_listener=holding
        )
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(str(i).encode())
        wait_for(
            lambda: topic_stats(broker, topic)["subscriptions"]["greedy"]["consumers"][0][
                "blockedConsumerOnUnackedMsgs"
            ],
            what="the broker to block the consumer",
        )
        wait_for_bulk(
            broker,
            topic,
            lambda stats: stats["subscriptions"]["greedy"]["consumers"][0][
                "blockedConsumerOnUnackedMsgs"
            ],
            what="the consumer blocked",
        )
        recorder.poll()
        output = recorder.run(SubscriptionStatus())
        row = output.result.frames["status"].set_index("topic").loc[topic]
        assert row["status"] == "ERROR"
        assert "unacknowledged" in row["reason"]
        assert holding.count() < 30
    finally:
        recorder.close()
        client.close()
