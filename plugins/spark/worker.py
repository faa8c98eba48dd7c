"""The job worker: runs Spark analyses as jobs for one store, in a process of its own.

`python -m pulsar_lens.plugins.spark.worker --store ROOT` holds the store's job lock, keeps one
Spark session (started on its first job, so a worker that never gets one starts no JVM), and
loops: the oldest requested job first (`plugins.spark.jobs.JobQueue`); otherwise, once a new
poll has landed and at least `every` has passed since the last scheduled round, a job per
Spark plugin with its default params. Each job's result (or failure) is stored like any
analysis (`plugins.precompute.store_run`); the newest KEEP_RESULTS per plugin and params are
kept. Progress (stages and tasks) goes to the job's status file as Spark reports it.

With `--cluster` names (a store several clusters share), each job reads one cluster's
snapshots, and the schedule queues each Spark plugin for each cluster.

`WorkerProcess` (`plugins.spark.workerprocess`, importable from here too) is how the collect
process runs the worker: a child process, restarted with a backoff when it dies, and killed
(with its JVM) when one job runs past its time limit.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from functools import partial
from types import FrameType
from typing import Any, cast

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.logs import setup_logging
from pulsar_lens.core.parts import DEFAULT_SPARK_EVERY as DEFAULT_EVERY
from pulsar_lens.core.parts import DEFAULT_SPARK_JOB_TIMEOUT as DEFAULT_TIMEOUT
from pulsar_lens.core.parts import SPARK_EVERY_ENV as EVERY_ENV
from pulsar_lens.core.parts import SPARK_JOB_TIMEOUT_ENV as TIMEOUT_ENV
from pulsar_lens.core.parts import SPARK_JOBS_ENV as JOBS_ENV
from pulsar_lens.core.parts import use_charset_setting
from pulsar_lens.core.settings import Settings
from pulsar_lens.plugins import isolation, precompute, runner
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import LoadedPlugin, discover
from pulsar_lens.plugins.results import ResultStore
from pulsar_lens.plugins.spark import progress, session
from pulsar_lens.plugins.spark.jobs import JobQueue, JobStatus, now
from pulsar_lens.plugins.spark.workerprocess import WorkerProcess

__all__ = [
    "DEFAULT_EVERY",
    "DEFAULT_TIMEOUT",
    "EVERY_ENV",
    "JOBS_ENV",
    "KEEP_RESULTS",
    "TIMEOUT_ENV",
    "JobWorker",
    "WorkerProcess",
    "cluster_store",
    "main",
    "run_job",
]

log = logging.getLogger(__name__)

KEEP_RESULTS = 3


def run_job(
    loaded: LoadedPlugin,
    store: runner.SnapshotStore,
    queue: JobQueue,
    job: JobStatus,
    *,
    results: ResultStore,
    on_update: Any = None,
    log_failure: bool = True,
) -> JobStatus:
    """Run `job` on this process's Spark session, store its result, and keep its status file
    up to date; the ended status. `on_update(status)` is called on each progress change;
    `log_failure=False` leaves saying a failed analysis to the caller."""
    job = queue.update(dataclasses.replace(job, state="running", started_at=now().isoformat()))
    current = [job]

    def report(counts: progress.Counts) -> None:
        latest = dataclasses.replace(current[0], **dataclasses.asdict(counts))
        if latest != current[0]:
            current[0] = queue.update(latest)
            if on_update is not None:
                on_update(current[0])

    try:
        spark = session.get()
        with progress.tracked(spark, job.id, report):
            outcome = precompute.store_run(
                store, loaded, results, job.params, log_failure=log_failure
            )
    except Exception as exc:  # the session could not start, or the store could not be read
        outcome = precompute.Outcome(loaded.name, "failed", job.seconds(), f"{exc}")
    ended = dataclasses.replace(
        current[0],
        state="failed" if outcome.status == "failed" else "done",
        finished_at=now().isoformat(),
        error=outcome.error,
        polls=len(runner.snapshot_window(loaded.plugin, store)),
    )
    among = None if job.cluster is None else [str(s) for s in store.snapshots()["snapshot_id"]]
    results.keep_newest(loaded.name, KEEP_RESULTS, among=among)
    queue.update(ended)
    if on_update is not None:
        on_update(ended)
    return ended


def cluster_store(store: runner.SnapshotStore, cluster: str | None) -> runner.SnapshotStore:
    """`store`, or the part of it that holds `cluster`'s snapshots."""
    if cluster is None:
        return store
    from pulsar_lens.core.clusterview import ClusterView
    from pulsar_lens.core.store import Store

    return ClusterView(cast(Store, store), cluster)


