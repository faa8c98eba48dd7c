"""Run a plugin: load its inputs from the store, validate params, analyze, check, render.

The light engine hands pandas frames (read through pyarrow) to `analyze`, with the
default-parameter results of the plugins it `requires`. Results are cached in-process by
`pulsar_lens.core.digest.cache_key(plugin, version, params, snapshot ids)`, bounded by entry count.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ValidationError

from pulsar_lens.api import (
    AnalysisPlugin,
    Inputs,
    MetricsContext,
    Result,
    SparkInputs,
    View,
)
from pulsar_lens.core.digest import cache_key
from pulsar_lens.core.errors import (
    Origin,
    PluginContractError,
    PluginError,
    PluginParamsError,
    PluginRunError,
    ResultNotReady,
    origin_of,
)
from pulsar_lens.core.model import SCHEMAS, TIMED_TABLES
from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.registry import LoadedPlugin
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.validation import check_result, check_views

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


class SnapshotStore(Protocol):
    """The part of `pulsar_lens.core.store.Store` the runner reads."""

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame: ...

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
    ) -> pa.Table: ...


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


def _instance(plugin: AnalysisPlugin | LoadedPlugin) -> AnalysisPlugin:
    return plugin.plugin if isinstance(plugin, LoadedPlugin) else plugin


def validate_params(
    plugin: AnalysisPlugin, params: Mapping[str, Any] | BaseModel | None
) -> BaseModel:
    """The plugin's Params built from `params`; unknown keys and bad values raise."""
    model = type(plugin).Params
    if isinstance(params, model):
        return params
    if isinstance(params, BaseModel):
        params = params.model_dump()
    raw = dict(params or {})
    unknown = sorted(set(raw) - set(model.model_fields))
    if unknown:
        known = ", ".join(model.model_fields) or "none"
        raise PluginParamsError(plugin.name, f"unknown {', '.join(unknown)}; known: {known}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise PluginParamsError(plugin.name, _validation_text(exc)) from exc
    except Exception as exc:  # a validator of the plugin's own that crashes
        origin = origin_of(exc, home=isolation.home_of(type(plugin)))
        raise PluginParamsError(plugin.name, f"its Params raised {origin}", origin=origin) from exc


def _validation_text(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "params"
        parts.append(f"{where}: {error['msg']} (found {error.get('input')!r})")
    return "; ".join(parts)


def window_size(plugin: AnalysisPlugin) -> int:
    """How many recent snapshots the plugin reads at most (`history`, or more by `history_of`)."""
    return max([plugin.history, *plugin.history_of.values()])


def snapshot_window(plugin: AnalysisPlugin, store: SnapshotStore) -> pd.DataFrame:
    """The index rows of the newest snapshots the plugin reads, oldest first."""
    size = window_size(plugin)
    return store.snapshots(limit=size).tail(size).reset_index(drop=True)


def load_inputs(
    plugin: AnalysisPlugin | LoadedPlugin,
    store: SnapshotStore,
    *,
    window: pd.DataFrame | None = None,
    use_cache: bool = True,
) -> Inputs:
    """Each declared table over its newest `history` (or `history_of[table]`) snapshots.

    Given a `LoadedPlugin`, also the results of its requirements (`required_results`); a bare
    `AnalysisPlugin` has none resolved, so its `Inputs.results` stay empty.
    """
    instance = _instance(plugin)
    results = required_results(plugin, store, use_cache=use_cache)
    index = snapshot_window(instance, store) if window is None else window
    ids = [str(s) for s in index["snapshot_id"]] if len(index) else []
    tables: dict[str, pd.DataFrame] = {}
    for name in instance.inputs:
        count = instance.history_of.get(name, instance.history)
        mine = ids[-count:]
        if not mine:
            table = SCHEMAS[name].empty_table()
        elif name in TIMED_TABLES:  # rows of the window's time span, up to now
            first = index["collected_at"].iloc[-len(mine)]
            table = store.read(name, since=pd.Timestamp(first).to_pydatetime())
        else:
            table = store.read(name, snapshot_ids=mine)
        tables[name] = table.to_pandas()
    return Inputs(tables=tables, snapshots=index, results=results)


def inputs_for(
    plugin: AnalysisPlugin | LoadedPlugin,
    store: SnapshotStore,
    *,
    window: pd.DataFrame | None = None,
    use_cache: bool = True,
) -> Inputs | SparkInputs:
    """What the plugin's `analyze` receives on its engine: pandas `Inputs` or `SparkInputs`."""
    instance = _instance(plugin)
    if instance.engine != "spark":
        return load_inputs(plugin, store, window=window, use_cache=use_cache)
    from pulsar_lens.plugins.spark.inputs import load_spark_inputs

    root = getattr(store, "root", None)
    if not isinstance(root, str | os.PathLike):
        raise PluginRunError(instance.name, "a Spark analysis reads a store on disk")
    index = snapshot_window(instance, store) if window is None else window
    return load_spark_inputs(instance, root, index)


def _unlinked(plugin: AnalysisPlugin | LoadedPlugin) -> list[str]:
    """The slugs in `requires` that no linked requirement answers for."""
    linked = {r.name for r in plugin.requirements} if isinstance(plugin, LoadedPlugin) else set()
    return [slug for slug in _instance(plugin).requires if slug not in linked]


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
            results[required.name] = run(required, store, None, use_cache=use_cache).result
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
) -> RunOutput:
    """Run `plugin` on the newest snapshots of `store`.

    A Spark plugin is analysed only when `use_stored` is False (the job worker and
    `pulsar-lens analyze` ask for that); otherwise its newest stored result for these params
    is returned, whatever polls it read, and `ResultNotReady` raised when it has none, so a
    page or a scrape never starts a JVM.

    A result stored for exactly these inputs (plugin, version, params, snapshots) is read
    instead of analysing again, unless `use_stored` is False; a stored failure raises
    `PluginRunError`. Outputs are also cached in memory when `use_cache`. Before analysing,
    the results of the plugins it requires are obtained the same way (their stored results
    are read whatever `use_stored` says); this needs the `LoadedPlugin` that `discover()`
    linked to them.
    """
    instance = _instance(plugin)
    unlinked = _unlinked(plugin)
    if unlinked:
        raise PluginRunError(
            instance.name,
            f"it requires {', '.join(unlinked)}; run the LoadedPlugin that "
            "pulsar_lens.plugins.registry.discover() returns, which is linked to its requirements",
        )
    validated = validate_params(instance, params)
    params_json = validated.model_dump(mode="json")
    if instance.engine == "spark" and use_stored:
        return newest_stored(plugin, store, validated)
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
    stored = results.read(instance.name, instance.version, params_json, ids) if results else None
    try:
        if stored is not None:
            output = _from_stored(plugin, validated, stored, time.perf_counter() - started)
        else:
            inputs = inputs_for(plugin, store, window=window, use_cache=use_cache)
            load_seconds = time.perf_counter() - started
            output = run_on_inputs(plugin, inputs, validated)
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
    plugin: AnalysisPlugin | LoadedPlugin, store: SnapshotStore, params: BaseModel
) -> RunOutput:
    """The newest stored result of `plugin` with `params`, whatever polls it read (a Spark
    analysis runs as a job; its last result stays shown until the next one lands)."""
    instance = _instance(plugin)
    started = time.perf_counter()
    results = results_for(store)
    params_json = params.model_dump(mode="json")
    stored = None
    if results is not None:
        among = None  # a cluster's part of a shared store: results of its own snapshots only
        if getattr(store, "cluster", None) is not None:
            among = [str(s) for s in store.snapshots()["snapshot_id"]]
        stored = results.newest(instance.name, instance.version, params_json, among=among)
    if stored is None:
        raise ResultNotReady(
            instance.name,
            "no result yet for these parameters: it runs as a Spark job, after new polls "
            f"for the default ones; run it now with `pulsar-lens analyze {instance.name}` "
            "or the page's Run now",
        )
    return _from_stored(plugin, params, stored, time.perf_counter() - started)


