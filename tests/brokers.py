"""Real Pulsar 4.0 brokers (and two-broker clusters) for the live tier, started once per test run
per configuration."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from lab.cluster import LocalPulsarCluster
from lab.localpulsar import LocalPulsar

log = logging.getLogger(__name__)

CLUSTER_SETTINGS: Mapping[str, str] = {"metadataStoreSessionTimeoutMillis": "10000"}
"""The shared clusters' brokers: a killed broker's bundles and its place in the broker list
are released 10 s after it died (30 s by default), so a test of a broker loss stays short."""


class BrokerPool:
    """Starts one standalone per distinct settings on first use; stops all at the end.

    A broker that cannot start raises: live tests fail loudly, they never skip.
    """

    def __init__(self) -> None:
        self._brokers: dict[tuple[object, ...], LocalPulsar] = {}
        self._clusters: dict[str, LocalPulsarCluster] = {}
        self._reviving: list[threading.Thread] = []
        self._lock = threading.Lock()

    def get(
        self,
        settings: Mapping[str, str] | None = None,
        *,
        jvm_options: tuple[str, ...] = (),
    ) -> LocalPulsar:
        items = tuple(sorted((settings or {}).items()))
        key = (items, jvm_options)
        with self._lock:
            broker = self._brokers.get(key)
            if broker is None:
                broker = LocalPulsar(settings=dict(items), jvm_options=jvm_options).start()
                self._brokers[key] = broker
            return broker

    def cluster(self, load_manager: str = "modular") -> LocalPulsarCluster:
        """A two-broker cluster (`CLUSTER_SETTINGS`) per load manager, started on first use
        and shared. A test that stops or kills one of its brokers starts it again before it
        ends (`revive`); a broker found dead here is started again all the same."""
        self._wait_revived()
        with self._lock:
            cluster = self._clusters.get(load_manager)
            if cluster is None:
                cluster = LocalPulsarCluster(
                    brokers=2, load_manager=load_manager, settings=dict(CLUSTER_SETTINGS)
                ).start()
                self._clusters[load_manager] = cluster
            for index, broker in enumerate(cluster.broker_processes):
                if not broker.alive():
                    cluster.restart_broker(index)
            return cluster

    def revive(self, cluster: LocalPulsarCluster, index: int) -> None:
        """Start broker `index` of a shared cluster again on a thread, so that the tests in
        between run meanwhile; the next `cluster()` waits for it (and retries on failure)."""

        def restart() -> None:
            try:
                cluster.restart_broker(index)
            except Exception:  # cluster() starts it again, and raises if it fails again
                log.exception("broker-%d did not start again", index)

        thread = threading.Thread(target=restart, name=f"revive-broker-{index}", daemon=True)
        thread.start()
        with self._lock:
            self._reviving.append(thread)

    def _wait_revived(self) -> None:
        with self._lock:
            pending, self._reviving = self._reviving, []
        for thread in pending:
            thread.join(300)

    def stop_all(self) -> None:
        self._wait_revived()
        with self._lock:
            for broker in self._brokers.values():
                broker.stop()
            self._brokers.clear()
            for cluster in self._clusters.values():
                cluster.stop()
            self._clusters.clear()
