"""What the lab says and keeps when a JVM fails to start, without starting one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab import processes
from pulsar_lens.lab.cluster import BROKER_START_ATTEMPTS, LocalPulsarCluster
from pulsar_lens.lab.cluster_conf import ClusterProcess
from pulsar_lens.lab.processes import (
    first_error,
    free_port,
    group_holds_port,
    keep_log,
    log_tail,
    spawn,
    wait_until,
)

FAILED_START = [
    "10:00:00.001 INFO  PulsarService - Starting Pulsar Broker service",
    *(f"10:00:01.{i:03d} INFO  Something - step {i}" for i in range(60)),
    "10:00:02.000 ERROR PulsarBrokerStarter - Failed to start pulsar service.",
    "org.apache.pulsar.broker.PulsarServerException: java.util.concurrent.TimeoutException",
    "\tat org.apache.pulsar.broker.PulsarService.start(PulsarService.java:1)",
    *(f"10:00:03.{i:03d} INFO  Something - shutting down {i}" for i in range(60)),
    "10:00:04.000 ERROR PulsarBrokerStarter - Error while shutting down Pulsar service",
    "java.lang.NullPointerException: the shutdown's own failure",
]


def wait_a_while(
    check: Callable[[], bool],
    process: subprocess.Popen[bytes],
    name: str,
    *,
    log_path: Path | None = None,
    port: int | None = None,
) -> None:
    """`wait_until` as the lab calls it, with two minutes to go and the log's tail if any."""
    wait_until(
        check,
        process,
        deadline=time.monotonic() + 120,
        name=name,
        late=f"timed out waiting for {name}",
        tail=lambda: log_tail(log_path, 30) if log_path else "",
        log_path=log_path,
        port=port,
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PULSAR_LENS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_jvm_that_exits_while_starting_is_told_by_its_first_error_and_its_whole_log_kept(
    tmp_path: Path, cache: Path
) -> None:
    """The tail of a broker that gave up while starting shows only its shutdown's errors; the
    error names the first ERROR (why it gave up) and where the whole log was copied, since
    the log itself goes with the cluster's data directory."""
    log_path = tmp_path / "broker-1.log"
    script = f"import sys; sys.stdout.write({chr(10).join(FAILED_START) + chr(10)!r}); sys.exit(1)"
    process = spawn([sys.executable, "-c", script], cwd=tmp_path, log_path=log_path)
    with pytest.raises(LocalPulsarError) as caught:
        wait_a_while(lambda: False, process, "broker-1", log_path=log_path)
    error = caught.value
    message = str(error)
    assert error.exit_code == 1 and error.process == "broker-1"
    assert message.startswith("broker-1 exited with code 1 while starting; first ERROR: ")
    assert (
        "first ERROR: 10:00:02.000 ERROR PulsarBrokerStarter - Failed to start pulsar service. / "
        "org.apache.pulsar.broker.PulsarServerException: java.util.concurrent.TimeoutException"
    ) in message
    assert "Failed to start" not in message.split("log tail:", 1)[1]  # the tail alone hides it
    assert error.log_path is not None and error.log_path.parent == cache / "kept-logs"
    assert error.log_path.name.endswith("-broker-1.log")
    assert f"whole log: {error.log_path}" in message
    assert error.log_path.read_text().splitlines() == FAILED_START


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([], None),
        (["10:00:00.000 INFO  X - fine", "10:00:00.001 WARN  X - odd"], None),
        (["10:00:00.000 ERROR X - bad", "\tat a.B.c(B.java:1)"], "10:00:00.000 ERROR X - bad"),
        (
            ["10:00:00.000 ERROR X - bad", "10:00:00.001 ERROR Y - worse"],
            "10:00:00.000 ERROR X - bad",
        ),
        (["10:00:00.000 ERROR X - bad"], "10:00:00.000 ERROR X - bad"),
    ],
)
def test_the_first_error_is_the_first_error_line_and_its_exception(
    lines: list[str], said: str | None, tmp_path: Path
) -> None:
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines))
    assert first_error(path) == said
    assert first_error(tmp_path / "none.log") is None


def test_only_the_newest_kept_logs_stay(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "KEPT_LOGS", 3)
    source = tmp_path / "x.log"
    kept = []
    for i in range(5):
        source.write_text(f"start {i}\n")
        kept.append(keep_log(source, f"broker-{i}"))
    assert sorted((cache / "kept-logs").iterdir()) == kept[2:]
    assert [p.read_text() for p in kept[2:] if p] == ["start 2\n", "start 3\n", "start 4\n"]
    assert keep_log(tmp_path / "missing.log", "broker-9") is None


