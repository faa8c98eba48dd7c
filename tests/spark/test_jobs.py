"""Spark analyses as jobs: the queue, the worker's schedule and requests, Spark's progress,
the worker process the collect process runs (restart, time limit), and the CLI."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pulsar_lens.core.errors import PluginRunError, ResultNotReady
from pulsar_lens.core.model import DrainingHashRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from pulsar_lens.plugins.spark.jobs import JobQueue, JobStatus, now
from pulsar_lens.plugins.spark.worker import JobWorker, WorkerProcess
from pulsar_lens.plugins.testing import make_snapshot
from tests.lens_cli import clean_environ

pytestmark = pytest.mark.spark

SLUG = "stuck-hash-history"
T = "persistent://public/default/orders"
HELD = DrainingHashRecord(T, "ks", "c1", 2862, 3, 7)
REPO = Path(__file__).resolve().parents[2]
JOB_CEILING = 600.0  # a Spark job of a fresh session: over 180 s seen on a loaded 2-core machine


def _store(root: Path, polls: list[list[DrainingHashRecord]]) -> Store:
    store = Store(root)
    for i, rows in enumerate(polls):
        store.write(make_snapshot(30.0 * i, draining_hashes=rows))
    return store


def _worker(store: Store, **kwargs: float) -> JobWorker:
    plugins = [p for p in discover(entry_points=False, plugin_dirs=[]) if p.name == SLUG]
    return JobWorker(store, store.root, plugins, **kwargs)


def _defaults() -> dict[str, object]:
    loaded = discover(entry_points=False, plugin_dirs=[]).get(SLUG)
    return runner.validate_params(loaded.plugin, None).model_dump(mode="json")


def test_the_queue_keeps_order_dedupes_and_forgets_ended_requests(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path)
    first = queue.request("a", {"top": 5})
    second = queue.request("b", {})
    assert queue.request("a", {"top": 5}) == first  # the same work waits once
    assert [j.id for j in queue.pending()] == [first.id, second.id]
    queue.update(dataclasses.replace(first, state="done", finished_at=now().isoformat()))
    assert [j.id for j in queue.pending()] == [second.id]
    assert queue.latest("a", {"top": 5}).state == "done"  # type: ignore[union-attr]
    assert queue.latest("a", {"top": 6}) is None
    assert not queue.worker_running()
    with queue.worker_lock():
        assert queue.worker_running()
        with pytest.raises(RuntimeError, match="another job worker"), queue.worker_lock():
            pass
    assert not queue.worker_running()


def test_a_damaged_status_file_is_skipped(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path)
    job = queue.request("a", {})
    (queue.statuses / f"{job.id}.json").write_text("{not json")
    (queue.requests / f"{job.id}.json").write_text("[]")
    assert queue.pending() == [] and queue.latest("a") is None


def test_the_worker_runs_each_spark_plugin_after_a_new_poll_and_stores_it(
    spark: object, tmp_path: Path
) -> None:
    store = _store(tmp_path, [[HELD], [HELD], [], [HELD]])
    worker = _worker(store, every=0.0)
    with pytest.raises(ResultNotReady):
        runner.run(worker.plugins[SLUG], store)
    job = worker.step()
    assert job is not None and job.state == "done", job
    assert job.origin == "schedule" and job.polls == 4
    assert job.stages_total >= 1 and job.tasks_done == job.tasks_total > 0
    output = runner.run(worker.plugins[SLUG], store)  # what the page and /metrics read
    assert output.stored and output.result.summary == {"episodes": 2, "open": 1}
    assert worker.step() is None  # nothing new: no job
    store.write(make_snapshot(120.0, draining_hashes=[HELD]))
    again = worker.step()
    assert again is not None and again.state == "done" and again.polls == 5
    assert runner.run(worker.plugins[SLUG], store).result.summary == {"episodes": 2, "open": 1}


def test_the_schedule_waits_its_interval_and_requests_come_first(
    spark: object, tmp_path: Path
) -> None:
    store = _store(tmp_path, [[HELD]])
    worker = _worker(store, every=3600.0)
    assert worker.step() is not None  # the first round is due at once
    store.write(make_snapshot(30.0, draining_hashes=[HELD]))
    assert worker.step() is None  # a new poll, but within the hour
    asked = JobQueue(store.root).request(SLUG, _defaults())
    ran = worker.step()
    assert ran is not None and ran.id == asked.id and ran.state == "done"
    assert ran.polls == 2


def test_a_job_for_an_unknown_plugin_or_a_failing_run_ends_failed(
    spark: object, tmp_path: Path
) -> None:
    store = _store(tmp_path, [[HELD]])
    worker = _worker(store, every=3600.0)
    queue = JobQueue(store.root)
    queue.request("nope", {})
    failed = worker.step()
    assert failed is not None and failed.state == "failed"
    assert "no Spark plugin 'nope' is loaded here" in (failed.error or "")
    # A store whose draining_hashes files are garbage: the job fails, the worker goes on.
    for path in (store.root / "draining_hashes").rglob("*.parquet"):
        path.write_bytes(b"garbage")
    queue.request(SLUG, _defaults())
    broken = worker.step()
    assert broken is not None and broken.state == "failed" and broken.error
    with pytest.raises(Exception, match="failed"):
        runner.run(worker.plugins[SLUG], store)  # the stored failure is what the page shows


SPARK_CRASH = """
from pulsar_lens.api import AnalysisPlugin, BaseModel, Metric, Result


