"""Real Pulsar brokers (and two-broker clusters) for the live tier, started once per test run
per configuration; a configuration is the release (4.0.7 unless a test asks for another,
e.g. `version="3.0"`; `LIVE_LINES` names each line a test runs on), the broker settings and
the JVM options."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Mapping

from pulsar_lens.collectors.brokers import parse_leader
from pulsar_lens.core.pulsarvalues import PulsarLine, model_line
from pulsar_lens.lab.cluster import CLUSTER_NAME, LocalPulsarCluster
from pulsar_lens.lab.localpulsar import LocalPulsar, get_json
from pulsar_lens.lab.runtime import PULSAR_VERSION, TESTED_RELEASES, release
from tests.waits import answers_ok

log = logging.getLogger(__name__)

LIVE_LINES: tuple[str, ...] = tuple(release(v).line for v in TESTED_RELEASES)
"""The broker lines the live tests prove the models on ("4.0", "3.0", "4.2"), one per release
of `TESTED_RELEASES`: a test parametrised with it asks `broker_pool.get(..., version=line)`,
which starts each release's broker once per run."""


def modelled_line(line: str) -> PulsarLine:
    """The line of the models the product applies to a broker of `line` (4.2's are 4.0's)."""
    return model_line(release(line).version)


def lines_modelled_as(model: PulsarLine) -> list[str]:
    """The lines of `LIVE_LINES` whose brokers the product models as `model`'s."""
    return [line for line in LIVE_LINES if modelled_line(line) == model]


CLUSTER_SETTINGS: Mapping[str, str] = {"metadataStoreSessionTimeoutMillis": "10000"}
"""The shared clusters' brokers: a killed broker's bundles and its place in the broker list
are released 10 s after it died (30 s by default), so a test of a broker loss stays short."""

SHEDDING_SETTINGS: Mapping[str, str] = {
    **CLUSTER_SETTINGS,
    "loadBalancerSheddingEnabled": "true",
    "loadBalancerSheddingIntervalMinutes": "1",  # the shortest it takes
    "loadBalancerSheddingGracePeriodMinutes": "0",
    "loadBalancerLoadSheddingStrategy": (
        "org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder"
    ),
    "loadBalancerMsgRateDifferenceShedderThreshold": "10",
    "minUnloadMessage": "1",
    "minUnloadMessageThroughput": "1",
    "maxUnloadBundleNumPerShedding": "1",
    "loadBalancerReportUpdateMinIntervalMillis": "1000",
    "loadBalancerReportUpdateThresholdPercentage": "1",
}
"""A modular cluster whose shedder moves a bundle off a broker that has all the traffic
(tests/live/test_load_manager_live.py). Started in the background when the run begins, so
that its shedding rounds already tick when the test comes."""

WHOLE_TIMEOUT = 180.0
"""How long a shared cluster may take to be whole again after a test killed one of its brokers:
its session expiring (10 s), then the broker started again and listed (a minute when busy)."""

ClusterKey = tuple[str, tuple[tuple[str, str], ...]]


def _key(load_manager: str, settings: Mapping[str, str]) -> ClusterKey:
    return load_manager, tuple(sorted(settings.items()))


def missing_parts(cluster: LocalPulsarCluster) -> list[str]:
    """What keeps `cluster` from being whole, as each broker answers; empty when every broker
    passes its health check (a message through it), lists every broker of the cluster, and
    names the same leader, one of them."""
    wanted = set(cluster.broker_ids)
    leaders: set[str | None] = set()
    missing: list[str] = []
    for broker in cluster.broker_processes:
        name, url = broker.broker_id, broker.admin_url
        if not broker.alive():
            missing.append(f"{name}: its process is not running")
            continue
        if not answers_ok(f"{url}/admin/v2/brokers/health", timeout=30.0):
            missing.append(f"{name}: its health check did not answer ok")
        try:
            listed = get_json(f"{url}/admin/v2/brokers/{CLUSTER_NAME}", timeout=10.0)
            leaders.add(parse_leader(get_json(f"{url}/admin/v2/brokers/leaderBroker", 10.0)))
        except (OSError, ValueError) as exc:  # URLError is an OSError
            missing.append(f"{name}: {exc}")
            continue
        if not isinstance(listed, list) or wanted - set(listed):
            missing.append(f"{name} lists the brokers {listed!r}")
    if len(leaders) != 1 or not leaders <= wanted:
        missing.append(f"the brokers name the leaders {sorted(map(str, leaders))}")
    return missing


