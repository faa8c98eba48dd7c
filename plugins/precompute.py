"""Analyse each new snapshot once: every loaded plugin, default parameters, results stored.

The collect process calls `compute_results` after a snapshot is written (`ResultsWorker`
does it off the polling thread, newest snapshot first, so a slow analysis never delays a
poll). The dashboard, `/metrics` and `pulsar-lens analyze` then read the stored results
through `pulsar_lens.plugins.runner.run`.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.errors import PluginError
from pulsar_lens.core.passes import PassProgress
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.sharedreads import SharedReads, planned_reads
from pulsar_lens.plugins.splitpass import Splitter, run_split
from pulsar_lens.plugins.steps import prune_steps

log = logging.getLogger(__name__)
KEEP_LIGHT_RESULTS = 60  # stored results of each light plugin, per version and parameters


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one plugin for one snapshot."""

    plugin: str
    status: str  # "ok", "failed", "kept" (already stored), "empty" (no snapshot yet)
    seconds: float = 0.0
    error: str | None = None


def compute_results(
    store: runner.SnapshotStore,
    plugins: Sequence[AnalysisPlugin | LoadedPlugin],
    *,
    results: ResultStore,
    stop: Callable[[], bool] = lambda: False,
    splitter: Splitter | None = None,
) -> list[Outcome]:
    """Run and store every plugin whose engine analyses it after each poll (light: `per_poll`)
    on the newest snapshots; prune results retention removed. The others (Spark) are left to
    the job worker (`pulsar_lens.plugins.spark.worker`).

    Plugins run in `requirements_first` order, so a plugin that builds on another reads the
    result just stored for it; outcomes come in that order. Once `stop()` is true, the
    plugins not started yet are left out (the process is stopping: the next start runs them).
    """
    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]
    # every plugin on the snapshot that was newest when the round began, though polls go on
    pinned = ClusterView(store, None).pinned() if isinstance(store, Store) else store
    outcomes = run_pass(pinned, light, results, stop=stop, splitter=splitter)
    if len(outcomes) == len(light):  # not stopped
        prune_results(store, light, results)
    return outcomes


def run_pass(
    view: runner.SnapshotStore,
    light: Sequence[AnalysisPlugin | LoadedPlugin],
    results: ResultStore,
    *,
    stop: Callable[[], bool] = lambda: False,
    splitter: Splitter | None = None,
) -> list[Outcome]:
    """`store_run` of each of `light` in order on `view` (pinned: one snapshot for all), the
    plugins not started once `stop()` is true left out. A table window several of them
    declare is read once (`SharedReads`); what it keeps is dropped when the pass ends.
    Given a `splitter` that wants it, part of them run in a helper process beside the rest
    (`plugins.splitpass`)."""
    if splitter is None:
        return _run_here(view, light, results, stop=stop)
    if splitter.wanted(view, light):
        assert isinstance(view, ClusterView)
        outcomes = run_split(
            view,
            light,
            lambda part: _run_here(view, part, results, stop=stop),
            results_store=results.root.parent,
            seconds=splitter.seconds,
            stop=stop,
        )
    else:
        outcomes = _run_here(view, light, results, stop=stop)
    splitter.remember(outcomes)
    return outcomes


def _run_here(
    view: runner.SnapshotStore,
    light: Sequence[AnalysisPlugin | LoadedPlugin],
    results: ResultStore,
    *,
    stop: Callable[[], bool],
) -> list[Outcome]:
    shared = SharedReads(view, [planned_reads(instance_of(p), view) for p in light])
    outcomes: list[Outcome] = []
    try:
        for plugin in light:
            if stop():
                break
            shared.advance()
            outcomes.append(store_run(shared, plugin, results))
    finally:
        shared.close()
    log.debug(
        "results pass: %d table reads, %d shared, %d cut from a longer one",
        shared.reads,
        shared.shared,
        shared.cut,
    )
    return outcomes


