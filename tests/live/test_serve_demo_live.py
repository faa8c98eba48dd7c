"""`pulsar-lens serve` against a live broker and `pulsar-lens demo` end to end, as processes,
the demo on 4.0 (a standalone, two brokers) and on a 3.0 cluster.

Both are stopped the way a user stops them (SIGINT, as Ctrl-C) and must leave nothing
running: the dashboard port and, for the demo, its broker stop answering.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests

from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from tests.waits import answers_ok

PY = sys.executable


def _read_until(proc: subprocess.Popen[str], prefix: str, *, timeout: float) -> list[str]:
    """Lines of output up to and including the first starting with `prefix`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"no line starting with {prefix!r}; output:\n" + "\n".join(lines))


def _wait(check: Callable[[], bool], *, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _interrupt(proc: subprocess.Popen[str], *, timeout: float) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:  # take its children down too: they would hold the ports
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_serve_collects_from_a_live_broker_and_stops_on_ctrl_c(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    port, metrics, store = free_port(), free_port(), tmp_path / "store"
    argv = [
        PY,
        "-m",
        "pulsar_lens.cli.main",
        "serve",
        "--admin-url",
        pulsar.admin_url,
        "--interval",
        "2s",
    ]
    with subprocess.Popen(
        [*argv, "--port", str(port), "--metrics-port", str(metrics), "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        _read_until(proc, "Pulsar Lens dashboard:", timeout=90)
        _wait(lambda: len(Store(store).snapshots()) >= 2, what="two polls", timeout=60)
        # on a busy machine the first answer of each (the page script, the first results
        # behind /metrics) can take longer than one request's patience
        for url in (
            f"http://127.0.0.1:{port}/_stcore/health",
            f"http://127.0.0.1:{metrics}/metrics",
        ):
            _wait(lambda url=url: answers_ok(url, timeout=15), what=f"{url} to answer", timeout=120)
        assert _interrupt(proc, timeout=30) == 0
    assert not answers_ok(f"http://127.0.0.1:{port}/_stcore/health")


def _demo(store: Path, port: int, *options: str) -> subprocess.Popen[str]:
    """`pulsar-lens demo` with `options`, serving on `port` into `store` (polls every 2 s), in
    a session of its own, its output read by the test."""
    argv = [PY, "-m", "pulsar_lens.cli.main", "demo", *options, "--port", str(port)]
    argv += ["--interval", "2s", "--metrics-port", "0", "--store", str(store)]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _key_shared_consumers(store: Path) -> int:
    consumers = Store(store).read_latest("consumers").to_pandas()
    return int(consumers["consumer_name"].str.startswith("orders-").sum())


def test_demo_command_serves_live_data_and_stops_everything(tmp_path: Path) -> None:
    port, store = free_port(), tmp_path / "store"
    with _demo(store, port) as proc:
        lines = _read_until(proc, "Local Pulsar admin API:", timeout=240)
        assert f"Pulsar Lens dashboard: http://127.0.0.1:{port}" in lines
        admin_url = lines[-1].split(": ", 1)[1]
        _wait(lambda: _key_shared_consumers(store) >= 3, what="orders consumers", timeout=90)
        assert answers_ok(f"{admin_url}/admin/v2/clusters")
        assert _interrupt(proc, timeout=120) == 0
    assert not answers_ok(f"http://127.0.0.1:{port}/_stcore/health")
    assert not answers_ok(f"{admin_url}/admin/v2/clusters")


def _moves_and_probes(store: Path) -> bool:
    events = Store(store).read("events").to_pandas()
    moved = events[
        (events["kind"] == "bundle_owner_changed")
        & events["before"].notna()
        & events["after"].notna()
        & (events["before"] != events["after"])
    ]
    return len(moved) >= 1 and Store(store).read("probes").num_rows > 0


def test_demo_on_two_brokers_moves_bundles_and_probes_them(tmp_path: Path) -> None:
    port, store = free_port(), tmp_path / "store"
    with _demo(store, port, "--brokers", "2", "--unload-every", "4s") as proc:
        lines = _read_until(proc, "Local Pulsar admin API:", timeout=240)
        assert any("cluster of 2 brokers" in line for line in lines)
        admin_url = lines[-1].split(": ", 1)[1]
        brokers = requests.get(f"{admin_url}/admin/v2/brokers/local", timeout=10).json()
        assert len(brokers) == 2
        _wait(lambda: _moves_and_probes(store), what="a bundle moved, probed", timeout=150)
        assert _interrupt(proc, timeout=120) == 0
    assert not answers_ok(f"{admin_url}/admin/v2/clusters")
    for broker in brokers:
        assert not answers_ok(f"http://{broker}/admin/v2/clusters")


def _versions_and_owners(store: Path) -> tuple[set[str], set[str], set[str]]:
    """The newest poll's brokers, the versions they reported, the owners of its bundles."""
    brokers = Store(store).read_latest("brokers").to_pandas()
    owners = Store(store).read_latest("bundles").to_pandas()["owner_broker"].dropna()
    return set(brokers["broker_id"]), set(brokers["version"].dropna()), set(owners)


MODELLING = ("key-shared-map", "sticky-ranges", "failover-assignment")


def _analysis_models(store: Path) -> dict[str, str]:
    """What each analysis that models a broker line says it modelled, on the stored polls."""
    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.registry import discover

    registry = discover(entry_points=False, plugin_dirs=[])
    return {
        slug: runner.run(registry.get(slug), Store(store), use_cache=False).result.summary["model"]
        for slug in MODELLING
    }


def test_demo_on_a_3_0_cluster_answers_3_0_7_everywhere_and_models_3_0(tmp_path: Path) -> None:
    """`demo --pulsar 3.0 --brokers 2`: both brokers are 3.0.7 and say so to the admin API
    and to the collector, bundles are owned on both, and the analyses model 3.0."""
    port, store = free_port(), tmp_path / "store"
    options = ("--pulsar", "3.0", "--brokers", "2", "--unload-every", "4s")
    with _demo(store, port, *options) as proc:
        try:
            lines = _read_until(proc, "Local Pulsar admin API:", timeout=240)
            assert any("Pulsar 3.0.7 cluster of 2 brokers" in line for line in lines), lines
            admin_url = lines[-1].split(": ", 1)[1]
            brokers = set(requests.get(f"{admin_url}/admin/v2/brokers/local", timeout=10).json())
            assert len(brokers) == 2
            for broker in brokers:
                answer = requests.get(f"http://{broker}/admin/v2/brokers/version", timeout=10)
                assert answer.status_code == 200 and answer.text.strip('"') == "3.0.7"
            _wait(
                lambda: _versions_and_owners(store) == (brokers, {"3.0.7"}, brokers),
                what="a poll of both 3.0.7 brokers, each owning bundles",
                timeout=150,
            )
        finally:  # a fact that fails stops the demo too, and with it its cluster
            stopped = _interrupt(proc, timeout=120)
        assert stopped == 0
    for broker in brokers:
        assert not answers_ok(f"http://{broker}/admin/v2/clusters")
    model = "Pulsar 3.0 model (brokers: 3.0.7)"
    assert _analysis_models(store) == dict.fromkeys(MODELLING, model)
