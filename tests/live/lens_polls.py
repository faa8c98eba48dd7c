"""Poll a live broker into a store and run plugins on it, as `pulsar-lens collect` would.

Every wait is bounded; nothing here blocks without a deadline.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pulsar
import requests

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import diff, poll
from pulsar_lens.collectors.topics import TopicStats, parse_broker_topic_stats
from pulsar_lens.core import logs
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.lab.cluster import LocalPulsarCluster
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import LoadedPlugin

T = TypeVar("T")
BULK_STATS = "/admin/v2/broker-stats/topics"


def new_topic(prefix: str, namespace: str = "public/default") -> str:
    return f"persistent://{namespace}/{prefix}-{uuid.uuid4().hex[:10]}"


def pulsar_client(broker: LocalPulsar) -> pulsar.Client:
    client: pulsar.Client = logs.pulsar_client(broker.service_url, operation_timeout_seconds=30)
    return client


def admin(broker: LocalPulsar, method: str, path: str, **kwargs: Any) -> requests.Response:
    resp = requests.request(method, f"{broker.admin_url}{path}", timeout=30, **kwargs)
    assert resp.status_code < 300, f"{method} {path}: {resp.status_code} {resp.text[:300]}"
    return resp


def topic_stats(broker: LocalPulsar, topic: str) -> dict[str, Any]:
    path = topic.replace("persistent://", "/admin/v2/persistent/")
    stats: dict[str, Any] = admin(broker, "GET", f"{path}/stats").json()
    return stats


def namespace_bundles(admin_url: str, namespace: str = "public/default") -> list[str]:
    """The bundles of `namespace` ("0x..._0x..."), as the broker lists their boundaries,
    lowest first."""
    answer = requests.get(f"{admin_url}/admin/v2/namespaces/{namespace}/bundles", timeout=30)
    answer.raise_for_status()
    edges = answer.json()["boundaries"]
    return [f"{lo}_{hi}" for lo, hi in itertools.pairwise(edges)]


def wait_for(
    probe: Callable[[], T | None],
    *,
    what: str,
    timeout: float = 30.0,
    every: float = 0.2,
    seen: Callable[[], object] | None = None,
) -> T:
    """Call `probe` until it returns something other than None or False; fail after timeout,
    saying what `seen()` last showed (else the probe's last answer)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(every)
    shown = seen() if seen is not None else last
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {shown!r})")


def bulk_stats(admin_url: str) -> dict[str, TopicStats]:
    """Every topic in the bulk stats of the broker at `admin_url`, by name: the answer poll()
    reads, which the broker rebuilds only every statsUpdateFrequencyInSecs (2 s in the
    harness, later on a busy machine), so it lags the per-topic stats."""
    resp = requests.get(f"{admin_url}{BULK_STATS}", timeout=30)
    assert resp.status_code == 200, f"GET {BULK_STATS}: {resp.status_code} {resp.text[:300]}"
    return {t.topic: t for t in parse_broker_topic_stats(resp.json(), admin_url)}


def listed_consumers(stats: Mapping[str, Any], subscription: str) -> list[str]:
    """The consumer names a topic's stats list on `subscription`, sorted."""
    return sorted(c["consumerName"] for c in stats["subscriptions"][subscription]["consumers"])


def wait_for_bulk(
    broker: LocalPulsar | LocalPulsarCluster,
    topic: str,
    holds: Callable[[Mapping[str, Any]], object],
    *,
    what: str,
    timeout: float = 90.0,
) -> Mapping[str, Any]:
    """Wait until the bulk stats show `what` of `topic`: `holds(stats)` is true on every
    broker that lists the topic (a former owner's stale entry would reach a poll too).
    A `holds` that raises KeyError or IndexError (a subscription not listed yet) is false."""
    urls = broker.admin_urls if isinstance(broker, LocalPulsarCluster) else [broker.admin_url]
    last: dict[str, Mapping[str, Any]] = {}

    def shown() -> Mapping[str, Any] | None:
        listed = {url: found.stats for url in urls if (found := bulk_stats(url).get(topic))}
        last.clear()
        last.update(listed)
        agreed = listed and all(_holds(holds, stats) for stats in listed.values())
        return next(iter(listed.values())) if agreed else None

    return wait_for(
        shown,
        what=f"the bulk stats of {topic} to show {what}",
        timeout=timeout,
        every=0.5,
        seen=lambda: json.dumps(last)[:3000] if last else "not listed",
    )


def _holds(holds: Callable[[Mapping[str, Any]], object], stats: Mapping[str, Any]) -> bool:
    try:
        return bool(holds(stats))
    except (KeyError, IndexError):
        return False


class Recorder:
    """Polls one broker (or cluster) into a store, with the events of each diff, like the
    polling loop."""

    def __init__(
        self,
        broker: LocalPulsar | LocalPulsarCluster,
        root: Path,
        *,
        namespaces: Sequence[str] = ("public/default",),
    ) -> None:
        self.client = AdminClient(broker.admin_url, retries=1)
        self.store = Store(root)
        self.namespaces = list(namespaces)
        self.snapshots: list[Snapshot] = []

    def poll(self) -> Snapshot:
        snapshot = poll(self.client, namespaces=self.namespaces)
        assert not snapshot.errors, snapshot.errors
        return self._keep(snapshot)

    def poll_until(
        self,
        holds: Callable[[Snapshot], bool],
        *,
        what: str,
        show: Callable[[Snapshot], object] = lambda s: s.errors,
        timeout: float = 90.0,
    ) -> Snapshot:
        """Poll until a snapshot shows `what` (`holds(snapshot)`), and store only that one, so
        a fact the bulk stats show for one refresh only (a rate) surely reaches the store.
        On timeout, `show(last snapshot)` says what it showed instead."""
        last: list[object] = []

        def polled() -> Snapshot | None:
            snapshot = poll(self.client, namespaces=self.namespaces)
            last[:] = [show(snapshot)]
            return snapshot if not snapshot.errors and holds(snapshot) else None

        found = wait_for(polled, what=what, timeout=timeout, every=0.5, seen=lambda: last)
        return self._keep(found)

    def _keep(self, snapshot: Snapshot) -> Snapshot:
        events = diff(self.snapshots[-1], snapshot) if self.snapshots else []
        self.store.write(snapshot, events=events)
        self.snapshots.append(snapshot)
        return snapshot

    def run(self, plugin: AnalysisPlugin | LoadedPlugin, **params: Any) -> runner.RunOutput:
        return runner.run(plugin, self.store, params, use_cache=False)

    def close(self) -> None:
        self.client.close()