class JobWorker:
    """Runs the requested jobs of one store, and its Spark plugins after new polls: given
    `clusters` (a store several clusters share), each cluster's jobs on its own snapshots."""

    def __init__(
        self,
        store: runner.SnapshotStore,
        root: str | os.PathLike[str],
        plugins: Sequence[LoadedPlugin],
        *,
        every: float = DEFAULT_EVERY,
        clusters: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.queue = JobQueue(root)
        self.results = ResultStore(root)
        self.plugins = {p.name: p for p in plugins if not engine_of(p).per_poll}
        self.every = every
        self.clusters: tuple[str | None, ...] = tuple(clusters) or (None,)
        # per cluster: the newest snapshot of its last scheduled round, and when that was
        self._scheduled: dict[str | None, tuple[str, float]] = {}

    def step(self) -> JobStatus | None:
        """Run one job if one is due; the job, or None when there was nothing to do."""
        pending = self.queue.pending()
        if not pending:
            self._schedule()
            pending = self.queue.pending()
        if not pending:
            return None
        job = pending[0]
        loaded = self.plugins.get(job.plugin)
        if loaded is None:
            known = ", ".join(sorted(self.plugins)) or "none"
            return self.queue.update(
                dataclasses.replace(
                    job,
                    state="failed",
                    finished_at=now().isoformat(),
                    error=f"no Spark plugin {job.plugin!r} is loaded here (loaded: {known})",
                )
            )
        log.info("job %s: %s %s", job.id, job.plugin, dict(job.params) or "(default params)")
        store = cluster_store(self.store, job.cluster)
        ended = run_job(loaded, store, self.queue, job, results=self.results)
        log.info(
            "job %s %s in %.1fs%s",
            job.id,
            ended.state,
            ended.seconds(),
            f": {ended.error}" if ended.error else "",
        )
        self.queue.prune()
        return ended

    def _schedule(self) -> None:
        """After a new poll, and at most once per `every`, queue each Spark plugin's default
        run whose result for the newest polls is not stored yet (for each cluster)."""
        for cluster in self.clusters:
            self._schedule_on(cluster)

    def _schedule_on(self, cluster: str | None) -> None:
        store = cluster_store(self.store, cluster)
        newest = store.snapshots(limit=1)
        if not len(newest):
            return
        snapshot = str(newest["snapshot_id"].iloc[-1])
        last_for, last_at = self._scheduled.get(cluster, (None, float("-inf")))
        if snapshot == last_for or time.monotonic() - last_at < self.every:
            return
        self._scheduled[cluster] = (snapshot, time.monotonic())
        for loaded in self.plugins.values():
            params = runner.validate_params(loaded.plugin, None).model_dump(mode="json")
            window = runner.snapshot_window(loaded.plugin, store)
            ids = [str(s) for s in window["snapshot_id"]]
            if self.results.read(loaded.name, loaded.version, params, ids) is None:
                self.queue.request(loaded.name, params, origin="schedule", cluster=cluster)

    def run(self, stop: threading.Event, *, tick: float = 1.0) -> None:
        """Serve the store until `stop` is set (holding its job lock all along)."""
        with self.queue.worker_lock():
            self.queue.abandon_running("the job worker stopped before the job ended")
            while not stop.is_set():
                try:
                    ran = self.step()
                except Exception:  # one broken job or store read must not end the worker
                    log.exception("the job worker's step failed")
                    ran = None
                if ran is None:
                    stop.wait(tick)


def _stop_when_orphaned(
    stop: threading.Event, parent: int, every: float = 2.0, grace: float = 20.0
) -> None:
    """Stops the worker, and its Spark JVM, once the process that started it is gone.

    The worker runs in a session of its own (so a signal meant for the collector's group does
    not cut a job short); a collector killed outright would otherwise leave it running.
    """
    while True:
        if os.getppid() != parent:
            log.warning("the collect process (pid %d) is gone; the job worker stops", parent)
            stop.set()
            if not _wait_main_thread(grace):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(os.getpgid(0), signal.SIGKILL)
            return
        if stop.wait(every):
            return


def _wait_main_thread(timeout: float) -> bool:
    main_thread = threading.main_thread()
    main_thread.join(timeout)
    return not main_thread.is_alive()


class _QuietStop(logging.Filter):
    """Drops py4j's records of the KeyboardInterrupt a stop raises inside a call to the JVM,
    and of what that interrupt then breaks (the socket py4j shuts down after it): they come
    with tracebacks, and the stop is already the worker's to say (the abandoned job's status
    names it). Set on the handlers, since a logger's own filter misses propagated records."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        seen = 0
        while exc is not None and seen < 10:
            if isinstance(exc, KeyboardInterrupt):
                return False
            exc, seen = exc.__cause__ or exc.__context__, seen + 1
        return True


def quiet_stop(handlers: Iterable[logging.Handler]) -> None:
    """Put `_QuietStop` first on each handler: the redacting filter that `setup_logging`
    attached formats the traceback into text and drops the exception it would look at."""
    for handler in handlers:
        if not any(isinstance(f, _QuietStop) for f in handler.filters):
            handler.filters.insert(0, _QuietStop())


def _interrupt(stop: threading.Event, signum: int, frame: FrameType | None) -> None:
    """SIGTERM: stop now, abandoning the job under way as Ctrl-C does. A job may run for
    minutes, and the collect process that asks has a grace period of seconds; Spark cancels
    the job when the session stops. A second SIGTERM leaves that cleanup be."""
    if not stop.is_set():
        stop.set()
        raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    from pulsar_lens.core.store import Store

    parser = argparse.ArgumentParser(prog="python -m pulsar_lens.plugins.spark.worker")
    parser.add_argument("--store", required=True, help="the snapshot store to serve")
    parser.add_argument(
        "--parent", type=int, default=os.getppid(), help="stop when this process is gone"
    )
    parser.add_argument(
        "--cluster",
        action="append",
        dest="clusters",
        default=[],
        help="run the scheduled jobs on this cluster's snapshots (repeatable; default: the "
        "whole store)",
    )
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()  # what the collect process handed over, in the environment
        setup_logging(settings.logs)  # lines read `time level plugins.spark.worker: message`
        every = settings.spark.every or DEFAULT_EVERY
        limits = isolation.limits_of(settings)
    except SettingsError as exc:
        print(f"pulsar-lens job worker: {exc}", file=sys.stderr)
        return 2
    use_charset_setting(settings.jvm_charset)
    session.configure(settings.spark)
    registry = discover(plugin_dirs=settings.plugin_dirs, limits=limits)
    for failure in registry.failures:
        log.warning("%s", failure)
    stop = threading.Event()
    worker = JobWorker(
        Store(args.store), args.store, list(registry), every=every, clusters=args.clusters
    )
    if not worker.plugins:
        log.info("no Spark plugin is loaded: the job worker has nothing to run")
    threading.Thread(
        target=_stop_when_orphaned, args=(stop, args.parent), name="parent", daemon=True
    ).start()
    quiet_stop(logging.getLogger().handlers)
    signal.signal(signal.SIGTERM, partial(_interrupt, stop))
    try:
        worker.run(stop)
    except RuntimeError as exc:  # another worker serves this store
        print(f"pulsar-lens job worker: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        log.info("stopped; a job under way is abandoned and marked failed")
        worker.queue.abandon_running("the job worker was stopped before the job ended")
    finally:
        if session.started() is not None:
            try:
                session.stop()
            except Exception as exc:  # the JVM went first (e.g. the group was killed)
                log.info("the Spark session had already ended: %s", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
