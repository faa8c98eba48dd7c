"""The child processes the lab runs: each Pulsar JVM (a standalone, or a cluster's ZooKeeper,
bookie and brokers) in its own process group, with its output in a log file, on free ports
of 127.0.0.1, waited for until it answers, and stopped with its whole group.

`LocalPulsar` (`lab.localpulsar`) and `LocalPulsarCluster` (`lab.cluster`) both start theirs
here, so a JVM is started, waited for, told about and stopped one way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab.runtime import cache_root

log = logging.getLogger(__name__)
T = TypeVar("T")

JVM_CHARSET = "UTF-8"
"""The broker hashes consumer names with `String.getBytes()`, i.e. the JVM's default charset.
Java 18+ (the official 4.0 images run 21) defaults to UTF-8; Java 17 takes it from the locale,
so the harness fixes it to what production brokers use."""

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


def jvm_flags(data_dir: Path) -> list[str]:
    """JVM_FLAGS, and a temporary directory inside `data_dir` (made here): the native
    libraries RocksDB, Netty and LZ4 unpack there go with the data directory, even from a
    JVM that was killed and so could not delete its own."""
    tmp = data_dir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return [*JVM_FLAGS, f"-Djava.io.tmpdir={tmp}"]


BIND_ATTEMPTS = 3
PORT_TAKEN = "Address already in use"
"""What a JVM's log says when a port `free_port` picked was taken before it bound it: a start
whose ports are all its own choice is tried again on new ones, BIND_ATTEMPTS times at most."""


def start_retrying(start: Callable[[], T], *, ours: bool, forget: Callable[[], None]) -> T:
    """`start()`; when the process it starts lost a port to another before binding it (its
    log says PORT_TAKEN) and `ours` (every port and the data directory were chosen here, so
    nothing the caller named changes), `forget()` drops them and it starts again on new
    ones, BIND_ATTEMPTS times at most. Any other failure is raised at once."""
    for attempt in range(1, BIND_ATTEMPTS + 1):
        try:
            return start()
        except LocalPulsarError as exc:
            if not (ours and attempt < BIND_ATTEMPTS and PORT_TAKEN in str(exc)):
                raise
            log.warning("a port was taken before it was bound; starting again on new ports")
            forget()
    raise AssertionError("unreachable: the last attempt returns or raises")


LOWEST_PORT = 10000  # the ports picked lie between this and the system's ephemeral range
PICKS = 50  # ports tried there before the OS is asked for one of its own
_handed_out: set[int] = set()  # never the same port twice in one process (its taker may be slow)


def ephemeral_range() -> tuple[int, int] | None:
    """The ports the system gives to `bind(0)` and outgoing connections; None when unknown."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return None


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now, below the system's ephemeral range when there is
    room: a port picked for a JVM to bind later cannot then go to another server's `bind(0)`
    or to an outgoing connection meanwhile (in the ephemeral range both take ports at any
    moment). Where the range is unknown or leaves no room, the OS picks one."""
    span = ephemeral_range()
    if span is not None and span[0] > LOWEST_PORT + PICKS:
        for port in random.sample(range(LOWEST_PORT, span[0]), PICKS):
            if port in _handed_out:  # free again, but perhaps not yet bound by its taker
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1.0):
        return True
    return False


LISTEN = "0A"  # a listening socket's state in /proc/net/tcp


def listening_inodes(port: int) -> set[str] | None:
    """The socket inodes listening on TCP `port` (any address), from /proc/net/tcp and tcp6;
    None where the system has no such table to read."""
    found: set[str] = set()
    read_any = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for row in rows:
            fields = row.split()
            if (
                len(fields) > 9
                and fields[3] == LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                found.add(fields[9])
    return found if read_any else None


def group_holds_port(pgid: int, port: int) -> bool | None:
    """Whether a process of process group `pgid` holds the socket listening on `port`; None
    when this system cannot tell (no /proc). False when nothing listens there, or another
    process does: a readiness check answered on that port would not be the group's."""
    inodes = listening_inodes(port)
    if inodes is None:
        return None
    sockets = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the group is field 5 of stat; the command (field 2) may hold spaces or brackets
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            if any(os.readlink(fd) in sockets for fd in (entry / "fd").iterdir()):
                return True
    return False


