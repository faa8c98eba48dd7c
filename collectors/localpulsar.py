"""A real Apache Pulsar 4.0 standalone, assembled from Maven Central and run on loopback.

Used by the live tests, `pulsar-lens demo` and `pulsar-lens pulsar start|stop|status`.
The jars are resolved once with Maven into `~/.cache/pulsar-lens/pulsar-<version>/lib`
(Maven's own downloads stay in `~/.m2`); each broker gets free ports and a fresh data
directory, and listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
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

from core.errors import LocalPulsarError

log = logging.getLogger(__name__)

PULSAR_VERSION = "4.0.7"
"""The newest 4.0.x whose every artifact Maven Central serves (4.0.8 lacks some)."""

SUPPORTED_JAVA = (((17, 0, 17), (18,)), ((21, 0, 8), (22,)))
"""Java lines Pulsar 4.0 runs on, each from the release that fixes JDK-8351933 (which
destabilises Pulsar); 23+ needs flags that 17 rejects and 4.0 is not tested there."""

RUNTIME_DIR = Path(__file__).with_name("pulsar_runtime")

JVM_CHARSET = "UTF-8"
"""The broker hashes consumer names with `String.getBytes()`, i.e. the JVM's default charset.
Java 18+ (the official 4.0 images run 21) defaults to UTF-8; Java 17 takes it from the locale,
so the harness fixes it to what production brokers use."""

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
    "diskUsageThreshold": "0.99",
    "diskUsageWarnThreshold": "0.99",
    "gcWaitTime": "300000",
    "httpServerEnabled": "false",
}

JVM_FLAGS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx768m",
    "-XX:MaxDirectMemorySize=768m",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    f"-Dfile.encoding={JVM_CHARSET}",
    "-Djava.net.preferIPv4Stack=true",
    "-Djute.maxbuffer=10485760",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/sun.net=ALL-UNNAMED",
    "--add-opens=java.management/sun.management=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.platform=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    "-Dzookeeper.4lw.commands.whitelist=*",
    "-Dzookeeper.snapshot.trust.empty=true",
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dlog4j2.is.webapp=false",
    "-Dlog4j.shutdownHookEnabled=false",
)


def cache_root() -> Path:
    base = os.environ.get("PULSAR_LENS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pulsar-lens"
    )
    return Path(base)


def lib_dir(version: str = PULSAR_VERSION) -> Path:
    return cache_root() / f"pulsar-{version}" / "lib"


def java_version(java: str) -> tuple[int, ...]:
    """The version of a `java` binary as a tuple, e.g. (17, 0, 21, 1)."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "([0-9._]+)', out.stderr + out.stdout)
    if not match:
        raise LocalPulsarError(f"cannot read the version of {java}: {out.stderr.strip()[:200]}")
    return tuple(int(p) for p in re.split(r"[._]", match.group(1)) if p.isdigit())


JVM_DIR = Path("/usr/lib/jvm")  # where Debian's JDK packages install


def java_supported(version: tuple[int, ...]) -> bool:
    return any(low <= version < high for low, high in SUPPORTED_JAVA)


def find_java() -> str:
    """A `java` Pulsar 4.0 runs well on: $JAVA_HOME first, then PATH, then /usr/lib/jvm."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(os.path.join(os.environ["JAVA_HOME"], "bin", "java"))
    found = shutil.which("java")
    if found:
        candidates.append(found)
    candidates.extend(str(p) for p in sorted(JVM_DIR.glob("*/bin/java")))
    seen = []
    for java in candidates:
        if os.path.exists(java):
            version = java_version(java)
            if java_supported(version):
                return java
            seen.append(f"{java} ({'.'.join(map(str, version))})")
    raise LocalPulsarError(
        "no Java 17.0.17+ or 21.0.8+ found (JAVA_HOME, PATH, /usr/lib/jvm); "
        f"saw {', '.join(seen) or 'none'}; install openjdk-17-jdk-headless "
        "(scripts/setup.sh does it)"
    )


def ensure_runtime(version: str = PULSAR_VERSION, *, quiet: bool = True) -> Path:
    """Resolve the broker's jars with Maven into the cache, once; return the lib directory."""
    target = lib_dir(version)
    marker = target.parent / ".complete"
    if marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one assembly at a time across processes
        if marker.exists():
            return target
        mvn = shutil.which("mvn")
        if not mvn:
            raise LocalPulsarError("Maven (mvn) is not installed; scripts/setup.sh installs it")
        shutil.rmtree(target, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-s",
            str(RUNTIME_DIR / "settings.xml"),
            "-f",
            str(RUNTIME_DIR / "pom.xml"),
            f"-Dpulsar.version={version}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            "-Dmdep.prependGroupId=true",
            f"-DoutputDirectory={target}",
        ]
        log.info("assembling Pulsar %s from Maven Central into %s", version, target)
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise LocalPulsarError(f"Maven could not assemble Pulsar {version}:\n{tail}")
        marker.write_text(json.dumps({"seconds": round(time.monotonic() - started, 1)}))
    return target


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str, timeout: float = 2.0) -> object:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


