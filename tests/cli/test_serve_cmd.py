"""`pulsar-lens serve`: the supervisor, usage errors, a dashboard that cannot start, SIGTERM."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.cli.supervisor import Child, ChildFailed, say, supervise
from pulsar_lens.lab.localpulsar import free_port
from tests.lens_cli import clean_environ
from tests.waits import answers_ok

UNREACHABLE = "http://127.0.0.1:9"  # discard port: nothing answers; collect keeps retrying
PY = sys.executable


def test_supervise_stops_the_others_when_one_child_exits() -> None:
    sleeper = Child("sleeper", [PY, "-c", "import time; time.sleep(60)"])
    failing = Child("failing", [PY, "-c", "print('cannot bind'); raise SystemExit(3)"])
    with pytest.raises(ChildFailed) as caught:
        supervise([sleeper, failing], stop=threading.Event(), poll_every=0.1)
    assert "failing exited with code 3" in str(caught.value)
    assert "cannot bind" in str(caught.value)
    assert sleeper.returncode is not None


def test_supervise_stops_every_child_when_asked() -> None:
    children = [Child(f"c{i}", [PY, "-c", "import time; time.sleep(60)"]) for i in range(2)]
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    supervise(children, stop=stop, poll_every=0.1)
    assert time.monotonic() - started < 45  # stopped: not the 60 s they would sleep
    assert all(c.returncode is not None for c in children)


def test_serve_without_an_admin_url_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "no admin URL" in capsys.readouterr().err


def test_serve_exits_1_when_the_dashboard_port_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["serve", "--admin-url", UNREACHABLE, "--port", str(port), "--metrics-port", "0"]
        code = main([*argv, "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 1
    assert "pulsar-lens: dashboard exited with code" in err
    assert f"Port {port} is not available" in err


def _health(url: str) -> bool:
    return answers_ok(f"{url}/_stcore/health")


def test_serve_stops_both_processes_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    argv = [
        PY,
        "-m",
        "pulsar_lens.cli.main",
        "serve",
        "--admin-url",
        UNREACHABLE,
        "--port",
        str(port),
    ]
    with subprocess.Popen(
        [*argv, "--metrics-port", "0", "--store", str(tmp_path / "store")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        _stop_on_sigterm(proc, port)


def _stop_on_sigterm(proc: subprocess.Popen[str], port: int) -> None:
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("Pulsar Lens dashboard:") or not line:
                break
        assert lines[-1].strip() == f"Pulsar Lens dashboard: http://127.0.0.1:{port}", lines
        assert _health(f"http://127.0.0.1:{port}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not _health(f"http://127.0.0.1:{port}")
    finally:
        if proc.poll() is None:  # take its children down too: they would hold the ports
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_the_dashboard_process_gets_no_admin_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_lens.cli.serve_cmd import collect_child, streamlit_child
    from pulsar_lens.core.settings import Settings, parse_duration

    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "s3cret")
    monkeypatch.setenv("PULSAR_LENS_SPARK_MASTER", "sc://spark:15002/;token=connect-s3cret")
    interval = parse_duration("10s")
    dashboard = streamlit_child(
        tmp_path, interval, address="127.0.0.1", port=8501, settings=Settings.from_env()
    )
    collector = collect_child("http://broker:8080", tmp_path, interval)
    assert dashboard.env is not None and "PULSAR_ADMIN_TOKEN" not in dashboard.env
    assert "connect-s3cret" not in " ".join(dashboard.env.values())  # Spark is the job worker's
    assert dashboard.env["PULSAR_LENS_STORE"] == str(tmp_path)
    assert collector.env is not None and collector.env["PULSAR_ADMIN_TOKEN"] == "s3cret"
    assert "s3cret" not in " ".join(collector.argv)


def test_url_credentials_stay_off_the_collector_command_line_and_the_banner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_lens.cli.serve_cmd import collect_child, streamlit_child
    from pulsar_lens.core.settings import Settings, parse_duration

    url = "http://admin:PW-never-in-ps@broker:8080"
    monkeypatch.setenv("PULSAR_ADMIN_URL", url)
    interval = parse_duration("10s")
    collector = collect_child(url, tmp_path, interval)
    dashboard = streamlit_child(
        tmp_path, interval, address="127.0.0.1", port=8501, settings=Settings.from_env()
    )
    assert "PW-never-in-ps" not in " ".join(collector.argv)
    assert collector.env is not None and collector.env["PULSAR_ADMIN_URL"] == url
    assert dashboard.env is not None
    assert "PW-never-in-ps" not in " ".join(f"{k}={v}" for k, v in dashboard.env.items())


def test_serve_browses_an_existing_store_offline_without_an_admin_url(tmp_path: Path) -> None:
    from pulsar_lens.core.store import Store
    from tests.core.snapshots import make_snapshot

    store = tmp_path / "store"
    Store(store).write(make_snapshot())
    port = free_port()
    env = clean_environ()
    argv = [PY, "-m", "pulsar_lens.cli.main", "serve", "--port", str(port), "--store", str(store)]
    argv += ["--metrics-port", "0"]
    with subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        _stop_on_sigterm(proc, port)
        rest = proc.stdout.read() if proc.stdout else ""
    assert "offline: no admin URL is set, so nothing is polled" in rest


def test_serve_offline_serves_metrics_of_the_stored_polls(tmp_path: Path) -> None:
    """Without a loop there is no collect process: the serve process answers /metrics from
    the store, and says where."""
    import urllib.request

    from pulsar_lens.core.store import Store
    from tests.core.snapshots import make_snapshot

    store = tmp_path / "store"
    Store(store).write(make_snapshot())
    port, metrics = free_port(), free_port()
    env = clean_environ()
    argv = [PY, "-m", "pulsar_lens.cli.main", "serve", "--port", str(port), "--store", str(store)]
    argv += ["--metrics-port", str(metrics)]
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline()]
            while lines[-1] and not lines[-1].startswith("Prometheus metrics:"):
                lines.append(proc.stdout.readline())  # ends at EOF when serve exits
            assert lines[-1] == f"Prometheus metrics: http://127.0.0.1:{metrics}/metrics\n", lines
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=120) as r:
                text = r.read().decode()
            assert "pulsar_lens_snapshot_age_seconds " in text
            assert 'pulsar_lens_plugin_errors{plugin="subscription-status"} 0.0' in text
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


class _Writes(io.StringIO):
    """A stdout that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_echoed_child_lines_are_written_whole() -> None:
    """Each echoed line and the supervisor's own go out in one write with their newline:
    with two writes (print's), a line of another thread lands between them and joins the
    line (a banner a reader parses, such as the demo's admin URL, then reads wrong)."""
    out = _Writes()
    child = Child("talker", [PY, "-c", "print('one'); print('two')"], echo=out)
    child.start()
    assert child.process is not None and child.process.wait(timeout=30) == 0
    child.stop()
    say("Pulsar Lens dashboard: http://127.0.0.1:8501", out)
    assert out.writes == [
        "[talker] one\n",
        "[talker] two\n",
        "Pulsar Lens dashboard: http://127.0.0.1:8501\n",
    ]
