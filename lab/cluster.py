"""A real multi-broker Pulsar 4.0 cluster on 127.0.0.1: one ZooKeeper, one bookie, N brokers.

Bundles really move between brokers here, which a standalone cannot show: unloads, transfers
and what they cost the clients. Every process is a child JVM in its own process group, with
free ports and a fresh data directory, listening on 127.0.0.1 only; the JDK and the jars come
from `pulsar_lens.lab.runtime`, as for `pulsar_lens.lab.localpulsar.LocalPulsar`.

The brokers run `PulsarBrokerStarter`, not the standalone starter: a standalone broker tells
clients to come back through its own service URL whenever the owner is a loopback address,
which sends them to the wrong broker of a loopback cluster. The load manager is selectable:
`modular` (`ModularLoadManagerImpl`, 4.0's default) or `extensible` (PIP-192,
`ExtensibleLoadManagerImpl` with `TransferShedder`), the latter with multi-phase unload
(PIP-307) on or off. Automatic shedding and splitting are off: bundles move only when asked.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab.cluster_conf import (
    BOOKIE_HEAP,
    BOOKIE_SETTINGS,
    BROKER_HEAP,
    BROKER_SETTINGS,
    CLUSTER_NAME,
    LOAD_MANAGERS,
    TRANSFER_SHEDDER,
    ZK_HEAP,
    ClusterProcess,
    write_properties,
)
from pulsar_lens.lab.cluster_ready import broker_ready, cluster_ready, zk_ok
from pulsar_lens.lab.processes import (
    PORT_TAKEN,
    free_port,
    jvm_flags,
    log_tail,
    port_open,
    spawn,
    start_failed,
    start_retrying,
    wait_until,
)
from pulsar_lens.lab.runtime import (
    PULSAR_VERSION,
    RUNTIME_DIR,
    ensure_runtime,
    find_java,
    release,
)

log = logging.getLogger(__name__)

BROKER_START_ATTEMPTS = 2
"""Starts of one broker of a cluster before its failure is raised (`_wait_broker`). A broker
whose extensible load manager fails to start (its system topics or leader election late on
a loaded machine) exits, for its supervisor to start it again (apache/pulsar#23297)."""


@dataclass
class LocalPulsarCluster:
    """ZooKeeper, one bookie and `brokers` brokers sharing cluster `local` on 127.0.0.1.

    `load_manager` is "modular" or "extensible"; `multi_phase_unload` sets
    `loadBalancerMultiPhaseBundleUnload` for the extensible one. `settings` override broker
    settings. Use as a context manager, or call start() and stop().
    """

    brokers: int = 2
    load_manager: str = "modular"
    multi_phase_unload: bool = True
    settings: Mapping[str, str] = field(default_factory=dict)
    data_dir: Path | None = None
    version: str = PULSAR_VERSION
    zk_port: int = 0
    bookie_port: int = 0
    started_in: float | None = None  # seconds start() took, for reports
    members: list[ClusterProcess] = field(default_factory=list, repr=False)
    _own_data_dir: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.load_manager not in LOAD_MANAGERS:
            raise ValueError(
                f"unknown load manager {self.load_manager!r}; choose {', '.join(LOAD_MANAGERS)}"
            )
        if self.brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.version = release(self.version).version  # a line ("3.0") names its release

    # --- what the cluster offers --------------------------------------------------------

    @property
    def broker_processes(self) -> list[ClusterProcess]:
        return [m for m in self.members if m.name.startswith("broker-")]

    @property
    def broker_ids(self) -> list[str]:
        return [b.broker_id for b in self.broker_processes]

    @property
    def admin_url(self) -> str:
        return self.broker_processes[0].admin_url

    @property
    def admin_urls(self) -> list[str]:
        return [b.admin_url for b in self.broker_processes]

    @property
    def service_url(self) -> str:
        """A multi-host service URL naming every broker, as clients of a cluster use it."""
        hosts = ",".join(f"127.0.0.1:{b.broker_port}" for b in self.broker_processes)
        return f"pulsar://{hosts}"

    @property
    def metadata_url(self) -> str:
        return f"zk:127.0.0.1:{self.zk_port}"

    @property
    def load_manager_class(self) -> str:
        return LOAD_MANAGERS[self.load_manager]

    def pids(self) -> list[int]:
        return [m.pid for m in self.members if m.pid is not None]

    def rss_bytes(self) -> int:
        """Resident memory of every JVM of the cluster, summed."""
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError, ValueError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        return total

    # --- start and stop -----------------------------------------------------------------

    def start(self, *, timeout: float = 240.0) -> LocalPulsarCluster:
        """Start every process and wait until the cluster is usable from each broker; raise
        with the log tail of whichever process failed. When a port `free_port` chose was
        taken before its process bound it and every port and the data directory are the
        cluster's own choice, it starts again on new ones (`start_retrying`)."""
        ours = not (self.zk_port or self.bookie_port) and self.data_dir is None
        return start_retrying(
            lambda: self._start_once(timeout), ours=ours, forget=self._forget_ports
        )

    def _forget_ports(self) -> None:
        """After a failed start (`stop()` removed its own data directory): new ones next."""
        self.data_dir = None
        self.zk_port = self.bookie_port = 0

    def _start_once(self, timeout: float) -> LocalPulsarCluster:
        began = time.monotonic()
        deadline = began + timeout
        java = find_java(self.version)
        lib = ensure_runtime(self.version)
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="pulsar-lens-cluster-"))
            self._own_data_dir = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "conf"
        conf.mkdir(exist_ok=True)
        shutil.copy(RUNTIME_DIR / "log4j2.properties", conf / "log4j2.properties")
        self.zk_port = self.zk_port or free_port()
        self.bookie_port = self.bookie_port or free_port()
        brokers = [
            ClusterProcess(
                f"broker-{i}",
                self.data_dir / f"broker-{i}.log",
                web_port=free_port(),
                broker_port=free_port(),
            )
            for i in range(self.brokers)
        ]
        try:
            zk = self._spawn_zookeeper(java, lib)
            self._wait(lambda: zk_ok(self.zk_port), zk, deadline, "ZooKeeper to answer")
            self._initialize_metadata(java, lib, brokers[0], deadline)
            bookie = self._spawn_bookie(java, lib)
            self._wait(lambda: port_open(self.bookie_port), bookie, deadline, "the bookie")
            for broker in brokers:
                self._spawn_broker(java, lib, broker)
            for broker in brokers:
                self._wait_broker(java, lib, broker, deadline)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        log.info(
            "local Pulsar cluster (%d brokers, %s load manager) ready in %.1fs",
            self.brokers,
            self.load_manager,
            self.started_in,
        )
        return self

    def stop(self, *, grace: float = 20.0) -> None:
        """Stop brokers first (in parallel), then the bookie, then ZooKeeper; always."""
        brokers = self.broker_processes
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(brokers))) as pool:
            list(pool.map(lambda b: b.stop(grace), brokers))
        for member in reversed([m for m in self.members if m not in brokers]):
            member.stop(grace)
        self.members = []
        if self._own_data_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def stop_broker(self, index: int, *, grace: float = 20.0) -> None:
        """Stop one broker (a broker restart or loss); its bundles move to the others."""
        self.broker_processes[index].stop(grace)

    def kill_broker(self, index: int) -> None:
        """SIGKILL one broker: its ZooKeeper session (and with it the bundles it owns, its
        place in the broker list) lasts until `metadataStoreSessionTimeoutMillis` expires."""
        self.broker_processes[index].kill()

    def restart_broker(self, index: int, *, timeout: float = 120.0) -> None:
        """Start a stopped or killed broker again on its own ports and wait until it is
        listed."""
        broker = self.broker_processes[index]
        if broker.alive():
            return
        self._spawn_broker(find_java(self.version), ensure_runtime(self.version), broker)
        deadline = time.monotonic() + timeout
        self._wait(lambda: broker_ready(broker), broker, deadline, "broker")

    def __enter__(self) -> LocalPulsarCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the processes ------------------------------------------------------------------

    def _spawn(self, member: ClusterProcess, argv: list[str]) -> ClusterProcess:
        assert self.data_dir is not None
        member.process = spawn(argv, cwd=self.data_dir, log_path=member.log_path)
        if member not in self.members:
            self.members.append(member)
        return member

    def _java(self, java: str, lib: Path, heap: tuple[str, ...], *args: str) -> list[str]:
        assert self.data_dir is not None
        conf = self.data_dir / "conf"
        return [
            java,
            *jvm_flags(self.data_dir),
            *heap,
            f"-Dlog4j.configurationFile={conf / 'log4j2.properties'}",
            "-cp",
            f"{conf}:{lib}/*",
            *args,
        ]

    def _spawn_zookeeper(self, java: str, lib: Path) -> ClusterProcess:
        assert self.data_dir is not None
        cfg = self.data_dir / "conf" / "zookeeper.conf"
        write_properties(
            cfg,
            {
                "tickTime": "2000",
                "dataDir": str(self.data_dir / "zookeeper"),
                "clientPort": str(self.zk_port),
                "clientPortAddress": "127.0.0.1",
                "admin.enableServer": "false",
                "maxClientCnxns": "0",
                "4lw.commands.whitelist": "ruok",
            },
        )
        argv = self._java(
            java, lib, ZK_HEAP, "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)
        )
        return self._spawn(ClusterProcess("zookeeper", self.data_dir / "zookeeper.log"), argv)

    def _initialize_metadata(
        self, java: str, lib: Path, first: ClusterProcess, deadline: float
    ) -> None:
        """The cluster, `public`, `public/default` and BookKeeper's ledger layout, once."""
        assert self.data_dir is not None
        argv = self._java(
            java,
            lib,
            ("-Xmx256m",),
            "org.apache.pulsar.PulsarClusterMetadataSetup",
            "--cluster",
            CLUSTER_NAME,
            "--metadata-store",
            self.metadata_url,
            "--configuration-metadata-store",
            self.metadata_url,
            "--web-service-url",
            first.admin_url,
            "--broker-service-url",
            first.service_url,
        )
        log_path = self.data_dir / "metadata-setup.log"
        with open(log_path, "ab") as out:
            done = subprocess.run(
                argv,
                cwd=self.data_dir,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=max(5.0, deadline - time.monotonic()),
                check=False,
            )
        if done.returncode != 0:
            raise start_failed(
                f"cluster metadata setup exited with code {done.returncode}",
                name="metadata-setup",
                tail=partial(log_tail, log_path, 30),
                log_path=log_path,
                pid=None,
                port=None,
                exit_code=done.returncode,
            )

    def _spawn_bookie(self, java: str, lib: Path) -> ClusterProcess:
        assert self.data_dir is not None
        cfg = self.data_dir / "conf" / "bookkeeper.conf"
        write_properties(
            cfg,
            {
                **BOOKIE_SETTINGS,
                "bookiePort": str(self.bookie_port),
                "metadataServiceUri": f"zk+null://127.0.0.1:{self.zk_port}/ledgers",
                "journalDirectories": str(self.data_dir / "bookie" / "journal"),
                "ledgerDirectories": str(self.data_dir / "bookie" / "ledgers"),
            },
        )
        argv = self._java(
            java, lib, BOOKIE_HEAP, "org.apache.bookkeeper.server.Main", "--conf", str(cfg)
        )
        return self._spawn(ClusterProcess("bookie", self.data_dir / "bookie.log"), argv)

    def broker_settings(self, broker: ClusterProcess) -> dict[str, str]:
        settings = {
            **BROKER_SETTINGS,
            **release(self.version).settings,
            "clusterName": CLUSTER_NAME,
            "metadataStoreUrl": self.metadata_url,
            "configurationMetadataStoreUrl": self.metadata_url,
            "brokerServicePort": str(broker.broker_port),
            "webServicePort": str(broker.web_port),
            "loadManagerClassName": self.load_manager_class,
        }
        if self.load_manager == "extensible":
            settings["loadBalancerLoadSheddingStrategy"] = TRANSFER_SHEDDER
            settings["loadBalancerMultiPhaseBundleUnload"] = str(self.multi_phase_unload).lower()
        return {**settings, **self.settings}

    def _spawn_broker(self, java: str, lib: Path, broker: ClusterProcess) -> ClusterProcess:
        assert self.data_dir is not None
        cfg = self.data_dir / "conf" / f"{broker.name}.conf"
        write_properties(cfg, self.broker_settings(broker))
        argv = self._java(
            java,
            lib,
            BROKER_HEAP,
            f"-Dpulsar.config.file={cfg}",
            "org.apache.pulsar.PulsarBrokerStarter",
            "--broker-conf",
            str(cfg),
        )
        return self._spawn(broker, argv)

    # --- readiness ----------------------------------------------------------------------

    def _wait_broker(self, java: str, lib: Path, broker: ClusterProcess, deadline: float) -> None:
        """Wait until `broker` is ready; one that exits while starting (for another reason
        than a port taken, which `start_retrying` answers with new ports) is started again,
        BROKER_START_ATTEMPTS times in all, as a broker's supervisor would. Its log of the
        failed start is kept (`keep_log`) and its first ERROR line is logged."""
        for attempt in range(1, BROKER_START_ATTEMPTS + 1):
            try:
                self._wait(partial(broker_ready, broker), broker, deadline, "broker")
                return
            except LocalPulsarError as exc:
                exited = exc.exit_code is not None and PORT_TAKEN not in str(exc)
                if not exited or attempt == BROKER_START_ATTEMPTS:
                    raise
                said = str(exc).split("; log tail:", 1)[0]
                log.warning("%s; starting it again (attempt %d)", said, attempt + 1)
            broker.log_path.unlink(missing_ok=True)  # kept: the next start's log is its own
            self._spawn_broker(java, lib, broker)

    def ready(self) -> bool:
        """Every broker lists every other one, and each answers for `public/default`."""
        return cluster_ready(self.broker_processes)

    def _wait(
        self, check: Callable[[], bool], member: ClusterProcess, deadline: float, what: str
    ) -> None:
        wait_until(
            check,
            member.process,
            deadline=deadline,
            name=member.name,
            late=f"timed out waiting for {what} ({member.name})",
            tail=member.log_tail,
            log_path=member.log_path,
            port=member.web_port or None,
        )


@contextlib.contextmanager
def running_cluster(**options: object) -> Iterator[LocalPulsarCluster]:
    cluster = LocalPulsarCluster(**options)  # type: ignore[arg-type]
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