def prove_whole(cluster: LocalPulsarCluster, *, timeout: float = WHOLE_TIMEOUT) -> None:
    """Wait until `cluster` is whole (`missing_parts`), so that no test depends on whether a
    test before it killed or stopped one of its brokers; fail saying what was last missing."""
    from tests.live.lens_polls import wait_for  # a live helper: the unit tier does without it

    last: list[str] = []

    def whole() -> bool:
        last[:] = missing_parts(cluster)
        return not last

    wait_for(
        whole,
        what=f"the cluster of {', '.join(cluster.broker_ids)} to be whole again",
        timeout=timeout,
        every=1.0,
        seen=lambda: "; ".join(last),
    )


class BrokerPool:
    """Starts one standalone per distinct settings on first use; stops all at the end.

    A broker that cannot start raises: live tests fail loudly, they never skip.
    """

    def __init__(self, *, whole_timeout: float = WHOLE_TIMEOUT) -> None:
        self._whole_timeout = whole_timeout
        self._brokers: dict[tuple[object, ...], LocalPulsar] = {}
        self._clusters: dict[ClusterKey, LocalPulsarCluster] = {}
        self._starting: dict[ClusterKey, threading.Thread] = {}
        self._reviving: list[threading.Thread] = []
        self._stopping: list[threading.Thread] = []
        self._lock = threading.Lock()

    def get(
        self,
        settings: Mapping[str, str] | None = None,
        *,
        jvm_options: tuple[str, ...] = (),
        version: str = PULSAR_VERSION,
    ) -> LocalPulsar:
        """The standalone of release `version` (a version or a line) with these settings."""
        items = tuple(sorted((settings or {}).items()))
        chosen = release(version).version
        key = (chosen, items, jvm_options)
        with self._lock:
            broker = self._brokers.get(key)
            if broker is None:
                broker = LocalPulsar(
                    settings=dict(items), jvm_options=jvm_options, version=chosen
                ).start()
                self._brokers[key] = broker
            return broker

    def cluster(
        self, load_manager: str = "modular", settings: Mapping[str, str] = CLUSTER_SETTINGS
    ) -> LocalPulsarCluster:
        """A two-broker cluster per load manager and settings, started on first use (or by
        `prestart`) and shared. A test that stops or kills one of its brokers starts it again
        before it ends (`revive`); a broker found dead here is started again all the same.
        The cluster handed out is proven whole (`prove_whole`), whatever ran before."""
        self._wait_revived()
        key = _key(load_manager, settings)
        with self._lock:
            starting = self._starting.pop(key, None)
        if starting is not None:
            starting.join(300)  # if it failed, it is started again below, and raises
        with self._lock:
            cluster = self._clusters.get(key)
            if cluster is None:
                cluster = LocalPulsarCluster(
                    brokers=2, load_manager=load_manager, settings=dict(settings)
                ).start()
                self._clusters[key] = cluster
            for index, broker in enumerate(cluster.broker_processes):
                if not broker.alive():
                    cluster.restart_broker(index)
            prove_whole(cluster, timeout=self._whole_timeout)
            return cluster

    def prestart(self, load_manager: str, settings: Mapping[str, str]) -> None:
        """Start that cluster on a thread now; `cluster()` waits for it."""
        key = _key(load_manager, settings)

        def start() -> None:
            try:
                cluster = LocalPulsarCluster(
                    brokers=2, load_manager=load_manager, settings=dict(settings)
                ).start()
            except Exception:  # cluster() starts it again, and raises if it fails again
                log.exception("the %s cluster did not start in the background", load_manager)
                return
            with self._lock:
                self._clusters[key] = cluster

        thread = threading.Thread(target=start, name=f"prestart-{load_manager}", daemon=True)
        with self._lock:
            self._starting[key] = thread
        thread.start()

    def release(self, load_manager: str, settings: Mapping[str, str]) -> None:
        """Stop that cluster on a thread (its test is done with it); `stop_all` waits."""
        with self._lock:
            cluster = self._clusters.pop(_key(load_manager, settings), None)
        if cluster is not None:
            thread = threading.Thread(target=cluster.stop, name="release", daemon=True)
            thread.start()
            with self._lock:
                self._stopping.append(thread)

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
            waiting = [*self._starting.values(), *self._stopping]
            self._starting, self._stopping = {}, []
        for thread in waiting:
            thread.join(300)
        with self._lock:
            stops = [b.stop for b in self._brokers.values()]
            stops += [c.stop for c in self._clusters.values()]
            self._brokers.clear()
            self._clusters.clear()
        # side by side: each waits for its JVM's shutdown hooks, mostly idle time
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(stops))) as pool:
            started = [pool.submit(stop) for stop in stops]
        for done in started:
            done.result()  # every stop has run; the first that failed raises
