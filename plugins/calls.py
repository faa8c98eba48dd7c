"""Calling a plugin's own code (analyze, render, metrics, param_choices) and checking what it
returns: built-ins in this process, third-party plugins in a limited worker
(`pulsar_lens.plugins.isolation`); a failure becomes a `PluginRunError` naming the plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

from pydantic import BaseModel

from pulsar_lens.api import AnalysisPlugin, Inputs, MetricsContext, Result, SparkInputs, View
from pulsar_lens.core.errors import PluginContractError, PluginError, PluginRunError, origin_of
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.validation import check_result, check_views

log = logging.getLogger(__name__)


def _isolated(plugin: AnalysisPlugin | LoadedPlugin) -> bool:
    return isinstance(plugin, LoadedPlugin) and plugin.isolated


def _call(loaded: AnalysisPlugin | LoadedPlugin, method: str, *args: Any) -> Any:
    """`plugin.method(*args)`: in-process for built-ins, in a limited worker for the rest."""
    plugin = instance_of(loaded)
    # e.g. a Spark plugin's analyze needs this process's session, which no worker can share:
    # it runs in the job worker's process, apart from dashboard and collector.
    if not _isolated(loaded) or method in engine_of(plugin).in_process:
        return getattr(plugin, method)(*args)
    if method == "analyze":
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
    plugin = instance_of(loaded)
    if type(plugin).param_choices is AnalysisPlugin.param_choices:
        return {}
    try:
        choices = _call(loaded, "param_choices", inputs)
    except Exception as exc:  # choices are a convenience: the form works without them
        log.warning("plugin %s: param_choices failed: %s", plugin.name, exc)
        return {}
    if not isinstance(choices, Mapping):
        return {}
    return {
        str(name): [str(v) for v in values]
        for name, values in choices.items()
        if isinstance(values, list | tuple)
    }


def analyze(
    loaded: AnalysisPlugin | LoadedPlugin, inputs: Inputs | SparkInputs, params: BaseModel
) -> Result:
    plugin = instance_of(loaded)
    try:
        result = _call(loaded, "analyze", inputs, params)
    except PluginError:
        raise
    except Exception as exc:
        log.exception("plugin %s failed in analyze", plugin.name)
        raise _raised(plugin, "analyze", exc) from exc
    check_result(plugin, result)
    return cast(Result, result)


def render(loaded: AnalysisPlugin | LoadedPlugin, result: Result) -> tuple[View, ...]:
    plugin = instance_of(loaded)
    try:
        views = _call(loaded, "render", result)
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
    return PluginRunError(plugin.name, f"{phase} raised {origin}", phase=phase, origin=origin)