class SparkZero(AnalysisPlugin):
    name = "spark-zero"
    title = "Spark zero"
    description = "Divides the rows it counted by zero."
    version = "1"
    engine = "spark"
    inputs = ("draining_hashes",)
    outputs = ("x",)

    class Params(BaseModel):
        pass

    def analyze(self, data, params):
        share = data.history("draining_hashes").count() / 0
        return Result(frames={"x": data.snapshots.assign(share=share)})

    def render(self, result):
        return [Metric("rows", len(result.frames["x"]))]


PLUGINS = (SparkZero,)
"""


def test_a_spark_plugins_crash_is_stored_with_its_file_line_and_traceback(
    spark: object, tmp_path: Path
) -> None:
    """The job worker runs the author's analyze; what it raised is stored with the file and
    line of the author's code and the traceback, which the page and `analyze -v` show."""
    plugin = tmp_path / "plugins" / "spark_zero.py"
    plugin.parent.mkdir()
    plugin.write_text(SPARK_CRASH)
    line = (
        SPARK_CRASH.splitlines().index(
            '        share = data.history("draining_hashes").count() / 0'
        )
        + 1
    )
    loaded = discover(entry_points=False, plugin_dirs=[plugin.parent]).get("spark-zero")
    store = _store(tmp_path / "store", [[HELD]])
    JobQueue(store.root).request("spark-zero", {})
    ended = JobWorker(store, store.root, [loaded], every=3600.0).step()
    assert ended is not None and ended.state == "failed"
    assert f"ZeroDivisionError: division by zero (at {plugin}:{line})" in (ended.error or "")
    with pytest.raises(PluginRunError) as info:
        runner.run(loaded, store)  # the stored failure, as the page reads it
    origin = info.value.origin
    assert info.value.phase == "analyze"
    assert origin is not None and origin.where == f"{plugin}:{line}"
    assert f'File "{plugin}", line {line}, in analyze' in origin.traceback
    assert origin.traceback.rstrip().endswith("ZeroDivisionError: division by zero")


def test_results_of_a_spark_plugin_are_bounded(spark: object, tmp_path: Path) -> None:
    store = _store(tmp_path, [[HELD]])
    worker = _worker(store, every=0.0)
    for i in range(5):
        store.write(make_snapshot(30.0 * (i + 1), draining_hashes=[HELD]))
        assert worker.step() is not None
    entries = list(ResultStore(store.root).entries(SLUG))
    assert len(entries) == 3


def _child_env(**extra: str) -> dict[str, str]:
    env = clean_environ()
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


@pytest.mark.timeout(900)
def test_the_worker_process_serves_a_request_and_is_restarted_when_it_dies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, [[HELD], [HELD]])
    for key, value in _child_env(PULSAR_LENS_SPARK_EVERY="1h").items():
        monkeypatch.setenv(key, value)
    process = WorkerProcess(store.root, timeout=JOB_CEILING).start()
    try:
        queue = JobQueue(store.root)
        job = _wait(lambda: _ended(queue, SLUG), JOB_CEILING, "the scheduled job to end")
        assert job.state == "done", job
        assert queue.worker_running()
        first = process.process
        assert first is not None
        os.killpg(first.pid, 9)
        _wait(lambda: process.restarts == 1 or None, 30.0, "the worker to be restarted")
        _wait(lambda: queue.worker_running() or None, 30.0, "the new worker to take the lock")
    finally:
        process.close()
    assert not JobQueue(store.root).worker_running()


def test_a_job_past_its_time_limit_is_stopped_and_marked_failed(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path)
    job = queue.request(SLUG, {})
    started = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)).isoformat()
    queue.update(dataclasses.replace(job, state="running", started_at=started))
    hang = [sys.executable, "-c", "import time; time.sleep(120)"]
    process = WorkerProcess(tmp_path, timeout=5.0, argv=hang).start()
    try:
        ended = _wait(lambda: _ended(queue, SLUG), 20.0, "the overrun job to be stopped")
        assert ended.state == "failed" and "longer than 5s" in (ended.error or "")
        _wait(lambda: process.restarts >= 1 or None, 20.0, "the worker to be restarted")
    finally:
        process.close()


