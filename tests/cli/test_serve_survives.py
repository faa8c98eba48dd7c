"""`serve` keeps serving through everything a hostile cluster, store or plugin does at once:
numbers no column holds, shapes that are not subscriptions, an answer that trickles past the
poll deadline, echoed credentials, a corrupt store file, plugins that exit and hang."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import free_port
from tests.cli.test_collect_survival import BULK, hostile_bulk, hostile_stats
from tests.fake_admin import FakeAdmin, Seen, echo_headers
from tests.lens_cli import ROOT, clean_environ
from tests.plugins.test_isolation import BEHAVIOURS, TEMPLATE

TOKEN = "SRVtok-Kk3j8-Pp1"
POLLS = 4  # polls to watch go by, each one through every case
TRICKLED = "/admin/v2/persistent/public/second/partitioned"


def get(url: str) -> tuple[int, str]:
    # answering is the behaviour, not answering fast: a scrape that builds its metrics on a
    # machine busy with a Spark job and hostile answers may take seconds
    with urllib.request.urlopen(url, timeout=60) as resp:
        return resp.status, resp.read().decode()


def trickle_forever(seen: Seen) -> tuple[int, dict[str, str], object]:
    def drip():  # bounded: ten minutes at most, far past any deadline
        yield b"["
        for _ in range(3000):
            time.sleep(0.2)
            yield b" "

    return 200, {"Content-Type": "application/json"}, drip()


def hostile(fake: FakeAdmin) -> None:
    fake.mutate(BULK, hostile_bulk)
    fake.mutate("/admin/v2/persistent/public/default/orders/stats", hostile_stats)
    fake.rule(
        "/admin/v2/persistent/public/second",
        lambda seen: (500, {}, ("boom\n" + "\n".join(echo_headers(seen))).encode()),
    )
    fake.rule(TRICKLED, trickle_forever)


def test_serve_keeps_serving_through_every_hostile_case(tmp_path: Path) -> None:
    store = tmp_path / "store"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for slug in ("exits", "hangs"):
        body = TEMPLATE.format(slug=slug, body=BEHAVIOURS[slug])
        (plugins / f"{slug}.py").write_text(textwrap.dedent(body))
    today = store / "topics" / f"date={dt.datetime.now(dt.UTC).date().isoformat()}"
    today.mkdir(parents=True)
    (today / "foreign.parquet").write_bytes(os.urandom(64))  # read with every new snapshot
    port, metrics = free_port(), free_port()
    with FakeAdmin() as fake:
        hostile(fake)
        env = {
            **clean_environ(),
            "PULSAR_ADMIN_URL": fake.url,
            "PULSAR_ADMIN_TOKEN": TOKEN,
            "PULSAR_LENS_PLUGIN_DIRS": str(plugins),
            "PULSAR_LENS_PLUGIN_TIMEOUT": "2s",
            "PULSAR_LENS_PLUGIN_IMPORT_TIMEOUT": "5s",
            "PULSAR_LENS_POLL_DEADLINE": "3s",
        }
        argv = [sys.executable, "-m", "pulsar_lens.cli.main", "serve", "--port", str(port)]
        argv += ["--metrics-port", str(metrics), "--interval", "2s", "--store", str(store)]
        with subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as proc:
            try:
                watched = _watch(proc, store, port, metrics)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
                output = proc.stdout.read() if proc.stdout else ""
    assert watched >= POLLS, output
    assert TOKEN not in output and TOKEN[:8] not in output
    assert "Traceback" not in output, output


def _watch(proc: subprocess.Popen[str], store: Path, port: int, metrics: int) -> int:
    """Poll the dashboard and /metrics until POLLS snapshots are stored (at most 3 minutes);
    both must answer every time."""
    deadline = time.monotonic() + 180
    stored = 0
    up = False
    while time.monotonic() < deadline and stored < POLLS:
        assert proc.poll() is None, "serve exited"
        time.sleep(2)
        try:
            health, _ = get(f"http://127.0.0.1:{port}/_stcore/health")
            status, text = get(f"http://127.0.0.1:{metrics}/metrics")
        except OSError:
            assert not up, "the dashboard or /metrics stopped answering"
            continue  # still starting
        up = True
        assert health == 200
        assert status == 200 and "pulsar_lens_polls_total" in text
        assert TOKEN not in text
        stored = len(Store(store).snapshots())
    index = Store(store).snapshots()
    errors = "\n".join(index["errors_json"])
    assert "does not fit a 64-bit integer" in errors  # the bad numbers, every poll
    assert "deadline" in errors  # the trickling answer, cut at the poll deadline
    assert TOKEN not in errors and "Bearer ***" in errors
    assert Store(store).quarantined_files() == 1
    assert json.loads(index["errors_json"].iloc[-1])
    return stored
