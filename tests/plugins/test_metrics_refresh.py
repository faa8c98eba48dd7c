"""/metrics answers a scrape without waiting for the analyses: after each recorded poll a
background thread builds the new snapshot's families; a scrape meanwhile gets the previous
snapshot's families at once, and the new ones as soon as they are built."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.api import (
    AnalysisPlugin,
    GaugeMetricFamily,
    Inputs,
    MetricFamily,
    MetricsContext,
    Result,
    View,
)
from pulsar_lens.core.model import SubscriptionRecord
from pulsar_lens.exporter.collector import LensCollector, PollRecorder
from pulsar_lens.exporter.families import exposition
from pulsar_lens.plugins.testing import TOPIC, MemoryStore, at, make_snapshot

SUB = "orders"
WAIT = 10.0


class Gated(AnalysisPlugin):
    """Reports the newest backlog; its metrics hook waits while `gate` is closed."""

    name = "gated"
    title = "Gated"
    description = "The newest backlog, released by a gate."
    version = "1.0"
    inputs = ("subscriptions",)
    outputs = ("subs",)

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def analyze(self, data: Inputs, params: Any) -> Result:
        return Result(frames={"subs": data.latest("subscriptions")})

    def render(self, result: Result) -> list[View]:
        return []

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        self.waiting.set()
        assert self.gate.wait(timeout=WAIT), "the test never opened the gate"
        gauge = GaugeMetricFamily("pulsar_lens_gated_backlog", "Newest backlog.")
        gauge.add_metric([], float(result.frames["subs"]["msg_backlog"].iloc[0]))
        return [gauge]


def snapshot(seconds: float, backlog: int) -> Any:
    record = SubscriptionRecord(TOPIC, SUB, msg_backlog=backlog, type="Shared")
    return make_snapshot(seconds, subscriptions=(record,))


class WatchedStore(MemoryStore):
    """A MemoryStore that tells when a thread named "scraper" has read its snapshot index
    (after: a snapshot the test appends meanwhile would tear the index being built)."""

    def __init__(self, snapshots: Any) -> None:
        super().__init__(snapshots)
        self.scraping = threading.Event()

    def snapshots(self, *, limit: int | None = None) -> Any:
        index = super().snapshots(limit=limit)
        if threading.current_thread().name == "scraper":
            self.scraping.set()
        return index


def memory_store(*snapshots: Any) -> Any:
    """A MemoryStore (its `read` lacks the `since` the store protocol names; unused here)."""
    return MemoryStore(snapshots)


def gated_backlog(collector: LensCollector) -> float:
    text = exposition(list(collector.collect()))
    for family in text_string_to_metric_families(text):
        if family.name == "pulsar_lens_gated_backlog":
            return float(family.samples[0].value)
    raise AssertionError(f"no gated family in {text}")


def eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def record_poll(recorder: PollRecorder) -> None:
    recorder.record(at=at(0), duration=0.1, requests=1, errors=0, failed=False)


def test_metrics_refresh_builds_the_families_after_a_poll_without_a_scrape() -> None:
    store = memory_store(snapshot(0, 3))
    recorder = PollRecorder()
    collector = LensCollector(store, recorder=recorder, plugins=[Gated()], now=lambda: at(1))
    assert collector.computations == 0
    record_poll(recorder)
    eventually(lambda: collector.computations == 1)
    assert gated_backlog(collector) == 3
    assert collector.computations == 1  # the scrape read what the refresh built


def test_metrics_refresh_a_scrape_during_a_refresh_answers_with_the_previous_snapshot() -> None:
    plugin = Gated()
    store = memory_store(snapshot(0, 3))
    recorder = PollRecorder()
    collector = LensCollector(store, recorder=recorder, plugins=[plugin], now=lambda: at(11))
    assert gated_backlog(collector) == 3
    plugin.gate.clear()
    plugin.waiting.clear()
    store.items.append(snapshot(10, 8))
    record_poll(recorder)
    assert plugin.waiting.wait(timeout=WAIT)  # the refresh is inside the analyses now
    answered: list[float] = []
    scraper = threading.Thread(target=lambda: answered.append(gated_backlog(collector)))
    scraper.start()
    scraper.join(timeout=WAIT)
    assert answered == [3]  # at once, while the gate is still closed
    plugin.gate.set()
    eventually(lambda: collector.computations == 2)
    eventually(lambda: gated_backlog(collector) == 8)


def test_metrics_refresh_without_a_poll_a_new_snapshot_is_built_by_the_scrape() -> None:
    store = memory_store(snapshot(0, 3))
    collector = LensCollector(store, plugins=[Gated()], now=lambda: at(11))
    assert gated_backlog(collector) == 3
    store.items.append(snapshot(10, 8))
    assert gated_backlog(collector) == 8
    assert collector.computations == 2


def test_metrics_refresh_the_first_scrape_waits_for_the_refresh_and_builds_nothing() -> None:
    plugin = Gated()
    plugin.gate.clear()
    store = WatchedStore([snapshot(0, 3)])
    recorder = PollRecorder()
    collector = LensCollector(store, recorder=recorder, plugins=[plugin], now=lambda: at(1))
    record_poll(recorder)
    assert plugin.waiting.wait(timeout=WAIT)  # the refresh holds the lock, nothing is built
    answered: list[tuple[float, bool]] = []
    scraper = threading.Thread(
        target=lambda: answered.append((gated_backlog(collector), plugin.gate.is_set())),
        name="scraper",
    )
    scraper.start()
    assert store.scraping.wait(timeout=WAIT)  # the scrape is under way, the gate still shut
    store.items.append(snapshot(10, 8))  # the scrape asked for the first; the refresh moves on
    record_poll(recorder)
    plugin.gate.set()
    scraper.join(timeout=WAIT)
    # it answered only once the gate opened (it waited), with what the refresh built
    assert answered in ([(3, True)], [(8, True)])
    eventually(lambda: collector.computations == 2 and gated_backlog(collector) == 8)
    assert collector.computations == 2
