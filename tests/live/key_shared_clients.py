"""Key_Shared consumers driven in lockstep with our selector model, for the live tests.

Every consumer carries a `lens-handle` property, which the broker echoes in the stats'
`consumers[].metadata`, so each broker entry is matched to its model handle even when names
repeat. Receiving uses listeners and bounded waits; nothing blocks without a deadline.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pulsar
import requests

from pulsar_lens.core.assignments import Consumer
from pulsar_lens.core.logs import pulsar_client
from pulsar_lens.core.model import HashRange
from pulsar_lens.core.selectors import Impact, Selector
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.lab.processes import JVM_CHARSET

SUB = "lens"
HANDLE = "lens-handle"
RANGE_TEXT = re.compile(r"\d+")


def new_topic(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def jvm_name_encoding() -> str:
    """The charset the harness's brokers hash consumer names in (`String.getBytes()`)."""
    return JVM_CHARSET.lower()


def topic_stats(broker: LocalPulsar, topic: str) -> dict[str, Any]:
    path = topic.removeprefix("persistent://")
    resp = requests.get(f"{broker.admin_url}/admin/v2/persistent/{path}/stats", timeout=10)
    resp.raise_for_status()
    stats: dict[str, Any] = resp.json()
    return stats


class Group:
    """A Key_Shared subscription on one topic, and our selector fed the same joins/leaves."""

    def __init__(self, broker: LocalPulsar, topic: str, model: Selector, **subscribe: Any) -> None:
        self.broker = broker
        self.topic = topic
        self.model = model
        self.subscribe_args = subscribe
        self.client = pulsar_client(broker.service_url, operation_timeout_seconds=30)
        self.live: dict[Consumer, pulsar.Consumer] = {}
        self.handle_of: dict[str, Consumer] = {}
        self.received: dict[str, Consumer] = {}  # message payload -> receiving handle
        self.held: dict[Consumer, list[pulsar.Message]] = {}
        self.ack = True
        self._lock = threading.Lock()
        self._serial = 0

    def join(self, name: str, *, sticky: Sequence[HashRange] = ()) -> tuple[Consumer, Impact]:
        handle = Consumer(name, tuple(sticky))
        self._serial += 1
        tag = str(self._serial)
        self.live[handle] = self.client.subscribe(
            self.topic,
            SUB,
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=name,
            properties={HANDLE: tag},
            message_listener=self._listener(handle),
            **self.subscribe_args,
        )
        self.handle_of[tag] = handle
        return handle, self.model.add(handle)

    def leave(self, handle: Consumer) -> Impact:
        self.live.pop(handle).close()
        return self.model.remove(handle)

    def _listener(self, handle: Consumer) -> Callable[[pulsar.Consumer, pulsar.Message], None]:
        def on_message(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
            with self._lock:
                self.received[msg.data().decode()] = handle
                if self.ack:
                    consumer.acknowledge(msg)
                else:
                    self.held.setdefault(handle, []).append(msg)

        return on_message

    def broker_consumers(self) -> list[dict[str, Any]]:
        consumers: list[dict[str, Any]] = topic_stats(self.broker, self.topic)["subscriptions"][
            SUB
        ]["consumers"]
        return consumers

    def broker_ranges(self) -> list[tuple[Consumer, list[list[int]]]]:
        """The broker's (handle, keyHashRangeArrays) in the order the stats list them; a 3.0
        broker lists them as `keyHashRanges` texts ("[0, 4095]"), read in their order."""
        return [
            (
                self.handle_of[c["metadata"][HANDLE]],
                c.get("keyHashRangeArrays")
                or [[int(v) for v in RANGE_TEXT.findall(t)] for t in c.get("keyHashRanges") or []],
            )
            for c in self.broker_consumers()
        ]

    def model_ranges(self) -> list[tuple[Consumer, list[list[int]]]]:
        return [(c, [list(r) for r in rs]) for c, rs in self.model.ranges().items()]

    def wait_received(self, count: int, *, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return
            time.sleep(0.05)
        raise AssertionError(f"received {len(self.received)} of {count} within {timeout}s")

    def ack_held(self) -> None:
        with self._lock:
            self.ack = True
            for handle, messages in self.held.items():
                for msg in messages:
                    self.live[handle].acknowledge(msg)
            self.held.clear()

    def close(self) -> None:
        self.client.close()


def publish(
    client: pulsar.Client,
    topic: str,
    payloads_and_keys: Iterable[tuple[str, dict[str, str]]],
    **producer: Any,
) -> None:
    """Send each payload with its send() keyword arguments, flush, and fail on any error."""
    producer.setdefault("block_if_queue_full", True)
    prod = client.create_producer(topic, **producer)
    failures: list[str] = []

    def sent(result: pulsar.Result, _msg_id: object) -> None:
        if result != pulsar.Result.Ok:
            failures.append(str(result))

    try:
        for payload, kwargs in payloads_and_keys:
            prod.send_async(payload.encode(), sent, **kwargs)
        prod.flush()
    finally:
        prod.close()
    assert not failures, f"{len(failures)} sends failed, e.g. {failures[:3]}"
