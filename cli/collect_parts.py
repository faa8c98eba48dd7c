"""The parts of the collect command that one cluster and several share: where snapshots come
from, the heartbeat printer, the poll timing, the analyses of each new snapshot and SIGTERM."""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from pulsar_lens.core.settings import Settings, retention_problem

if TYPE_CHECKING:  # the loop (pandas), the analyses (altair, the plugins) load once a collect
    # runs: `collect --help` parses without them
    from pulsar_lens.collectors.heartbeat import Heartbeat
    from pulsar_lens.collectors.loop import CarryFn, DiffFn, PollFn, PollLoop
    from pulsar_lens.collectors.loop_group import LoopGroup
    from pulsar_lens.core.passes import PassProgress
    from pulsar_lens.core.store import Store
    from pulsar_lens.plugins.precompute import Outcome
    from pulsar_lens.plugins.results import ResultStore
    from pulsar_lens.plugins.spark.worker import WorkerProcess
    from pulsar_lens.plugins.splitpass import Splitter

# `serve` gives the collect process 10 s to stop: the job worker's Spark session gets half
JOBS_GRACE = 5.0


@dataclass(frozen=True, slots=True)
class Source:
    """Where snapshots come from: a poll function, its diff, and how to let go of it."""

    poll: PollFn
    diff: DiffFn | None = None
    carry: CarryFn | None = None
    close: Callable[[], None] = lambda: None


SourceFactory = Callable[..., Source]
"""`factory(admin_url, namespaces)`; with a settings file also `cluster=` and `settings=`."""


class HeartbeatPrinter:
    """Prints each heartbeat line to stdout and remembers the last one (of each cluster)."""

    def __init__(self) -> None:
        self.last: Heartbeat | None = None
        self.last_of: dict[str | None, Heartbeat] = {}

    def __call__(self, beat: Heartbeat) -> None:
        self.last = beat
        self.last_of[beat.cluster] = beat
        print(beat.line(), flush=True)


def poll_timing(
    args: argparse.Namespace, settings: Settings
) -> tuple[dt.timedelta, dt.timedelta] | None:
    """The poll interval and retention (flags over settings); None after saying what is wrong."""
    interval = args.interval or settings.poll_interval
    retention = args.retention or settings.retention
    broken = retention_problem(retention, interval)
    if broken is not None:
        named = "--retention" if args.retention else "PULSAR_LENS_RETENTION"
        print(f"pulsar-lens collect: {named} {broken}", file=sys.stderr)
        return None
    return interval, retention


def compute_per_cluster(
    store: Store,
    plugins: Sequence[Any],
    results: ResultStore,
    clusters: Sequence[str],
    *,
    stop: Callable[[], bool] = lambda: False,
    splitter: Splitter | None = None,
) -> dict[str, list[Outcome]]:
    """Every light plugin on each cluster's own newest snapshots, then prune the stored
    results (`prune_results`); the plugins not started once `stop()` is true are left out.
    Returns each cluster's outcomes (none for the clusters a stop left out)."""
    from pulsar_lens.core.clusterview import ClusterView
    from pulsar_lens.plugins.engines import engine_of
    from pulsar_lens.plugins.precompute import prune_results, requirements_first, run_pass

    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]
    outcomes: dict[str, list[Outcome]] = {}
    for cluster in clusters:
        # every plugin of this round on the same newest snapshot, though polls go on: else
        # at a short interval each plugin meets another poll and no snapshot gets them all
        view = ClusterView(store, cluster).pinned()
        outcomes[cluster] = run_pass(view, light, results, stop=stop, splitter=splitter)
        if len(outcomes[cluster]) < len(light):
            return outcomes  # stopped
    prune_results(store, light, results)  # over the whole store: every cluster's are live
    return outcomes


def loaded_plugins(settings: Settings, command: str) -> list[Any]:
    """The plugins of `settings` (folders and limits), each one that failed to load said on
    stderr as `pulsar-lens COMMAND: ...`."""
    from pulsar_lens.plugins.isolation import limits_of
    from pulsar_lens.plugins.registry import discover

    registry = discover(plugin_dirs=settings.plugin_dirs, limits=limits_of(settings))
    for failure in registry.failures:
        print(f"pulsar-lens {command}: {failure}", file=sys.stderr, flush=True)
    return list(registry)


