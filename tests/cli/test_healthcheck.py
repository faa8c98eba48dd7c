"""The image's health check: unhealthy when collect's /health
says the store refuses writes even though the dashboard answers, healthy when both answer 200
or when no collect process listens; its names agree with what the app serves."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.cli import healthcheck
from pulsar_lens.cli.metrics_endpoint import HEALTH_PATH, MetricsEndpoint
from pulsar_lens.cli.serve_cmd import DEFAULT_PORT
from pulsar_lens.collectors.health import HealthRecorder
from pulsar_lens.collectors.loop import Heartbeat
from pulsar_lens.core.parts import MetricsSettings
from pulsar_lens.core.store import Store
from pulsar_lens.exporter.server import ADDRESS_ENV, PORT_ENV
from pulsar_lens.lab.localpulsar import free_port
from tests.deploy.test_manifests import dockerfile_words

ENOSPC = "could not write snapshot sha256:ab under /data/store: ENOSPC: No space left on device"


@contextmanager
def dashboard() -> Iterator[str]:
    """A stand-in for Streamlit's health path: 200 "ok" on loopback."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/_stcore/health"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def collect_health(root: Path) -> Iterator[tuple[int, HealthRecorder]]:
    """collect's /metrics and /health endpoint, on a free port, fed by `record`."""
    health = HealthRecorder(root, interval=30.0, deadline=120.0)
    port = free_port()
    endpoint = MetricsEndpoint(Store(root), MetricsSettings(port=port), health=health)
    endpoint.start()
    try:
        yield port, health
    finally:
        endpoint.close()


def beat(write_error: str | None) -> Heartbeat:
    return Heartbeat(
        at=dt.datetime.now(dt.UTC), topics=1, subscriptions=1, requests=9, errors=0,
        duration=0.2, snapshot_id=None if write_error else "sha256:ab", write_error=write_error,
    )  # fmt: skip


def test_healthcheck_fails_when_the_store_refuses_writes_though_the_dashboard_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with dashboard() as url, collect_health(tmp_path) as (port, health):
        environ = {PORT_ENV: str(port)}
        health.record(beat(None))
        healthy = healthcheck.main(["--dashboard", url], environ)
        health.record(beat(ENOSPC))
        failing = healthcheck.main(["--dashboard", url], environ)
    assert (healthy, failing) == (0, 1)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"collect http://127.0.0.1:{port}/health: 503 ")
    assert "the store refused the last 1 write(s)" in last and "ENOSPC" in last


def test_healthcheck_passes_when_no_collect_process_listens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with dashboard() as url:
        code = healthcheck.main(["--dashboard", url], {PORT_ENV: str(free_port())})
    assert code == 0
    assert "not listening" in capsys.readouterr().out


def test_healthcheck_fails_when_the_dashboard_does_not_answer(tmp_path: Path) -> None:
    with collect_health(tmp_path) as (port, health):
        health.record(beat(None))
        url = f"http://127.0.0.1:{free_port()}/_stcore/health"
        assert healthcheck.main(["--dashboard", url], {PORT_ENV: str(port)}) == 1


@pytest.mark.parametrize(
    ("environ", "url"),
    [
        ({}, None),
        ({PORT_ENV: "0"}, None),
        ({PORT_ENV: "9464", ADDRESS_ENV: "0.0.0.0"}, "http://127.0.0.1:9464/health"),
        ({PORT_ENV: "9464", ADDRESS_ENV: "::1"}, "http://[::1]:9464/health"),
    ],
)
def test_healthcheck_finds_collect_from_the_metrics_settings(
    environ: dict[str, str], url: str | None
) -> None:
    assert healthcheck.collect_url(environ) == url


def test_healthcheck_names_agree_with_the_app_and_the_image() -> None:
    from streamlit.web.server.starlette.starlette_routes import ROUTE_HEALTH

    assert (healthcheck.PORT_ENV, healthcheck.ADDRESS_ENV) == (PORT_ENV, ADDRESS_ENV)
    assert healthcheck.HEALTH_PATH == HEALTH_PATH
    assert f"http://127.0.0.1:{DEFAULT_PORT}/{ROUTE_HEALTH}" == healthcheck.DASHBOARD_URL
    words = dockerfile_words("HEALTHCHECK")
    assert words[words.index("CMD") :][:4] == ["CMD", "python", "-m", "pulsar_lens.cli.healthcheck"]
    assert healthcheck.DASHBOARD_URL in words
