"""Run a plugin: load its inputs from the store, validate params, analyze, check, render.

The plugin's engine (`pulsar_lens.plugins.engines`) loads what `analyze` receives: pandas
frames with the default-parameter results of the plugins it `requires`, or Spark DataFrames.
Results are cached in-process by `pulsar_lens.core.digest.cache_key(plugin, version, params,
snapshot ids)`, bounded by entry count.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import BaseModel

from pulsar_lens.api import AnalysisPlugin, Inputs, Result, SparkInputs, View
from pulsar_lens.core.digest import cache_key
from pulsar_lens.core.errors import PluginContractError, PluginError, PluginRunError, ResultNotReady
from pulsar_lens.plugins.calls import analyze, choices_of, metrics, param_choices, render
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.params import validate_params
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.steps import step_tables, with_steps
from pulsar_lens.plugins.window import SnapshotStore, read_tables, snapshot_window, window_size

__all__ = [
    "CACHE_MAX_ENTRIES",
    "RunOutput",
    "SnapshotStore",
    "choices_of",
    "clear_cache",
    "inputs_for",
    "load_inputs",
    "metrics",
    "newest_stored",
    "param_choices",
    "required_results",
    "results_for",
    "run",
    "run_on_inputs",
    "snapshot_window",
    "validate_params",
    "window_size",
]

log = logging.getLogger(__name__)

CACHE_MAX_ENTRIES = 64


@dataclass(frozen=True)
class RunOutput:
    """One run: the result, its views, the snapshots it read and how long each step took."""

    plugin: str
    version: str
    params: BaseModel
    result: Result
    views: tuple[View, ...]
    snapshot_ids: tuple[str, ...]
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds: load, analyze, render
    cached: bool = False  # served from this process's memory
    stored: bool = False  # read from the stored results, not analysed now
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """The plugin's allowed values of str params (`param_choices`), with the default-params
    result only: they depend on the data, not on the params."""
    computed_at: str | None = None  # ISO time a stored result was computed
    choices_error: str | None = None  # why `param_choices` failed (its params are then typed)

    @property
    def seconds(self) -> float:
        return sum(self.timings.values())


_cache: OrderedDict[str, RunOutput] = OrderedDict()
_failures: OrderedDict[str, PluginError] = OrderedDict()
"""Analyses that failed, by the same key: a plugin that hangs costs its time limit once per
snapshot and params, not at every page view (the dashboard asks for the default run twice:
for the form's choices and for the views)."""
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _failures.clear()


def load_inputs(
    plugin: AnalysisPlugin | LoadedPlugin,
    store: SnapshotStore,
    *,
    window: pd.DataFrame | None = None,
    use_cache: bool = True,
    params: BaseModel | None = None,
) -> Inputs:
    """Each declared table over its newest `history` (or `history_of[table]`, or for a
    `history_param` plugin the newest that many polls of `params`, default ones when None)
    snapshots, as pandas frames whatever the plugin's engine.

    Given a `LoadedPlugin`, also the results of its requirements (`required_results`); a bare
    `AnalysisPlugin` has none resolved, so its `Inputs.results` stay empty. A plugin with
    steps also gets its `step_inputs` over its window, and `run_on_inputs` computes every
    step from them (the whole-window path: tests and benchmarks).
    """
    instance = instance_of(plugin)
    results = required_results(plugin, store, use_cache=use_cache)
    index = snapshot_window(instance, store) if window is None else window
    stepping = step_tables(instance, store, index) if instance.step_inputs else None
    tables = read_tables(instance, store, index, params)
    return Inputs(tables=tables, snapshots=index, results=results, step_tables=stepping)


def inputs_for(
    plugin: AnalysisPlugin | LoadedPlugin,
    store: SnapshotStore,
    *,
    window: pd.DataFrame | None = None,
    use_cache: bool = True,
    params: BaseModel | None = None,
) -> Inputs | SparkInputs:
    """What the plugin's `analyze` receives on its engine (`engines.Engine.load_inputs`) with
    `params` (the default ones when None)."""
    instance = instance_of(plugin)
    index = snapshot_window(instance, store) if window is None else window
    return engine_of(instance).load_inputs(
        instance,
        store,
        index,
        lambda: required_results(plugin, store, use_cache=use_cache),
        params,
    )


def _unlinked(plugin: AnalysisPlugin | LoadedPlugin) -> list[str]:
    """The slugs in `requires` that no linked requirement answers for."""
    linked = {r.name for r in plugin.requirements} if isinstance(plugin, LoadedPlugin) else set()
    return [slug for slug in instance_of(plugin).requires if slug not in linked]


def required_results(
    plugin: AnalysisPlugin | LoadedPlugin, store: SnapshotStore, *, use_cache: bool = True
) -> dict[str, Result]:
    """The default-parameter result of each plugin `plugin` requires, on the newest snapshots.

    Each comes from `run`, so a stored result is read rather than analysed again. A failed
    requirement fails the dependant: `PluginRunError` names the requirement and its error.
    Only the requirements `discover()` linked to a `LoadedPlugin` are there (none for a bare
    `AnalysisPlugin`); `run` refuses a plugin that lacks some.
    """
    if not isinstance(plugin, LoadedPlugin):
        return {}
    results: dict[str, Result] = {}
    for required in plugin.requirements:
        try:
            # drawn only to be kept in the memory cache, for the requirement's own page; with
            # no cache (the results pass) the result alone: its charts were drawn for nothing
            output = run(required, store, None, use_cache=use_cache, views=use_cache)
            results[required.name] = output.result
        except PluginError as exc:
            raise PluginRunError(
                plugin.name,
                f"its requirement {required.name!r} failed: {exc}",
                phase=exc.phase,
                limit=exc.limit,
                origin=exc.origin,
            ) from exc
    return results


def results_for(store: SnapshotStore) -> ResultStore | None:
    """The stored results beside a store on disk (None for stores that have no folder)."""
    root = getattr(store, "root", None)
    return ResultStore(root) if isinstance(root, str | os.PathLike) else None


def run(
    plugin: AnalysisPlugin | LoadedPlugin,
    store: SnapshotStore,
    params: Mapping[str, Any] | BaseModel | None = None,
    *,
    use_cache: bool = True,
    use_stored: bool = True,
    stored_only: bool = False,
    views: bool = True,
) -> RunOutput:
    """Run `plugin` on the newest snapshots of `store`.

    `views=False`: the result alone, not rendered (`views` is empty), and the memory cache
    neither read nor filled (it holds drawn outputs, and a render's failures): what the
    results pass stores and `/metrics` presents. A page renders it when drawn. A stored
    result is then read frame by frame as its frames are used (`results.StoredFrames`).

    `stored_only`: analyse nothing, but return the newest stored result for these params,
    as for a Spark plugin below (what /metrics in the collect process presents, the results
    pass having stored it).

    A plugin whose engine runs it as a job (Spark: not `per_poll`) is analysed only when
    `use_stored` is False (the job worker and `pulsar-lens analyze` ask for that); otherwise
    its newest stored result for these params is returned, whatever polls it read, and
    `ResultNotReady` raised when it has none, so a page or a scrape never starts a JVM.

    A result stored for exactly these inputs (plugin, version, params, snapshots) is read
    instead of analysing again, unless `use_stored` is False; a stored failure raises
    `PluginRunError`. Outputs are also cached in memory when `use_cache`. Before analysing,
    the results of the plugins it requires are obtained the same way (their stored results
    are read whatever `use_stored` says); this needs the `LoadedPlugin` that `discover()`
    linked to them.
    """
    instance = instance_of(plugin)
    unlinked = _unlinked(plugin)
    if unlinked:
        raise PluginRunError(
            instance.name,
            f"it requires {', '.join(unlinked)}; run the LoadedPlugin that "
            "pulsar_lens.plugins.registry.discover() returns, which is linked to its requirements",
        )
    validated = validate_params(instance, params)
    params_json = validated.model_dump(mode="json")
    use_cache = use_cache and views
    if stored_only or (use_stored and not engine_of(instance).per_poll):
        return newest_stored(plugin, store, validated, views=views)
    started = time.perf_counter()
    window = snapshot_window(instance, store)
    ids = tuple(str(s) for s in window["snapshot_id"]) if len(window) else ()
    key = cache_key(instance.name, instance.version, params_json, ids)
    if use_cache:
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return RunOutput(**{**hit.__dict__, "cached": True})
            failed = _failures.get(key)
        if failed is not None:
            raise failed.with_traceback(None)
    results = results_for(store) if use_stored and ids else None
    stored = (
        results.read(instance.name, instance.version, params_json, ids, lazy=not views)
        if results
        else None
    )
    try:
        if stored is not None:
            read_seconds = time.perf_counter() - started
            output = _from_stored(plugin, validated, stored, read_seconds, views=views)
        else:
            inputs = inputs_for(plugin, store, window=window, use_cache=use_cache, params=validated)
            inputs = with_steps(plugin, inputs, validated, store=store, keep=not use_stored)
            load_seconds = time.perf_counter() - started
            output = run_on_inputs(plugin, inputs, validated, views=views)
            timings = {"load": load_seconds, **output.timings}
            default = params_json == validate_params(instance, None).model_dump(mode="json")
            choices, choices_error = choices_of(plugin, inputs) if default else ({}, None)
            output = RunOutput(
                **{
                    **output.__dict__,
                    "timings": timings,
                    "choices": choices,
                    "choices_error": choices_error,
                }
            )
    except (PluginRunError, PluginContractError) as exc:  # its analysis or its render
        if use_cache:
            _remember(_failures, key, exc)
        raise
    if use_cache:
        _remember(_cache, key, output)
    return output


def _remember(cache: OrderedDict[str, Any], key: str, value: Any) -> None:
    with _cache_lock:
        cache[key] = value
        while len(cache) > CACHE_MAX_ENTRIES:
            cache.popitem(last=False)


def newest_stored(
    plugin: AnalysisPlugin | LoadedPlugin,
    store: SnapshotStore,
    params: BaseModel,
    *,
    views: bool = True,
) -> RunOutput:
    """The newest stored result of `plugin` with `params`, whatever polls it read (a Spark
    analysis runs as a job; its last result stays shown until the next one lands); rendered
    unless `views` is False."""
    instance = instance_of(plugin)
    started = time.perf_counter()
    results = results_for(store)
    params_json = params.model_dump(mode="json")
    stored = None
    if results is not None:
        among = None  # a cluster's part of a shared store: results of its own snapshots only
        if getattr(store, "cluster", None) is not None:
            among = [str(s) for s in store.snapshots()["snapshot_id"]]
        stored = results.newest(
            instance.name, instance.version, params_json, among=among, lazy=not views
        )
    if stored is None:
        raise ResultNotReady(
            instance.name,
            "no result yet for these parameters: it runs as a Spark job, after new polls "
            f"for the default ones; run it now with `pulsar-lens analyze {instance.name}` "
            "or the page's Run now",
        )
    return _from_stored(plugin, params, stored, time.perf_counter() - started, views=views)


def _from_stored(
    loaded: AnalysisPlugin | LoadedPlugin,
    params: BaseModel,
    stored: StoredResult,
    read_seconds: float,
    *,
    views: bool = True,
) -> RunOutput:
    plugin = instance_of(loaded)
    if stored.result is None:
        raise _stored_failure(plugin.name, stored)
    started = time.perf_counter()
    drawn = render(loaded, stored.result, params) if views else ()
    timings = {"read": read_seconds}
    if views:
        timings["render"] = time.perf_counter() - started
    return RunOutput(
        plugin=plugin.name,
        version=plugin.version,
        params=params,
        result=stored.result,
        views=drawn,
        snapshot_ids=stored.snapshot_ids,
        timings=timings,
        stored=True,
        choices=stored.choices,
        computed_at=stored.computed_at,
        choices_error=stored.choices_error,
    )


def _stored_failure(name: str, stored: StoredResult) -> PluginRunError:
    """The failure stored for a snapshot, raised again with its fields (an entry written
    before failures had fields gives its words as they are)."""
    at = stored.computed_at or ""
    if stored.failure is not None:
        return PluginRunError.from_json({**stored.failure, "plugin": name}, analysed_at=at)
    return PluginRunError(name, str(stored.error), analysed_at=at)


def _snapshot_ids(inputs: Inputs | SparkInputs) -> tuple[str, ...]:
    if not len(inputs.snapshots):
        return ()
    return tuple(str(s) for s in inputs.snapshots["snapshot_id"])


def run_on_inputs(
    plugin: AnalysisPlugin | LoadedPlugin,
    inputs: Inputs | SparkInputs,
    params: Mapping[str, Any] | BaseModel | None = None,
    *,
    views: bool = True,
) -> RunOutput:
    """Analyze and render given inputs (no store, no cache): for tests and the dashboard.
    `views=False` leaves out the render."""
    instance = instance_of(plugin)
    validated = validate_params(instance, params)
    started = time.perf_counter()
    inputs = with_steps(plugin, inputs, validated)  # unless `run` read them from the store
    result = analyze(plugin, inputs, validated)
    analyzed = time.perf_counter()
    timings = {"analyze": analyzed - started}
    drawn = render(plugin, result, validated) if views else ()
    if views:
        timings["render"] = time.perf_counter() - analyzed
    return RunOutput(
        plugin=instance.name,
        version=instance.version,
        params=validated,
        result=result,
        views=drawn,
        snapshot_ids=_snapshot_ids(inputs),
        timings=timings,
    )
