"""A real Apache Pulsar standalone (broker and bookie in one JVM) run on loopback.

Used by the live tests, `pulsar-lens demo` and `pulsar-lens pulsar start|stop|status`. Each
broker gets free ports and a fresh data directory, and listens on 127.0.0.1 only; the JDK and
the jars come from `lab.runtime`, per release (`version`: 4.0.7 by default, or any other
release of `runtime.RELEASES`, named by its version or its line). A secured broker
(authentication on, see `lab.security`) is asked whether it is ready with `admin_token`;
`web_tls=True` opens its web service on TLS too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab.processes import (
    alive,
    free_port,
    get_json,
    jvm_flags,
    kill_group,
    log_tail,
    spawn,
    start_retrying,
    terminate_group,
    wait_until,
)
from pulsar_lens.lab.runtime import (
    PULSAR_VERSION,
    RUNTIME_DIR,
    cache_root,
    ensure_runtime,
    find_java,
    release,
)

log = logging.getLogger(__name__)

# The broker's own defaults differ from the shipped standalone.conf; these mirror the latter,
# trimmed to a broker-only standalone, and refresh stats quickly so polls see fresh data.
BASE_SETTINGS: Mapping[str, str] = {
    "clusterName": "standalone",
    "advertisedAddress": "127.0.0.1",
    "bindAddress": "127.0.0.1",
    "metadataStoreUrl": "",
    "configurationMetadataStoreUrl": "",
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
    "managedLedgerCacheSizeMB": "64",
    "functionsWorkerEnabled": "false",
    "transactionCoordinatorEnabled": "false",
    "enablePackagesManagement": "false",
    "webSocketServiceEnabled": "false",
    "systemTopicEnabled": "true",
    "topicLevelPoliciesEnabled": "true",
    "allowAutoTopicCreation": "true",
    "allowAutoTopicCreationType": "non-partitioned",
    "brokerDeleteInactiveTopicsEnabled": "false",
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
    "loadBalancerEnabled": "false",
    "statsUpdateFrequencyInSecs": "2",
    "statsUpdateInitialDelayInSecs": "1",
    # the in-process bookie reads its settings from the same file
    "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
    "dbStorage_writeCacheMaxSizeMb": "32",
    "dbStorage_readAheadCacheMaxSizeMb": "32",
    "journalSyncData": "false",
    "journalMaxGroupWaitMSec": "1",
    "allowLoopback": "true",
    "listeningInterface": "lo",  # the bookie binds its advertised 127.0.0.1, not every interface
    "diskUsageThreshold": "0.99",
    "diskUsageWarnThreshold": "0.99",
    "gcWaitTime": "300000",
    "httpServerEnabled": "false",
}


@dataclass
class LocalPulsar:
    """One standalone broker (with its bookie) in a child process on 127.0.0.1.

    `settings` override broker settings, e.g. {"subscriptionKeySharedUseConsistentHashing":
    "false"}; `jvm_options` add JVM flags. Use as a context manager, or call start() and stop().
    `admin_token` is sent by the readiness checks (a broker with authentication on);
    `web_tls` adds `webServicePortTls` on a free port (the TLS files come in `settings`).
    """

    settings: Mapping[str, str] = field(default_factory=dict)
    jvm_options: tuple[str, ...] = ()  # after JVM_FLAGS, so a -D here overrides ours
    data_dir: Path | None = None
    version: str = PULSAR_VERSION
    web_port: int = 0
    broker_port: int = 0
    bookie_port: int = 0
    admin_token: str | None = field(default=None, repr=False)
    web_tls: bool = False
    web_tls_port: int = 0
    pid: int | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _own_data_dir: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.version = release(self.version).version  # a line ("3.0") names its release

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def admin_url_tls(self) -> str:
        """The web service over TLS (with `web_tls`): https://127.0.0.1:<port>."""
        return f"https://127.0.0.1:{self.web_tls_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def log_path(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "pulsar.log"

    def command(self, java: str, lib: Path) -> list[str]:
        assert self.data_dir is not None
        conf = self.data_dir / "conf"
        return [
            java,
            *jvm_flags(self.data_dir),
            *self.jvm_options,
            f"-Dlog4j.configurationFile={conf / 'log4j2.properties'}",
            f"-Dpulsar.config.file={conf / 'standalone.conf'}",
            "-cp",
            f"{conf}:{lib}/*",
            "org.apache.pulsar.PulsarStandaloneStarter",
            "--config",
            str(conf / "standalone.conf"),
            "-nfw",
            "-nss",
            "-a",
            "127.0.0.1",
            "--bookkeeper-port",
            str(self.bookie_port),
            "--metadata-dir",
            str(self.data_dir / "metadata"),
            "--bookkeeper-dir",
            str(self.data_dir / "bookkeeper"),
        ]

    def _write_conf(self) -> None:
        assert self.data_dir is not None
        conf = self.data_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        settings = {
            **BASE_SETTINGS,
            **release(self.version).settings,
            "brokerServicePort": str(self.broker_port),
            "webServicePort": str(self.web_port),
            "bookiePort": str(self.bookie_port),
            **({"webServicePortTls": str(self.web_tls_port)} if self.web_tls else {}),
            **self.settings,
        }
        text = "".join(f"{k}={v}\n" for k, v in settings.items())
        (conf / "standalone.conf").write_text(text)
        shutil.copy(RUNTIME_DIR / "log4j2.properties", conf / "log4j2.properties")

    def start(self, *, timeout: float = 180.0) -> LocalPulsar:
        """Start the broker and wait until `public/default` exists; raise with the log tail.

        A port `free_port` chose can be taken by another process before the JVM binds it (on
        a busy machine, between two brokers starting side by side): when every port and the
        data directory are this broker's own choice, it starts again on new ones
        (`start_retrying`)."""
        java = find_java(self.version)
        lib = ensure_runtime(self.version)
        ours = not (self.web_port or self.broker_port or self.bookie_port or self.web_tls_port)
        return start_retrying(
            lambda: self._start_once(java, lib, timeout),
            ours=ours and self.data_dir is None,
            forget=self._forget_ports,
        )

    def _start_once(self, java: str, lib: Path, timeout: float) -> LocalPulsar:
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="pulsar-lens-standalone-"))
            self._own_data_dir = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.web_port = self.web_port or free_port()
        self.broker_port = self.broker_port or free_port()
        self.bookie_port = self.bookie_port or free_port()
        if self.web_tls:
            self.web_tls_port = self.web_tls_port or free_port()
        self._write_conf()
        return self._spawn_ready(java, lib, timeout)

    def _forget_ports(self) -> None:
        """After a failed start (`stop()` removed its own data directory): new ones next."""
        self.data_dir = None
        self.web_port = self.broker_port = self.bookie_port = self.web_tls_port = 0

    def _spawn_ready(self, java: str, lib: Path, timeout: float) -> LocalPulsar:
        """Start the JVM and wait until it serves; one that does not is stopped."""
        self._spawn(java, lib)
        try:
            self.wait_ready(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, java: str, lib: Path) -> None:
        assert self.data_dir is not None
        self.process = spawn(self.command(java, lib), cwd=self.data_dir, log_path=self.log_path)
        self.pid = self.process.pid

    def kill(self) -> None:
        """SIGKILL the broker's JVM (a crash: no shutdown hook runs) and reap it; the ports,
        the settings and the data directory stay for `restart()`."""
        if self.pid is None:
            return
        if self.process is not None:
            kill_group(self.process)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        self.pid = None
        self.process = None

    def restart(self, *, timeout: float = 180.0) -> LocalPulsar:
        """Start the broker again on the same ports and data directory (after `kill()` or
        a crash) and wait until it is ready; a running broker is killed first."""
        if self.data_dir is None or not self.web_port:
            raise LocalPulsarError(
                "restart() needs a broker that was started before", process="Pulsar"
            )
        if self.process is not None and self.process.poll() is None:
            self.kill()
        return self._spawn_ready(find_java(self.version), ensure_runtime(self.version), timeout)

    def wait_ready(self, *, timeout: float) -> None:
        """Wait until `is_ready()`; raise with the log tail when the JVM exits first or
        `timeout` seconds pass."""
        wait_until(
            self.is_ready,
            self.process,
            deadline=time.monotonic() + timeout,
            name="Pulsar",
            late=f"Pulsar did not become ready within {timeout:.0f}s",
            tail=self.log_tail,
            log_path=self.log_path,
            port=self.web_port,
        )

    def is_ready(self) -> bool:
        """The cluster exists and `public/default` has been created (and, with `web_tls`,
        the TLS port accepts connections)."""
        try:
            clusters = get_json(f"{self.admin_url}/admin/v2/clusters", token=self.admin_token)
            namespaces = get_json(
                f"{self.admin_url}/admin/v2/namespaces/public", token=self.admin_token
            )
            if self.web_tls:
                socket.create_connection(("127.0.0.1", self.web_tls_port), timeout=2).close()
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return (
            isinstance(clusters, list)
            and "standalone" in clusters
            and isinstance(namespaces, list)
            and "public/default" in namespaces
        )

    def stop(self, *, grace: float = 30.0) -> None:
        """SIGTERM the process group, then SIGKILL after `grace` seconds; always."""
        if self.pid is not None:
            terminate_group(self.pid, grace=grace, child=self.process)
            self.pid = None
        self.process = None
        if self._own_data_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def __enter__(self) -> LocalPulsar:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- a detached standalone for `pulsar-lens pulsar start|stop|status` ---------------------