def prune_results(
    store: runner.SnapshotStore,
    light: Sequence[AnalysisPlugin | LoadedPlugin],
    results: ResultStore,
) -> None:
    """Delete the results of snapshots retention removed, and all but the newest
    KEEP_LIGHT_RESULTS of each light plugin (per version and parameters): pages, /metrics
    and the CLI read the newest, an older one is analysed again if asked for. Kept for every
    poll, they were most of the store (0.7 GB a day at a 30 s interval). The steps light
    plugins keep (`plugins.steps`) go once no window holds their poll."""
    try:
        index = store.snapshots()
        results.prune({str(s) for s in index["snapshot_id"]})
        for plugin in light:
            results.keep_newest(instance_of(plugin).name, KEEP_LIGHT_RESULTS)
        prune_steps(store, light, index)
    except Exception as exc:  # pruning is housekeeping: report it, keep the results
        log.warning("pruning stored results failed: %s", exc)


def requirements_first(
    plugins: Sequence[AnalysisPlugin | LoadedPlugin],
) -> list[AnalysisPlugin | LoadedPlugin]:
    """`plugins` with each one after those of them it requires, otherwise in the given order.

    Requirements that are not among `plugins` are ignored (the runner computes them on
    demand); plugins left on a cycle, which `discover()` refuses, keep their given order.
    """
    names = {instance_of(p).name for p in plugins}
    ordered: list[AnalysisPlugin | LoadedPlugin] = []
    placed: set[str] = set()
    pending = list(plugins)
    while pending:
        ready = next(
            (
                i
                for i, plugin in enumerate(pending)
                if all(r in placed or r not in names for r in instance_of(plugin).requires)
            ),
            0,
        )
        plugin = pending.pop(ready)
        ordered.append(plugin)
        placed.add(instance_of(plugin).name)
    return ordered


def store_run(
    store: runner.SnapshotStore,
    plugin: AnalysisPlugin | LoadedPlugin,
    results: ResultStore,
    params: Mapping[str, Any] | None = None,
    *,
    log_failure: bool = True,
) -> Outcome:
    """Analyse `plugin` with `params` (default ones when None) on the newest snapshots and
    store the result, or the failure; "kept" when exactly this is stored already. A Spark
    plugin runs on this process's Spark session. `log_failure=False` when the caller says
    the failure itself (`pulsar-lens analyze`), so it is said once."""
    instance = instance_of(plugin)
    validated = runner.validate_params(instance, params)
    params_json = validated.model_dump(mode="json")
    window = runner.snapshot_window(instance, store)
    ids = tuple(str(s) for s in window["snapshot_id"]) if len(window) else ()
    if not ids:
        return Outcome(instance.name, "empty")
    if results.read(instance.name, instance.version, params_json, ids) is not None:
        return Outcome(instance.name, "kept")
    started = time.perf_counter()
    choices: Mapping[str, Sequence[str]] = {}
    choices_error: str | None = None
    failure: Mapping[str, Any] | None = None
    try:
        output = runner.run(
            plugin, store, validated, use_cache=False, use_stored=False, views=_drawn_here(plugin)
        )
        status, error, result, choices = "ok", None, output.result, output.choices
        choices_error = output.choices_error
    except PluginError as exc:
        status, error, result, failure = "failed", str(exc), None, exc.to_json()
    except Exception as exc:  # the runner wraps plugin errors; anything else is ours
        status, error, result = "failed", f"{type(exc).__name__}: {exc}", None
    seconds = time.perf_counter() - started
    stored = StoredResult(
        plugin=instance.name,
        version=instance.version,
        params=params_json,
        snapshot_ids=ids,
        status="ok" if status == "ok" else "failed",
        seconds=seconds,
        result=result,
        error=error,
        failure=failure,
        choices=choices,
        choices_error=choices_error,
    )
    try:
        results.write(stored)
    except Exception as exc:  # e.g. a frame Arrow cannot store: readers compute it on demand
        log.warning("could not store the result of %s: %s", instance.name, exc)
        return Outcome(instance.name, "failed", seconds, f"not stored: {exc}")
    if error and log_failure:
        log.warning("analysis %s failed on the newest snapshot: %s", instance.name, error)
    return Outcome(instance.name, status, seconds, error)


def _drawn_here(plugin: AnalysisPlugin | LoadedPlugin) -> bool:
    """Whether the pass renders `plugin`'s result too. Views are not stored: a page renders
    the stored result when it is drawn. A third-party plugin's render still runs here, in its
    worker, so views that break the contract fail its analysis for this snapshot (said on
    /metrics and its page). A built-in's views are proven by the tests; rendering them here
    was a sixth of the pass, at 20,000 topics, for nothing kept."""
    return bool(getattr(plugin, "isolated", False))