def exited(words: str = "Failed to start pulsar service.") -> LocalPulsarError:
    return LocalPulsarError(
        f"broker-1 exited with code 1 while starting; log tail:\n{words}", exit_code=1
    )


@pytest.mark.parametrize(
    ("failures", "starts", "raised"),
    [
        ([exited()], 1, None),  # gave up once: started again, and ready
        ([exited()] * BROKER_START_ATTEMPTS, BROKER_START_ATTEMPTS - 1, "Failed to start"),
        ([exited("java.net.BindException: Address already in use")], 0, "Address already"),
        ([LocalPulsarError("timed out waiting for broker (broker-1)")], 0, "timed out"),
    ],
)
def test_a_broker_that_exits_while_starting_is_started_again_once(
    failures: list[LocalPulsarError],
    starts: int,
    raised: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a broker's supervisor would; a port taken is `start_retrying`'s (new ports for the
    whole cluster) and a broker that hangs is not started twice."""
    broker = ClusterProcess("broker-1", tmp_path / "broker-1.log", web_port=1, broker_port=2)
    broker.log_path.write_text("the failed start\n")
    pending = list(failures)
    spawned: list[str] = []

    def wait(
        self: LocalPulsarCluster, check: object, member: object, deadline: float, what: str
    ) -> None:
        if pending:
            raise pending.pop(0)

    def respawn(
        self: LocalPulsarCluster, java: str, lib: Path, member: ClusterProcess
    ) -> ClusterProcess:
        spawned.append(member.log_path.read_text() if member.log_path.exists() else "")
        return member

    monkeypatch.setattr(LocalPulsarCluster, "_wait", wait)
    monkeypatch.setattr(LocalPulsarCluster, "_spawn_broker", respawn)
    cluster = LocalPulsarCluster()
    if raised is None:
        cluster._wait_broker("java", Path("lib"), broker, time.monotonic() + 60)
    else:
        with pytest.raises(LocalPulsarError, match=raised):
            cluster._wait_broker("java", Path("lib"), broker, time.monotonic() + 60)
    assert spawned == [""] * starts  # each new start writes a log of its own


EXIT_WHEN_TOLD = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""

LISTENER = """
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("listening", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_port_answered_by_another_process_is_not_the_started_ones(tmp_path: Path) -> None:
    """A readiness check that passes because another server took the port first (the JVM
    then exits saying its address is in use) is not a start: the wait goes on until the
    process exits, and its exit is the error, so the start is tried again on new ports."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        told = tmp_path / "exit-now"  # the process lives until the third check has passed
        process = spawn(
            [sys.executable, "-c", EXIT_WHEN_TOLD, str(told)],
            cwd=tmp_path,
            log_path=tmp_path / "late.log",
        )
        assert group_holds_port(process.pid, port) is False
        checks = []

        def the_other_answers() -> bool:
            checks.append(1)
            if len(checks) == 3:
                told.touch()
            return True

        with pytest.raises(LocalPulsarError, match="exited with code 0 while starting"):
            wait_a_while(the_other_answers, process, "broker-1", port=port)
        assert len(checks) >= 3  # each check passed, and none counted as the start


def test_a_port_the_process_listens_on_is_its_own(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "listener.log"
    process = spawn(
        [sys.executable, "-c", LISTENER, str(port), "120"], cwd=tmp_path, log_path=log_path
    )
    try:
        wait_a_while(lambda: "listening" in log_path.read_text(), process, "listener", port=port)
        assert group_holds_port(process.pid, port) is True
        assert group_holds_port(process.pid, free_port()) is False  # nothing listens there
    finally:
        process.kill()
        process.wait(30)


def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    """Ports the lab picks for a JVM to bind later are out of reach of `bind(0)` servers and
    outgoing connections, and one process never picks the same port twice."""
    span = processes.ephemeral_range()
    assert span is not None  # Linux: /proc/sys/net/ipv4/ip_local_port_range
    picked = [free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)
    assert all(processes.LOWEST_PORT <= p < span[0] for p in picked)
    with socket.socket() as server:  # a server of another kind takes its port from the range
        server.bind(("127.0.0.1", 0))
        assert server.getsockname()[1] >= span[0]