@pytest.mark.timeout(900)
def test_analyze_runs_a_spark_job_with_progress_and_stores_it(tmp_path: Path) -> None:
    store = _store(tmp_path, [[HELD], [], [HELD]])
    lens = str(Path(sys.executable).parent / "pulsar-lens")
    cli = [lens, "analyze", SLUG, "--store", str(store.root)]
    wrong = subprocess.run(
        [*cli, "--engine", "light"], capture_output=True, text=True, env=_child_env(), timeout=60
    )
    assert wrong.returncode == 2 and "runs on the spark engine, not light" in wrong.stderr
    done = subprocess.run(
        [*cli, "--engine", "spark"],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=JOB_CEILING,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "100%  done in" in done.stderr and "episodes: 2" in done.stdout
    assert JobQueue(store.root).latest(SLUG).origin == "cli"  # type: ignore[union-attr]
    stored = subprocess.run(
        [*cli, "--stored", "--json"], capture_output=True, text=True, env=_child_env(), timeout=60
    )
    assert stored.returncode == 0 and '"episodes": 2' in stored.stdout
    assert "starting Spark" not in stored.stderr


def test_analyze_never_shows_a_spark_connect_token(tmp_path: Path) -> None:
    """A Spark Connect master carries its token in its path (`;token=`): `analyze` names the
    master it starts and says why it failed (nothing listens there) without showing it."""
    import socket

    store = _store(tmp_path, [[HELD]])
    lens = str(Path(sys.executable).parent / "pulsar-lens")
    token = "connect-token-4f2a9c"
    with socket.socket() as held:  # a port nothing listens at once it is closed
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    master = f"sc://127.0.0.1:{port}/;token={token};use_ssl=false"
    done = subprocess.run(
        [lens, "analyze", SLUG, "--engine", "spark", "--store", str(store.root)],
        capture_output=True,
        text=True,
        env=_child_env(PULSAR_LENS_SPARK_MASTER=master),
        timeout=JOB_CEILING,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"starting Spark (sc://127.0.0.1:{port}/;token=***;use_ssl=false)" in done.stderr
    assert "cannot be reached" in done.stderr
    assert f"{SLUG} failed" in done.stderr
    assert token not in done.stderr + done.stdout
    failed = JobQueue(store.root).latest(SLUG)
    assert failed is not None and failed.state == "failed" and token not in str(failed.error)


def test_a_jobs_error_is_stored_without_a_known_secret(tmp_path: Path) -> None:
    from pulsar_lens.core.secrets import register

    register("engine-tok-6604")
    queue = JobQueue(tmp_path)
    job = queue.new(SLUG, {}, origin="cli")
    queue.update(
        dataclasses.replace(job, state="failed", error="no server at sc://h/;token=engine-tok-6604")
    )
    stored = queue.status(job.id)
    assert stored is not None and stored.error == "no server at sc://h/;token=***"
    assert "engine-tok-6604" not in "".join(p.read_text() for p in tmp_path.rglob("*.json"))


def _ended(queue: JobQueue, plugin: str) -> JobStatus | None:
    job = queue.latest(plugin)
    return job if job is not None and job.ended else None


def _wait(check: object, seconds: float, what: str) -> JobStatus:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()  # type: ignore[operator]
        if found:
            return found  # type: ignore[no-any-return]
        time.sleep(0.5)
    raise AssertionError(f"waited {seconds:.0f}s for {what}")


def test_the_worker_runs_each_clusters_jobs_on_its_own_snapshots(
    spark: object, tmp_path: Path
) -> None:
    from pulsar_lens.core.clusterview import ClusterView

    store = Store(tmp_path)
    for i, rows in enumerate([[HELD], [HELD], [], [HELD]]):  # west never holds one
        store.write(make_snapshot(30.0 * i, cluster="east", draining_hashes=rows))
        store.write(make_snapshot(30.0 * i + 1, cluster="west"))
    plugins = [p for p in discover(entry_points=False, plugin_dirs=[]) if p.name == SLUG]
    worker = JobWorker(store, store.root, plugins, every=0.0, clusters=["east", "west"])
    ran = [worker.step(), worker.step()]
    assert {(j.cluster, j.state, j.polls) for j in ran if j} == {
        ("east", "done", 4),
        ("west", "done", 4),
    }
    assert worker.step() is None  # both clusters are up to date
    east = runner.run(worker.plugins[SLUG], ClusterView(store, "east")).result.summary
    west = runner.run(worker.plugins[SLUG], ClusterView(store, "west")).result.summary
    assert (east, west) == ({"episodes": 2, "open": 1}, {"episodes": 0, "open": 0})
    for i in range(4, 9):  # east's runs are bounded without pushing out west's
        store.write(make_snapshot(30.0 * i, cluster="east", draining_hashes=[HELD]))
        assert worker.step() is not None
    assert runner.run(worker.plugins[SLUG], ClusterView(store, "west")).stored


def test_the_queue_tells_the_same_work_on_two_clusters_apart(tmp_path: Path) -> None:
    queue = JobQueue(tmp_path)
    east = queue.request(SLUG, {}, cluster="east")
    west = queue.request(SLUG, {}, cluster="west")
    assert east.id != west.id and queue.request(SLUG, {}, cluster="east") == east
    assert queue.latest(SLUG, {}, cluster="west") == west and queue.latest(SLUG, {}) is None
    argv = WorkerProcess(tmp_path, clusters=["east", "west"]).argv
    assert argv[-4:] == ["--cluster", "east", "--cluster", "west"]
