"""A plugin's `Params` built from what a form, a flag or a caller passed: unknown keys and bad
values are refused with the field and the value said, never passed on to `analyze`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.errors import PluginParamsError, origin_of
from pulsar_lens.plugins import isolation


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
