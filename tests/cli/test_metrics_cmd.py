"""`collect --metrics-port`: parsing, the endpoint while the loop runs, a taken port, and the
port `serve`/`demo` hand to their collect child."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.cli.collect_cmd import Source
from pulsar_lens.cli.main import build_parser, main
from pulsar_lens.cli.metrics_endpoint import metrics_port
from pulsar_lens.cli.serve_cmd import collect_child
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.parts import MetricsSettings
from pulsar_lens.lab.localpulsar import free_port
from tests.core.snapshots import make_snapshot

SENTINEL = "sentinel-token-5f1c2e"


class GatedSource:
    """Polls instantly once, then each further poll waits (bounded) until `release` is set."""

    def __init__(self) -> None:
        self.polls = 0
        self.release = threading.Event()

    def __call__(self, admin_url: str, namespaces: object) -> Source:
        return Source(poll=self.poll)

    def poll(self) -> Snapshot:
        self.polls += 1
        if self.polls > 1:
            self.release.wait(timeout=180)  # past wait_scrape, still bounded
        return make_snapshot(at=dt.datetime.now(dt.UTC), backlog=4)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body: bytes = resp.read()
    return body.decode()


def wait_scrape(
    port: int, *, timeout: float = 120.0, needs: tuple[str, ...] = ("\npulsar_lens_topics ",)
) -> str:
    """The first scrape that counts the first poll and carries its snapshot's families (and
    all of `needs`): the poll is counted when its heartbeat comes, the families are built
    after it, a plugin's once the results pass has stored its result (a scrape during the
    pass presents the results stored so far, so wait for each plugin's own fact)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = scrape(port)
        except OSError as exc:  # not listening yet, or a scrape slower than its timeout
            text = f"no answer: {exc}"
        if (
            "pulsar_lens_polls_total 1.0" in text
            and "\npulsar_lens_topics " in text
            and all(need in text for need in needs)
        ):
            return text
        time.sleep(0.1)
    raise AssertionError(
        f"/metrics on port {port} did not count a poll with its topics within {timeout:.0f}s; "
        f"it last answered:\n{text[-2000:]}"
    )


def test_collect_metrics_port_serves_while_the_loop_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", SENTINEL)
    port = free_port()
    source = GatedSource()
    where = ["--admin-url", "http://b:8080", "--store", str(tmp_path)]
    pace = ["--interval", "10ms", "--max-polls", "2", "--metrics-port", str(port)]
    args = build_parser().parse_args(["collect", *where, *pace])
    args.source_factory = source
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(args.func(args)))
    worker.start()
    try:
        text = wait_scrape(port)
    finally:
        source.release.set()
        worker.join(timeout=120)
    assert codes == [0]
    found = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert found["pulsar_lens_topics"].value == 3
    assert found["pulsar_lens_poll_requests"].value == 9
    assert SENTINEL not in text
    with pytest.raises(OSError):
        scrape(port)  # stopped with the loop


def test_collect_metrics_port_defaults_to_off_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parser = build_parser()
    assert parser.parse_args(["collect"]).metrics_port is None
    assert metrics_port(None, default=0, settings=MetricsSettings.from_env({})) == 0
    assert (
        metrics_port(
            None, default=0, settings=MetricsSettings.from_env({"PULSAR_LENS_METRICS_PORT": "9500"})
        )
        == 9500
    )
    assert (
        metrics_port(
            0, default=9464, settings=MetricsSettings.from_env({"PULSAR_LENS_METRICS_PORT": "9500"})
        )
        == 0
    )
    assert metrics_port(None, default=9464, settings=MetricsSettings.from_env({})) == 9464


@pytest.mark.parametrize("bad", ["-1", "65536", "nine"])
def test_collect_metrics_port_rejects_non_ports(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["collect", "--metrics-port", bad])
    assert exited.value.code == 2
    assert "--metrics-port must be a port" in capsys.readouterr().err


def test_collect_metrics_port_taken_exits_2_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["collect", "--once", "--admin-url", "http://127.0.0.1:9", "--store", str(tmp_path)]
        code = main([*argv, "--metrics-port", str(port)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in err and "0 to turn" in err


def port_given(argv: list[str]) -> str:
    return argv[argv.index("--metrics-port") + 1]


def test_serve_hands_its_metrics_port_to_the_collect_child(tmp_path: Path) -> None:
    child = collect_child("http://b:8080", tmp_path, dt.timedelta(seconds=5), metrics=9464)
    assert port_given(list(child.argv)) == "9464"
    off = collect_child("http://b:8080", tmp_path, dt.timedelta(seconds=5))
    assert port_given(list(off.argv)) == "0"
    assert build_parser().parse_args(["serve", "--metrics-port", "0"]).metrics_port == 0
    assert build_parser().parse_args(["demo"]).metrics_port is None