DRAIN_SLICE = 0.5  # seconds between two looks of a drain at whether the worker is stopping


class ResultsWorker:
    """Computes results on a background thread, always for the newest written snapshot.

    `submit()` after each write; snapshots written while a computation runs coalesce into
    one more computation. `drain()` waits until nothing is pending (for `collect --once`).
    `compute` is handed `stopping`, to cut a computation short once `stop()` was called;
    `then`, if given, is called after each computation, finished or failed, once
    `progress()` counts it.

    Coalescing leaves snapshots unanalysed: of the submissions of one cluster waiting when a
    computation ends, all but the newest never get theirs. `progress()` counts them against
    the computation that ran while they waited (its `skipped`), since that one's length is
    what to fix. A submission that came after a computation began, but before it read its
    cluster's newest snapshot, was analysed by it yet still counts: the count can be one too
    high per cluster and computation, mostly with several clusters (each is read in turn).
    """

    def __init__(
        self,
        compute: Callable[[Callable[[], bool]], object],
        *,
        then: Callable[[], object] | None = None,
    ) -> None:
        self._compute = compute
        self._then = then
        self._changed = threading.Condition()
        self._wanted = 0  # submissions so far
        self._done = 0  # submissions covered by a finished computation
        self._stopping = False
        self._running = False  # a computation is under way
        self._waiting: dict[str | None, int] = {}  # submissions not taken yet, by cluster
        self._progress = PassProgress()
        self._thread = threading.Thread(target=self._run, name="results", daemon=True)
        self._thread.start()

    def submit(self, cluster: str | None = None) -> None:
        """A snapshot of `cluster` was written: only a newer one of the same cluster replaces
        it (one computation analyses every cluster's newest)."""
        with self._changed:
            self._wanted += 1
            self._waiting[cluster] = self._waiting.get(cluster, 0) + 1
            self._changed.notify_all()

    def progress(self) -> PassProgress:
        """The computations so far: the last one's end, its seconds and what it left out."""
        with self._changed:
            return self._progress

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submission so far is computed; False on timeout, or when the
        worker is stopping and no computation is under way any more (what is still pending
        then never runs). `interrupt()` comes from a signal handler, which cannot wake this
        wait: it looks again every DRAIN_SLICE seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._done < self._wanted:
                left = None if deadline is None else deadline - time.monotonic()
                if (self._stopping and not self._running) or (left is not None and left <= 0):
                    return False
                self._changed.wait(DRAIN_SLICE if left is None else min(DRAIN_SLICE, left))
            return True

    def stopping(self) -> bool:
        return self._stopping

    def interrupt(self) -> None:
        """Have a computation under way leave out the plugins it has not started, at once and
        without waiting: it takes no lock, so a signal handler may call it."""
        self._stopping = True

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._stopping or self._wanted > self._done)
                if self._stopping:
                    return
                target = self._wanted
                self._running = True
                # replaced before this one began (while the last one's `then` ran)
                left_out = _replaced(self._waiting)
                self._waiting = {}
            started = time.monotonic()
            try:
                self._compute(self.stopping)
            except Exception:  # never let the worker die: the next snapshot tries again
                log.exception("computing the analyses of the newest snapshot failed")
            self._count(time.monotonic() - started, left_out)
            if self._then is not None and not self._stopping:
                try:
                    self._then()
                except Exception:
                    log.exception("what follows the analyses of the newest snapshot failed")
            with self._changed:
                self._done = target
                self._running = False
                self._changed.notify_all()

    def _count(self, seconds: float, left_out: int) -> None:
        """Count a computation that took `seconds`: the snapshots replaced while it ran (and
        `left_out` before it began) are never analysed; the newest of each cluster is next."""
        with self._changed:
            skipped = left_out + _replaced(self._waiting)
            self._waiting = dict.fromkeys(self._waiting, 1)
            self._progress = replace(
                self._progress,
                passes=self._progress.passes + 1,
                finished_at=dt.datetime.now(dt.UTC),
                seconds=seconds,
                skipped=skipped,
                skipped_total=self._progress.skipped_total + skipped,
            )


def _replaced(waiting: Mapping[str | None, int]) -> int:
    """Of the submissions `waiting` (a count per cluster), those a newer one replaced."""
    return sum(count - 1 for count in waiting.values() if count > 1)