class Analyses:
    """Runs every loaded light plugin on each new snapshot, off the polling thread, and stores
    it; the Spark plugins run as jobs in a job worker process (`plugins.spark.worker`), when
    `spark_jobs` and PULSAR_LENS_SPARK_JOBS is not 0. Given `clusters`, each cluster's
    snapshots are analysed on their own, by the light plugins and the jobs alike. Plugin
    folders and limits, the job worker's and its environment come from `settings`."""

    def __init__(
        self,
        store: Store,
        *,
        spark_jobs: bool = True,
        clusters: Sequence[str] = (),
        settings: Settings,
        then: Callable[[], object] | None = None,
        on_pass: Sequence[Callable[[PassProgress], object]] = (),
    ) -> None:
        """`then`: called once the stored results of a new snapshot are in (/metrics reads
        them then rather than analysing beside this). Before it, each of `on_pass` is handed
        the passes so far (`ResultsWorker.progress()`): the health file and /metrics say how
        long the last took and how many polls went unanalysed."""
        from pulsar_lens.plugins.engines import engine_of
        from pulsar_lens.plugins.precompute import ResultsWorker, compute_results
        from pulsar_lens.plugins.results import ResultStore
        from pulsar_lens.plugins.spark.worker import WorkerProcess
        from pulsar_lens.plugins.splitpass import Splitter

        results = ResultStore(store.root)
        plugins = loaded_plugins(settings, "collect")
        # a long pass goes on two cores (`plugins.splitpass`) unless the settings say not to
        splitter = Splitter() if settings.analyses_helper else None
        if splitter is not None:
            splitter.seed(results, [p for p in plugins if engine_of(p).per_poll])

        def after_pass() -> None:
            progress = self._worker.progress()
            for record in on_pass:
                record(progress)
            if then is not None:
                then()

        if clusters:
            self._worker = ResultsWorker(
                lambda stop: compute_per_cluster(
                    store, plugins, results, clusters, stop=stop, splitter=splitter
                ),
                then=after_pass,
            )
        else:
            self._worker = ResultsWorker(
                lambda stop: compute_results(
                    store, plugins, results=results, stop=stop, splitter=splitter
                ),
                then=after_pass,
            )
        self._jobs: WorkerProcess | None = None
        spark = [p.name for p in plugins if not engine_of(p).per_poll]
        if spark and spark_jobs and settings.spark.jobs:
            self._jobs = WorkerProcess(
                store.root,
                timeout=settings.spark.job_timeout,
                clusters=clusters,
                environ=settings.file_environ(),
            ).start()
            print(
                f"pulsar-lens collect: Spark analyses ({', '.join(spark)}) run as jobs in a "
                "job worker process",
                file=sys.stderr,
                flush=True,
            )

    def after(self, on_heartbeat: Callable[[Heartbeat], None]) -> Callable[[Heartbeat], None]:
        def both(beat: Heartbeat) -> None:
            on_heartbeat(beat)
            if beat.snapshot_id is not None:
                self._worker.submit(beat.cluster)

        return both

    def finish(self) -> None:
        self._worker.drain()

    def interrupt(self) -> None:
        """The process is stopping: start no further analysis (see `ResultsWorker.interrupt`)."""
        self._worker.interrupt()

    def close(self) -> None:
        """Stop the job worker and the results thread side by side, within JOBS_GRACE."""
        if self._jobs is not None:
            self._jobs.terminate()  # first: its Spark session takes seconds to stop
        self._worker.stop()
        if self._jobs is not None:
            self._jobs.close(grace=JOBS_GRACE)


@contextmanager
def stop_on_sigterm(loop: PollLoop | LoopGroup, analyses: Analyses | None = None) -> Iterator[None]:
    """Let `docker stop` (SIGTERM) end the loop between polls, like Ctrl-C, and the analyses
    of the newest snapshot before their next plugin: a stop signal sent to the whole process
    group has also ended the forkserver that a third-party plugin's worker would fork from."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        loop.stop()
        if analyses is not None:
            analyses.interrupt()

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
