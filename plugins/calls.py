"""Calling a plugin's own code (analyze, render, metrics, param_choices) and checking what it
returns: built-ins in this process, third-party plugins in a limited worker
(`pulsar_lens.plugins.isolation`); a failure becomes a `PluginRunError` naming the plugin.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Mapping
from typing import Any, cast

from pydantic import BaseModel

from pulsar_lens.api import AnalysisPlugin, Inputs, MetricsContext, Result, SparkInputs, View
from pulsar_lens.core.errors import (
    Origin,
    PluginContractError,
    PluginError,
    PluginRunError,
    origin_of,
)
from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.validation import check_result, check_views

log = logging.getLogger(__name__)
PARAMS_SECOND = isolation.PARAMS_SECOND


def _isolated(plugin: AnalysisPlugin | LoadedPlugin) -> bool:
    return isinstance(plugin, LoadedPlugin) and plugin.isolated


def _call(loaded: AnalysisPlugin | LoadedPlugin, method: str, *args: Any) -> Any:
    """`plugin.method(*args)`: in-process for built-ins, in a limited worker for the rest."""
    plugin = instance_of(loaded)
    # e.g. a Spark plugin's analyze needs this process's session, which no worker can share:
    # it runs in the job worker's process, apart from dashboard and collector.
    if not _isolated(loaded) or method in engine_of(plugin).in_process:
        return getattr(plugin, method)(*args)
    if method in PARAMS_SECOND and len(args) == 2:  # the worker rebuilds the params
        args = (args[0], args[1].model_dump(mode="json"))
    locator = isolation.locate(type(plugin))
    return isolation.call(plugin.name, locator, method, args, limits_of(loaded))


def limits_of(loaded: AnalysisPlugin | LoadedPlugin) -> isolation.Limits:
    """The limits `discover()` gave an isolated plugin (a bare instance: the defaults)."""
    return loaded.limits if isinstance(loaded, LoadedPlugin) else isolation.Limits()


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
    plugin = instance_of(loaded)
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


def analyze(
    loaded: AnalysisPlugin | LoadedPlugin, inputs: Inputs | SparkInputs, params: BaseModel
) -> Result:
    result = _hook(loaded, "analyze", inputs, params)
    check_result(instance_of(loaded), result)
    return cast(Result, result)


def step(loaded: AnalysisPlugin | LoadedPlugin, inputs: Inputs, params: BaseModel) -> Result:
    """The plugin's `step` on one poll and the one before it (isolated like analyze); a
    Result of exactly its `step_outputs`."""
    plugin = instance_of(loaded)
    result = _hook(loaded, "step", inputs, params)
    check_result(plugin, result, plugin.step_outputs, "step")
    return cast(Result, result)


def _hook(
    loaded: AnalysisPlugin | LoadedPlugin, method: str, inputs: Inputs | SparkInputs, params: Any
) -> Any:
    """`plugin.method(inputs, params)`; what it raises becomes its `PluginRunError`."""
    plugin = instance_of(loaded)
    try:
        return _call(loaded, method, inputs, params)
    except PluginError:
        raise
    except Exception as exc:
        if is_spark_error(exc):  # its traceback is Py4J's, its message holds the query plan
            log.debug("plugin %s failed in %s", plugin.name, method, exc_info=True)
        else:
            log.exception("plugin %s failed in %s", plugin.name, method)
        raise _raised(plugin, method, exc) from exc


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


def render(
    loaded: AnalysisPlugin | LoadedPlugin, result: Result, params: BaseModel | None = None
) -> tuple[View, ...]:
    plugin = instance_of(loaded)
    given = params is not None and takes_params(type(plugin).render)
    args = (result, params) if given else (result,)
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


def is_spark_error(exc: BaseException) -> bool:
    """An error Spark raised (pyspark's, or Py4J's from the JVM). Its message goes on with the
    query plan, often kilobytes: a failure says its first line (the error class and what
    was wrong), once, and the whole of it is logged at DEBUG only."""
    return type(exc).__module__.split(".", 1)[0] in ("pyspark", "py4j")


def _without_plan(origin: Origin, whole: str) -> Origin:
    """A Spark error's origin with its message cut to the first line: the rest is the query
    plan, kilobytes that each place the failure is told would repeat (the page, the stored
    result, the CLI line and its -v traceback)."""
    first = whole.strip().split("\n", 1)[0]
    return dataclasses.replace(
        origin, message=first, traceback=origin.traceback.replace(whole.strip(), first)
    )
