"""The job worker stops on SIGTERM at once, abandoning the job under way, so that the collect
process that asked stops within its grace period however long a job would take."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pulsar_lens.core.store import Store
from pulsar_lens.plugins.spark.jobs import JobQueue
from pulsar_lens.plugins.spark.worker import WorkerProcess
from tests.core.snapshots import make_snapshot
from tests.lens_cli import RUN_SETTINGS

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SLUG = "takes-ten-minutes"
PLUGIN = """
import pathlib, time
from pulsar_lens.api import AnalysisPlugin, Result

class TakesTenMinutes(AnalysisPlugin):
    name = "{slug}"
    title = "Takes ten minutes"
    description = "a Spark analysis far longer than any grace period"
    version = "1"
    engine = "spark"
    inputs = ("topics",)
    outputs = ("x",)

    def analyze(self, data, params):
        pathlib.Path({marker!r}).write_text("started")
        for _ in range(600):  # bounded: ten minutes at most
            time.sleep(1)
        return Result(frames={{"x": data.latest("topics")}})

    def render(self, result):
        return []

PLUGINS = (TakesTenMinutes,)
"""


def test_sigterm_stops_the_worker_in_the_middle_of_a_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    plugins, marker = tmp_path / "plugins", tmp_path / "started"
    plugins.mkdir()
    (plugins / "slow.py").write_text(PLUGIN.format(slug=SLUG, marker=str(marker)))
    store = Store(tmp_path / "store")
    store.write(make_snapshot())
    for key in [k for k in os.environ if k.startswith("PULSAR_") and k not in RUN_SETTINGS]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(plugins))
    monkeypatch.setenv("PULSAR_LENS_SPARK_EVERY", "1h")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    queue = JobQueue(store.root)
    job = queue.request(SLUG, {})  # before any scheduled run: the worker takes it first
    process = WorkerProcess(store.root, timeout=1800.0).start()
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert time.monotonic() < deadline, "the job's analysis did not start in 4 minutes"
            assert process.process is not None and process.process.poll() is None
            time.sleep(0.5)
        process.close(grace=60.0)
    finally:
        process.close(grace=1.0)
    assert process.process is not None
    assert process.process.returncode == 0  # it stopped by itself, nothing had to kill it
    ended = queue.status(job.id)
    assert ended is not None and ended.state == "failed"
    assert "stopped before the job ended" in (ended.error or "")
    said = capfd.readouterr().err
    assert "Traceback" not in said, said[-3000:]  # the stop is said once, in the worker's words
    assert "stopped; a job under way is abandoned" in said, said[-3000:]


def test_the_stop_filter_drops_what_the_interrupt_breaks_in_py4j() -> None:
    """py4j logs the interrupt itself on the root logger and, when it then shuts the socket
    down, the BrokenPipeError that follows on its own logger: neither passes a handler's
    filters. The records go to the handler directly, whatever levels earlier tests left."""
    import io
    import logging
    import sys

    from pulsar_lens.core.secrets import RedactingFilter
    from pulsar_lens.plugins.spark.worker import quiet_stop

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter())  # as setup_logging leaves every handler
    quiet_stop([handler])

    def emit(logger: str, msg: str) -> None:
        record = logging.LogRecord(logger, logging.ERROR, __file__, 0, msg, None, sys.exc_info())
        handler.handle(record)

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            emit("root", "Exception while sending command.")
            raise BrokenPipeError(32, "Broken pipe") from None
    except BrokenPipeError:
        # `from None` hides the context from the printout, not from __context__
        emit("py4j.clientserver", "while shutting down connection")
    try:
        raise ValueError("a real failure")
    except ValueError:
        emit("py4j.clientserver", "kept")
    said = out.getvalue()
    assert "Exception while sending command" not in said
    assert "shutting down" not in said
    assert "kept" in said and "a real failure" in said
