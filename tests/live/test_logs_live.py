"""pulsar-client's own log lines, from a real consumer on the live broker, in the one format.

Each case runs a child process (the C++ library writes to the process's stdout, which
pytest's capture would not see) that sets up logging as every Pulsar Lens process does,
subscribes, provokes a broker error with a second exclusive consumer, and exits.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from pulsar_lens.lab.localpulsar import LocalPulsar

ROOT = Path(__file__).resolve().parents[2]
CHILD = textwrap.dedent(
    """
    import sys
    from pulsar_lens.core.logs import pulsar_client, setup_logging
    from pulsar_lens.core.settings import Settings

    setup_logging(Settings.from_env().logs)  # as an entry point sets up its logging
    service_url, topic, close = sys.argv[1], sys.argv[2], sys.argv[3] == "close"
    client = pulsar_client(service_url, operation_timeout_seconds=30)
    consumer = client.subscribe(topic, "only-one")
    try:
        client.subscribe(topic, "only-one")  # Exclusive: the broker answers ConsumerBusy
    except Exception as exc:
        # one write: print's text and its newline are two, between which a log line may land
        sys.stderr.write(f"second subscribe refused: {type(exc).__name__}\\n")
        sys.stderr.flush()
    if close:
        consumer.close()
        client.close()
    """
)
OUR_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<msg>.*)$"
)
NATIVE_LINE = re.compile(r"\b(DEBUG|INFO|WARN|ERROR)\s+\[\d+\] \w+:\d+ \|")  # the C++ format


def run_child(
    broker: LocalPulsar, *, close: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    topic = f"persistent://public/default/logs-{uuid.uuid4().hex[:8]}"
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-c", CHILD, broker.service_url, topic, "close" if close else "keep"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env,
        cwd=ROOT,
        check=True,
    )


def client_lines(stderr: str) -> list[re.Match[str]]:
    found = [OUR_LINE.match(line) for line in stderr.splitlines()]
    return [m for m in found if m is not None and m["logger"] == "pulsar.client"]


def test_consumer_prints_no_info_lines_and_routes_warnings(pulsar: LocalPulsar) -> None:
    done = run_child(pulsar)
    assert "second subscribe refused: ConsumerBusy" in done.stderr
    assert done.stdout == ""
    assert not NATIVE_LINE.search(done.stderr), done.stderr
    lines = client_lines(done.stderr)
    assert {m["level"] for m in lines} <= {"WARNING", "ERROR"}, done.stderr
    assert any(m["level"] == "WARNING" and "ConsumerBusy" in m["msg"] for m in lines), done.stderr


def test_client_left_open_at_exit_prints_nothing_on_stdout(pulsar: LocalPulsar) -> None:
    done = run_child(pulsar, close=False)
    assert done.stdout == ""
    assert not NATIVE_LINE.search(done.stderr), done.stderr


def test_level_variable_hides_warnings(pulsar: LocalPulsar) -> None:
    done = run_child(pulsar, PULSAR_LENS_LOG_LEVEL="ERROR")
    levels = {m["level"] for m in client_lines(done.stderr)}
    assert levels == {"ERROR"}, done.stderr
    assert done.stdout == ""


def test_client_level_variable_shows_the_library_info_lines(pulsar: LocalPulsar) -> None:
    done = run_child(pulsar, PULSAR_LENS_CLIENT_LOG_LEVEL="INFO")
    lines = client_lines(done.stderr)
    assert any(m["level"] == "INFO" and "Connected to broker" in m["msg"] for m in lines)
    assert done.stdout == ""
    assert not NATIVE_LINE.search(done.stderr), done.stderr


def test_processes_logging_the_library_at_info_exit_cleanly(pulsar: LocalPulsar) -> None:
    """A Python logger handed to pulsar-client aborts about one exit in eight here (its C++
    threads calling into a finalizing interpreter); the pipe never does."""
    for _ in range(8):
        done = run_child(pulsar, PULSAR_LENS_CLIENT_LOG_LEVEL="INFO")  # check=True: exit 0
        assert done.stdout == ""