def get_json(url: str, timeout: float = 2.0, *, token: str | None = None) -> object:
    """A readiness check's GET: the decoded JSON answer (None for an empty body)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def spawn(argv: Sequence[str], *, cwd: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in a process group of its own (so stopping it stops every child it
    started), its output appended to `log_path`, reading nothing."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def log_tail(path: Path, lines: int) -> str:
    """The last `lines` of a process's log, for the error that says why it failed."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


ERROR_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} ERROR ")
"""A line the JVMs log at ERROR (`lab/pulsar_runtime/log4j2.properties`'s pattern)."""


def first_error(path: Path) -> str | None:
    """The first ERROR line of a log and the exception line under it, if any: why a JVM
    that exits while starting gave up, which its shutdown's own errors at the tail hide."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        if ERROR_LINE.match(line):
            after = lines[i + 1] if i + 1 < len(lines) else ""
            is_cause = after[:1].isalpha()  # not a logged line (a time) nor a stack frame
            return f"{line.strip()} / {after.strip()}" if is_cause else line.strip()
    return None


KEPT_LOGS = 50
"""How many logs of failed starts `keep_log` keeps (the newest)."""


def keep_log(path: Path, name: str) -> Path | None:
    """A copy of the whole log `path` in `kept-logs` of the cache (a process's own data
    directory goes with its `stop()`), named by time and `name`; only the newest KEPT_LOGS
    are kept. None when it cannot be copied (the error still has the tail)."""
    folder = cache_root() / "kept-logs"
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S.%f")
    kept = folder / f"{stamp}-{os.getpid()}-{name}.log"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, kept)
        for old in sorted(folder.glob("*.log"))[:-KEPT_LOGS]:
            old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not keep the log of %s: %s", name, exc)
        return None
    return kept


def start_failed(
    message: str,
    *,
    name: str,
    tail: Callable[[], str],
    log_path: Path | None,
    pid: int | None,
    port: int | None,
    exit_code: int | None = None,
) -> LocalPulsarError:
    """The error of a process that failed to start: `message`, its log's first ERROR line,
    where its whole log was kept (the error's `log_path`), and the tail."""
    kept = keep_log(log_path, name) if log_path is not None else None
    parts = [message]
    error = first_error(log_path) if log_path is not None else None
    if error:
        parts.append(f"first ERROR: {error}")
    if kept is not None:
        parts.append(f"whole log: {kept}")
    return LocalPulsarError(
        "; ".join(parts) + f"; log tail:\n{tail()}",
        process=name,
        pid=pid,
        port=port,
        log_path=kept or log_path,
        exit_code=exit_code,
    )


def wait_until(
    check: Callable[[], bool],
    process: subprocess.Popen[bytes] | None,
    *,
    deadline: float,
    name: str,
    late: str,
    tail: Callable[[], str],
    log_path: Path | None = None,
    port: int | None = None,
) -> None:
    """Poll `check` every half second until it holds; raise `start_failed` when the process
    exits first (`name` exited ...) or `deadline` (a `time.monotonic()`) passes (`late` says
    what was waited for). `port` goes into the error's fields, and the check counts only
    while the process's own group listens on it: an answer from another server that took
    the port first (the process then exits, its log saying PORT_TAKEN) is not a start."""
    pid = process.pid if process is not None else None
    while time.monotonic() < deadline:
        if process is None or process.poll() is not None:
            code = process.returncode if process is not None else None
            message = f"{name} exited with code {code} while starting"
            raise start_failed(
                message, name=name, tail=tail, log_path=log_path, pid=pid, port=port, exit_code=code
            )
        if check() and (port is None or pid is None or group_holds_port(pid, port) is not False):
            return
        time.sleep(0.5)
    raise start_failed(late, name=name, tail=tail, log_path=log_path, pid=pid, port=port)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process's group (a crash: no shutdown hook runs) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def alive(pid: int) -> bool:
    """Whether a process of that id exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate_group(
    pid: int, *, grace: float, child: subprocess.Popen[bytes] | None = None
) -> None:
    """SIGTERM the process group of `pid`, then SIGKILL after `grace` seconds; `child`, our
    own Popen of it, is reaped."""

    def gone() -> bool:
        if child is not None:
            return child.poll() is not None
        return not alive(pid)

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