@dataclass
class LocalPulsar:
    """One standalone broker (with its bookie) in a child process on 127.0.0.1.

    `settings` override broker settings, e.g. {"subscriptionKeySharedUseConsistentHashing":
    "false"}; `jvm_options` add JVM flags. Use as a context manager, or call start() and stop().
    """

    settings: Mapping[str, str] = field(default_factory=dict)
    jvm_options: tuple[str, ...] = ()  # after JVM_FLAGS, so a -D here overrides ours
    data_dir: Path | None = None
    version: str = PULSAR_VERSION
    web_port: int = 0
    broker_port: int = 0
    bookie_port: int = 0
    pid: int | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _own_data_dir: bool = field(default=False, repr=False)

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

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
            *JVM_FLAGS,
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
            "brokerServicePort": str(self.broker_port),
            "webServicePort": str(self.web_port),
            "bookiePort": str(self.bookie_port),
            **self.settings,
        }
        text = "".join(f"{k}={v}\n" for k, v in settings.items())
        (conf / "standalone.conf").write_text(text)
        shutil.copy(RUNTIME_DIR / "log4j2.properties", conf / "log4j2.properties")

    def start(self, *, timeout: float = 180.0) -> LocalPulsar:
        """Start the broker and wait until `public/default` exists; raise with the log tail."""
        java = find_java()
        lib = ensure_runtime(self.version)
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="pulsar-lens-standalone-"))
            self._own_data_dir = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.web_port = self.web_port or free_port()
        self.broker_port = self.broker_port or free_port()
        self.bookie_port = self.bookie_port or free_port()
        self._write_conf()
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                self.command(java, lib),
                cwd=self.data_dir,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid = self.process.pid
        try:
            self.wait_ready(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalPulsarError(
                    f"Pulsar exited with code {self.process.returncode} while starting; "
                    f"log tail:\n{self.log_tail()}"
                )
            if self.is_ready():
                return
            time.sleep(0.5)
        raise LocalPulsarError(
            f"Pulsar did not become ready within {timeout:.0f}s; log tail:\n{self.log_tail()}"
        )

    def is_ready(self) -> bool:
        """The cluster exists and `public/default` has been created."""
        try:
            clusters = _get_json(f"{self.admin_url}/admin/v2/clusters")
            namespaces = _get_json(f"{self.admin_url}/admin/v2/namespaces/public")
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
            _terminate_group(self.pid, grace=grace, child=self.process)
            self.pid = None
        self.process = None
        if self._own_data_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> LocalPulsar:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _terminate_group(
    pid: int, *, grace: float, child: subprocess.Popen[bytes] | None = None
) -> None:
    def gone() -> bool:
        if child is not None:
            return child.poll() is not None
        return not _alive(pid)

    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not gone():
        time.sleep(0.2)
    if not gone():
        log.warning("Pulsar (pid %d) did not stop in %.0fs; killing it", pid, grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if child is not None:
            child.wait(timeout=10)


# --- a detached standalone for `pulsar-lens pulsar start|stop|status` ---------------------


def state_file() -> Path:
    return cache_root() / "run" / "standalone.json"


def start_detached(settings: Mapping[str, str] | None = None) -> dict[str, object]:
    """Start a standalone that outlives this process; remember it in the state file."""
    current = status()
    if current.get("running"):
        raise LocalPulsarError(
            f"a local Pulsar is already running (pid {current['pid']}, {current['admin_url']}); "
            "stop it with `pulsar-lens pulsar stop`"
        )
    data_dir = cache_root() / "run" / "standalone-data"
    shutil.rmtree(data_dir, ignore_errors=True)
    pulsar = LocalPulsar(settings=dict(settings or {}), data_dir=data_dir)
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
    state["running"] = bool(pid) and _alive(pid)
    return state


def stop_detached(*, grace: float = 30.0) -> bool:
    """Stop the detached standalone; False when none was running."""
    state = status()
    if not state.get("running"):
        with contextlib.suppress(OSError):
            state_file().unlink()
        return False
    _terminate_group(int(str(state["pid"])), grace=grace)
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