def state_file() -> Path:
    return cache_root() / "run" / "standalone.json"


def start_detached(
    settings: Mapping[str, str] | None = None, *, version: str = PULSAR_VERSION
) -> dict[str, object]:
    """Start a standalone of release `version` that outlives this process; remember it in
    the state file."""
    current = status()
    if current.get("running"):
        raise LocalPulsarError(
            f"a local Pulsar is already running (pid {current['pid']}, {current['admin_url']}); "
            "stop it with `pulsar-lens pulsar stop`",
            process="Pulsar",
            pid=pid if isinstance(pid := current.get("pid"), int) else None,
        )
    data_dir = cache_root() / "run" / "standalone-data"
    shutil.rmtree(data_dir, ignore_errors=True)
    pulsar = LocalPulsar(settings=dict(settings or {}), data_dir=data_dir, version=version)
    pulsar.start()
    state: dict[str, object] = {
        "pid": pulsar.pid,
        "admin_url": pulsar.admin_url,
        "service_url": pulsar.service_url,
        "data_dir": str(data_dir),
        "version": pulsar.version,
    }
    state_file().parent.mkdir(parents=True, exist_ok=True)
    state_file().write_text(json.dumps(state, indent=2))
    return state


def status() -> dict[str, object]:
    try:
        loaded = json.loads(state_file().read_text())
    except (OSError, ValueError):
        return {"running": False}
    if not isinstance(loaded, dict):
        return {"running": False}
    state: dict[str, object] = loaded
    pid = int(str(state.get("pid") or 0))
    state["running"] = bool(pid) and alive(pid)
    return state


def stop_detached(*, grace: float = 30.0) -> bool:
    """Stop the detached standalone; False when none was running."""
    state = status()
    if not state.get("running"):
        with contextlib.suppress(OSError):
            state_file().unlink()
        return False
    terminate_group(int(str(state["pid"])), grace=grace)
    with contextlib.suppress(OSError):
        state_file().unlink()
    return True


@contextlib.contextmanager
def running(settings: Mapping[str, str] | None = None) -> Iterator[LocalPulsar]:
    pulsar = LocalPulsar(settings=dict(settings or {}))
    pulsar.start()
    try:
        yield pulsar
    finally:
        pulsar.stop()
