"""Poll a live broker into a store and run plugins on it, as `pulsar-lens collect` would.

Every wait is bounded; nothing here blocks without a deadline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pulsar
import requests

from collectors.admin import AdminClient
from collectors.poll import diff, poll
from core import logs
from core.model import Snapshot
from core.store import Store
from lab.cluster import LocalPulsarCluster
from lab.localpulsar import LocalPulsar
from plugins import runner
from plugins.api import AnalysisPlugin
from plugins.registry import LoadedPlugin

T = TypeVar("T")
STATS_REFRESH = 2.5  # the harness sets statsUpdateFrequencyInSecs=2 for the bulk stats


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


def wait_for(
    probe: Callable[[], T | None], *, what: str, timeout: float = 30.0, every: float = 0.2
) -> T:
    """Call `probe` until it returns something other than None or False; fail after timeout."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


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
        events = diff(self.snapshots[-1], snapshot) if self.snapshots else []
        self.store.write(snapshot, events=events)
        self.snapshots.append(snapshot)
        return snapshot

    def run(self, plugin: AnalysisPlugin | LoadedPlugin, **params: Any) -> runner.RunOutput:
        return runner.run(plugin, self.store, params, use_cache=False)

    def close(self) -> None:
        self.client.close()