def _from_stored(
    loaded: AnalysisPlugin | LoadedPlugin,
    params: BaseModel,
    stored: StoredResult,
    read_seconds: float,
) -> RunOutput:
    plugin = _instance(loaded)
    if stored.result is None:
        raise _stored_failure(plugin.name, stored)
    started = time.perf_counter()
    views = _render(loaded, stored.result, params)
    return RunOutput(
        plugin=plugin.name,
        version=plugin.version,
        params=params,
        result=stored.result,
        views=views,
        snapshot_ids=stored.snapshot_ids,
        timings={"read": read_seconds, "render": time.perf_counter() - started},
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
) -> RunOutput:
    """Analyze and render given inputs (no store, no cache): for tests and the dashboard."""
    instance = _instance(plugin)
    validated = validate_params(instance, params)
    started = time.perf_counter()
    result = _analyze(plugin, inputs, validated)
    analyzed = time.perf_counter()
    views = _render(plugin, result, validated)
    rendered = time.perf_counter()
    return RunOutput(
        plugin=instance.name,
        version=instance.version,
        params=validated,
        result=result,
        views=views,
        snapshot_ids=_snapshot_ids(inputs),
        timings={"analyze": analyzed - started, "render": rendered - analyzed},
    )


def _isolated(plugin: AnalysisPlugin | LoadedPlugin) -> bool:
    return isinstance(plugin, LoadedPlugin) and plugin.isolated


def _call(loaded: AnalysisPlugin | LoadedPlugin, method: str, *args: Any) -> Any:
    """`plugin.method(*args)`: in-process for built-ins, in a limited worker for the rest."""
    plugin = _instance(loaded)
    # A Spark plugin's analyze (and param_choices) needs this process's session, which no
    # worker can share: it runs in the job worker's process, apart from dashboard and collector.
    in_process = method in ("analyze", "param_choices") and plugin.engine == "spark"
    if not _isolated(loaded) or in_process:
        return getattr(plugin, method)(*args)
    if method in ("analyze", "render") and len(args) == 2:  # the worker rebuilds the params
        args = (args[0], args[1].model_dump(mode="json"))
    locator = isolation.locate(type(plugin))
    return isolation.call(plugin.name, locator, method, args, isolation.Limits.from_env())


