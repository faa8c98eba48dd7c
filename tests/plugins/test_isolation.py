"""Third-party plugins that hang, exit, eat memory or hang at import are reported as their own
failure; built-ins and everything else go on."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pulsar_lens.core.errors import PluginRunError
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import isolation, runner
from pulsar_lens.plugins.registry import Registry, discover
from tests.fake_admin import FakeAdmin
from tests.lens_cli import run_lens
from tests.plugins.test_results import store_with_polls

TEMPLATE = """
import os, time
from pulsar_lens.api import AnalysisPlugin, Metric, Result

class Bad(AnalysisPlugin):
    name = "{slug}"
    title = "{slug}"
    description = "misbehaves"
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    def analyze(self, data, params):
        {body}
        return Result(frames={{"x": data.latest("topics")[["topic"]]}})

    def render(self, result):
        return [Metric("rows", len(result.frames["x"]))]

PLUGINS = (Bad,)
"""

HANG_BOUND = 300  # seconds: far under the hour a plugin hangs, far over a busy machine's slowness

BEHAVIOURS = {
    "hangs": "time.sleep(3600)",
    "exits": "os._exit(3)",
    "hogs": "block = bytearray(1_500_000_000); block[::4096] = b'x' * len(block[::4096])",
    "works": "pass",
}


def discover_from_settings() -> Registry:
    """The plugins of the settings the variables describe: their folders, under their limits."""
    settings = Settings.from_env()
    return discover(plugin_dirs=settings.plugin_dirs, limits=settings.plugin_limits)


@pytest.fixture
def bad_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    for slug, body in BEHAVIOURS.items():
        (folder / f"{slug}.py").write_text(textwrap.dedent(TEMPLATE.format(slug=slug, body=body)))
    (folder / "import_hangs.py").write_text("import time\ntime.sleep(3600)\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text(TEMPLATE.format(slug="linked", body="pass"))
    (folder / "linked.py").symlink_to(outside)
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_TIMEOUT", "3s")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_IMPORT_TIMEOUT", "3s")
    return folder


def test_bad_imports_and_links_are_load_failures_and_builtins_load(bad_plugins: Path) -> None:
    started = time.monotonic()
    registry = discover_from_settings()
    assert time.monotonic() - started < HANG_BOUND  # the hanging import was not waited for
    failed = {Path(f.source).name: f.message for f in registry.failures}
    assert "timed out after 3 s" in failed["import_hangs.py"]
    assert "outside the plugin folder; refused" in failed["linked.py"]
    assert {"hangs", "exits", "hogs", "works", "subscription-status"} <= set(registry.plugins)


@pytest.mark.parametrize(
    ("slug", "expected"),
    [
        ("hangs", "analyze timed out after 3 s; it was stopped"),
        ("exits", "analyze ended its worker process (exit code 3)"),
        ("hogs", "analyze exceeded its memory limit of 1024 MiB"),
    ],
)
def test_a_misbehaving_analysis_is_that_plugins_failure(
    bad_plugins: Path, tmp_path: Path, slug: str, expected: str
) -> None:
    store = store_with_polls(tmp_path / "store")
    registry = discover_from_settings()
    started = time.monotonic()
    with pytest.raises(PluginRunError, match=re.escape(expected)):
        runner.run(registry.get(slug), store, use_cache=False, use_stored=False)
    assert time.monotonic() - started < HANG_BOUND  # its worker was stopped, not waited for
    works = runner.run(registry.get("works"), store, use_cache=False, use_stored=False)
    assert works.result.frames["x"]["topic"].tolist()  # and the next plugin runs fine


def test_collect_and_analyze_go_on_past_misbehaving_plugins(
    bad_plugins: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = {
        "PULSAR_LENS_PLUGIN_DIRS": str(bad_plugins),
        "PULSAR_LENS_PLUGIN_TIMEOUT": "3s",
        "PULSAR_LENS_PLUGIN_IMPORT_TIMEOUT": "3s",
    }
    with FakeAdmin() as fake:
        argv = ("collect", "--once", "--store", str(store))
        done = run_lens(*argv, env={**env, "PULSAR_ADMIN_URL": fake.url}, timeout=180)
    assert done.returncode == 0, done.stderr  # analysed after the poll: each failure reported
    assert "analysis hangs failed" in done.stderr and "analysis exits failed" in done.stderr
    done = run_lens("analyze", "exits", "--store", str(store), env=env, timeout=120)
    assert done.returncode != 0
    assert "analyze ended its worker process (exit code 3)" in done.stderr
    done = run_lens("analyze", "subscription-status", "--store", str(store), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plugin"] == "subscription-status"
    assert Store(store).latest_snapshot_id() is not None


def test_a_worker_that_cannot_start_is_reported_without_a_traceback(
    bad_plugins: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stop signal sent to the whole process group ends the forkserver too; an analysis
    started after that cannot fork its worker. That is reported as the call's failure, with
    the reason, and never logged as the plugin's crash."""
    store = store_with_polls(tmp_path / "store")
    registry = discover_from_settings()

    def refused(worker: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(isolation, "start_process", refused)
    with pytest.raises(PluginRunError, match="could not start its worker process: Conn"):
        runner.run(registry.get("works"), store, use_cache=False, use_stored=False)
    assert "Traceback" not in caplog.text and not caplog.records


def test_a_forkserver_that_dies_while_a_worker_starts_is_reported_without_a_traceback(
    bad_plugins: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The race a stop signal to the process group can make: the forkserver took the request
    for a worker, then died before it answered with the worker's pid (multiprocessing raises
    EOFError there, not an OSError). Made here for real: the forkserver is stopped, a worker is
    asked of it (the request waits in its socket), and it is killed once the asking thread
    waits for the answer."""
    from multiprocessing import forkserver

    store = store_with_polls(tmp_path / "store")
    registry = discover_from_settings()
    isolation.warm()
    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            runner.run(registry.get("works"), store, use_cache=False, use_stored=False)
        except BaseException as exc:
            raised.append(exc)

    asking = threading.Thread(target=run)
    try:
        asking.start()
        deadline = time.monotonic() + 120
        while not _waits_in(asking, "read_signed"):
            assert asking.is_alive() and time.monotonic() < deadline, raised
            time.sleep(0.05)
    finally:
        os.kill(pid, signal.SIGKILL)
    asking.join(120)
    assert not asking.is_alive()
    [error] = raised
    assert isinstance(error, PluginRunError), error
    assert "could not start its worker process: EOFError" in str(error)
    assert "Traceback" not in caplog.text and not caplog.records


def _waits_in(thread: threading.Thread, function: str) -> bool:
    """Whether `function` is on `thread`'s stack now."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False
