"""The demo's payments showcase keeps itself: payments-ok leaves and joins again when the
broker reports the subscription drains no hashes any more (after a reconnection of the demo's
client handed payments-ok the held messages). The broker's own answers are tested live in
tests/live/test_demo_live.py; here the loop's logic, and the reading of an answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pulsar_lens.lab.demo import ACCOUNTS, PAYMENTS, DemoSettings, DemoWorkloads
from tests.fake_admin import Answer, FakeAdmin, Seen

SUBSCRIPTION = "payments-by-account"
WAIT = 30.0


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class FakeConsumer:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self._log = name, log

    def close(self) -> None:
        self._log.append(f"close {self.name}")


class FakeClient:
    def __init__(self) -> None:
        self.log: list[str] = []

    def subscribe(self, topic: str, subscription: str, *, consumer_name: str, **_: Any) -> Any:
        self.log.append(f"subscribe {consumer_name}")
        return FakeConsumer(consumer_name, self.log)


@pytest.fixture
def demo() -> Iterator[DemoWorkloads]:
    settings = DemoSettings(stuck_after=0.0, restuck_every=0.01)
    workloads = DemoWorkloads("pulsar://127.0.0.1:1", "http://127.0.0.1:1", settings=settings)
    workloads._client = FakeClient()
    yield workloads
    workloads._stop.set()


def test_payments_ok_leaves_and_joins_again_once_nothing_drains(
    demo: DemoWorkloads, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter([7, None, 0])  # stuck; the broker did not say; nothing drains any more
    asked = threading.Event()

    def draining(topic: str, subscription: str) -> int | None:
        answer = next(answers, 3)  # stuck again after the rejoin
        if answer == 3:
            asked.set()
        return answer

    monkeypatch.setattr(demo, "draining_hashes", draining)
    demo.held = ACCOUNTS  # payments-stuck holds a message of every account: ok joins at once
    thread = threading.Thread(
        target=demo._keep_stuck, args=(demo.topic(PAYMENTS), SUBSCRIPTION, "payments-ok")
    )
    thread.start()
    client: FakeClient = demo._client
    wait_for(lambda: client.log == ["subscribe payments-ok", "close payments-ok"], "ok left")
    # it joins again once payments-stuck was handed a message of every account since
    demo.held += ACCOUNTS
    wait_for(asked.is_set, "the broker asked again after the rejoin")
    demo._stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert client.log == ["subscribe payments-ok", "close payments-ok", "subscribe payments-ok"]


def test_the_draining_count_is_read_from_the_subscriptions_topic_stats() -> None:
    stats = {"subscriptions": {SUBSCRIPTION: {"drainingHashesCount": 12}, "other": {}}}
    with FakeAdmin() as fake:
        path = "/admin/v2/persistent/public/demo/demo-payments/stats"
        answers: list[bytes] = [
            json.dumps(stats).encode(),
            b"{}",
            b"not json",
            b'{"subscriptions": 1}',
        ]

        def answer(seen: Seen) -> Answer:
            return 200, {"Content-Type": "application/json"}, answers.pop(0)

        fake.rule(path, answer)
        demo = DemoWorkloads("pulsar://127.0.0.1:1", fake.url)
        read = [demo.draining_hashes(demo.topic(PAYMENTS), SUBSCRIPTION) for _ in range(4)]
    assert read == [12, None, None, None]