def metrics(
    loaded: AnalysisPlugin | LoadedPlugin, result: Result, context: MetricsContext
) -> list[Any]:
    """The plugin's `metrics(result, context)` families (isolated like analyze)."""
    families = _call(loaded, "metrics", result, context)
    return cast(list[Any], list(families) if isinstance(families, tuple) else families)


def param_choices(
    loaded: AnalysisPlugin | LoadedPlugin, inputs: Inputs | SparkInputs
) -> dict[str, list[str]]:
    """The plugin's `param_choices(inputs)` (isolated like analyze) as lists of strings; {}
    when it fails. A Spark plugin's hook gets `SparkInputs` in its job, which stores them."""
    return choices_of(loaded, inputs)[0]


def choices_of(
    loaded: AnalysisPlugin | LoadedPlugin, inputs: Inputs | SparkInputs
) -> tuple[dict[str, list[str]], str | None]:
    """`param_choices` and, when it failed, why: the form still works without choices (its
    select boxes become text boxes), but the page says so instead of changing silently."""
    plugin = _instance(loaded)
    if type(plugin).param_choices is AnalysisPlugin.param_choices:
        return {}, None
    try:
        choices = _call(loaded, "param_choices", inputs)
    except Exception as exc:  # choices are a convenience: the form works without them
        error = exc if isinstance(exc, PluginError) else _raised(plugin, "param_choices", exc)
        log.warning("plugin %s: param_choices failed: %s", plugin.name, error)
        return {}, clean(error.detail, limit=500)
    if not isinstance(choices, Mapping):
        return {}, f"param_choices must return a mapping, found {type(choices).__name__}"
    return {
        str(name): [str(v) for v in values]
        for name, values in choices.items()
        if isinstance(values, list | tuple)
    }, None


def takes_params(render: Any) -> bool:
    """Whether a plugin's `render` takes the params beside the result: `render(self, result,
    params)` since the contract passed them; a render written as `render(self, result)`
    keeps being called with the result only."""
    try:
        signature = inspect.signature(render)
    except (TypeError, ValueError):
        return False
    kinds = [p.kind for p in signature.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(kind in positional for kind in kinds) >= 3  # self, result, params


def _analyze(
    loaded: AnalysisPlugin | LoadedPlugin, inputs: Inputs | SparkInputs, params: BaseModel
) -> Result:
    plugin = _instance(loaded)
    try:
        result = _call(loaded, "analyze", inputs, params)
    except PluginError:
        raise
    except Exception as exc:
        if is_spark_error(exc):  # its traceback is Py4J's, its message holds the query plan
            log.debug("plugin %s failed in analyze", plugin.name, exc_info=True)
        else:
            log.exception("plugin %s failed in analyze", plugin.name)
        raise _raised(plugin, "analyze", exc) from exc
    check_result(plugin, result)
    return cast(Result, result)


def is_spark_error(exc: BaseException) -> bool:
    """An error Spark raised (pyspark's, or Py4J's from the JVM). Its message goes on with the
    query plan, often kilobytes: a failure says its first line (the error class and what
    was wrong), once, and the whole of it is logged at DEBUG only."""
    return type(exc).__module__.split(".", 1)[0] in ("pyspark", "py4j")


def _render(
    loaded: AnalysisPlugin | LoadedPlugin, result: Result, params: BaseModel
) -> tuple[View, ...]:
    plugin = _instance(loaded)
    args = (result, params) if takes_params(type(plugin).render) else (result,)
    try:
        views = _call(loaded, "render", *args)
    except PluginError:
        raise
    except Exception as exc:
        log.exception("plugin %s failed in render", plugin.name)
        raise _raised(plugin, "render", exc) from exc
    if not isinstance(views, list | tuple):
        raise PluginContractError(plugin.name, f"render must return a list, found {type(views)}")
    check_views(plugin, views)
    return tuple(views)


def _raised(plugin: AnalysisPlugin, phase: str, exc: Exception) -> PluginRunError:
    """What a plugin run in this process raised in `phase`, with its file and line."""
    origin = origin_of(exc, home=isolation.home_of(type(plugin)))
    if is_spark_error(exc):
        origin = _without_plan(origin, str(exc))
    return PluginRunError(plugin.name, f"{phase} raised {origin}", phase=phase, origin=origin)


def _without_plan(origin: Origin, whole: str) -> Origin:
    """A Spark error's origin with its message cut to the first line: the rest is the query
    plan, kilobytes that each place the failure is told would repeat (the page, the stored
    result, the CLI line and its -v traceback)."""
    first = whole.strip().split("\n", 1)[0]
    return dataclasses.replace(
        origin, message=first, traceback=origin.traceback.replace(whole.strip(), first)
    )
