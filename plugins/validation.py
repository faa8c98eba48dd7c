"""A plugin against the contract of `pulsar_lens.api`: its class at load time, and what its
`analyze` and `render` return at run time.

Each problem names what was expected and what was found; the registry turns the first one
into a `PluginLoadError` for that plugin, and every other plugin still loads; the runner
raises `PluginContractError` for a result or views that break the contract.
"""

from __future__ import annotations

import inspect
import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from pydantic import BaseModel, ValidationError

from pulsar_lens.api import (
    API_VERSION,
    ENGINES,
    OLDEST_API_VERSION,
    PANELS,
    STEPS_API_VERSION,
    AnalysisPlugin,
    Chart,
    Columns,
    Metric,
    Note,
    Page,
    Result,
    Section,
    Table,
    Tabs,
)
from pulsar_lens.core.errors import PluginContractError, PluginLoadError, origin_of
from pulsar_lens.core.model import SCHEMAS, TABLES, TIMED_TABLES
from pulsar_lens.plugins.engines import BY_NAME

SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
METADATA_STRINGS = ("title", "description", "version")


def validate_plugin(obj: Any, source: str) -> AnalysisPlugin:
    """Check a plugin class against the contract and return an instance of it."""
    label = getattr(obj, "name", None) if inspect.isclass(obj) else None
    plugin = label if isinstance(label, str) else None

    def fail(message: str, exc: Exception | None = None) -> PluginLoadError:
        file, line = _defined_at(obj)  # only for a failure: it reads the class's source
        origin = origin_of(exc, home=file) if exc is not None else None
        return PluginLoadError(source, message, plugin=plugin, origin=origin, file=file, line=line)

    if not (inspect.isclass(obj) and issubclass(obj, AnalysisPlugin)):
        raise fail(f"expected a subclass of pulsar_lens.api.AnalysisPlugin, found {obj!r}")
    for problem in _problems(obj):
        raise fail(problem)
    try:
        return obj()
    except Exception as exc:
        message = f"expected a class that takes no arguments; instantiating it raised {exc!r}"
        raise fail(message, exc) from exc


def _defined_at(obj: Any) -> tuple[str | None, int | None]:
    """The file and first line of a class (or function) a plugin source named; (None, None)
    when Python cannot tell (a built-in, a class made at run time)."""
    try:
        file = inspect.getsourcefile(obj)
        _, line = inspect.getsourcelines(obj)
    except (OSError, TypeError):
        return None, None
    return file, line if file is not None else None


def _problems(cls: type[AnalysisPlugin]) -> Iterable[str]:
    yield from _api_version_problems(getattr(cls, "api_version", None))
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not SLUG_PATTERN.match(name):
        yield f"name: expected a kebab-case slug like 'bundle-ownership', found {name!r}"
    for attr in METADATA_STRINGS:
        value = getattr(cls, attr, None)
        if not isinstance(value, str) or not value.strip():
            yield f"{attr}: expected a non-empty string, found {value!r}"
    engine: object = getattr(cls, "engine", None)
    if not isinstance(engine, str) or engine not in BY_NAME:
        yield f"engine: expected one of {', '.join(ENGINES)}, found {engine!r}"
    elif (missing := BY_NAME[engine].missing()) is not None:
        yield f"engine: {missing}"
    yield from _table_problems(getattr(cls, "inputs", None))
    history = cls.history
    if not isinstance(history, int) or isinstance(history, bool) or history < 1:
        yield f"history: expected an integer >= 1, found {history!r}"
    yield from _history_of_problems(cls)
    yield from _history_param_problems(cls, engine)
    yield from _columns_of_problems(cls)
    yield from _output_problems(getattr(cls, "outputs", None))
    yield from _requires_problems(getattr(cls, "requires", None), name)
    yield from _step_problems(cls, engine)
    for method in ("analyze", "render"):
        if getattr(cls, method) is getattr(AnalysisPlugin, method):
            yield f"{method}: expected the plugin to define {method}(), found only the base one"
    params = cls.Params
    if not (inspect.isclass(params) and issubclass(params, BaseModel)):
        yield f"Params: expected a pydantic BaseModel subclass, found {params!r}"
    else:
        yield from _params_default_problems(params)
        yield from _page_problems(getattr(cls, "page", None), params)


def _history_of_problems(cls: type[AnalysisPlugin]) -> Iterable[str]:
    problems, items = _per_table(cls, "history_of", "count")
    yield from problems
    for table, count in items:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            yield f"history_of[{table!r}]: expected an integer >= 1, found {count!r}"


def _history_param_problems(cls: type[AnalysisPlugin], engine: object) -> Iterable[str]:
    """`history_param`: None, or an integer `Params` field (default >= 1) of a plugin
    analysed after each poll (a Spark job reads its whole window)."""
    named: object = getattr(cls, "history_param", None)
    if named is None:
        return
    fields = getattr(getattr(cls, "Params", None), "model_fields", {})
    if not isinstance(named, str) or named not in fields:
        yield f"history_param: expected the name of a Params field, found {named!r}"
        return
    default = fields[named].default
    if (
        fields[named].annotation is not int
        or isinstance(default, bool)
        or not (isinstance(default, int) and default >= 1)
    ):
        yield (
            f"history_param: Params field {named!r} must be an int with a default >= 1, "
            f"found {fields[named].annotation!r} = {default!r}"
        )
    if isinstance(engine, str) and engine in BY_NAME and not BY_NAME[engine].per_poll:
        yield f"history_param: for plugins analysed after each poll, not {engine!r} ones"


def _columns_of_problems(cls: type[AnalysisPlugin]) -> Iterable[str]:
    problems, items = _per_table(cls, "columns_of", "column names", steps=True)
    yield from problems
    for table, columns in items:
        if not isinstance(columns, tuple) or not all(isinstance(c, str) for c in columns):
            yield f"columns_of[{table!r}]: expected a tuple of column names, found {columns!r}"
            continue
        unknown = [c for c in columns if c not in SCHEMAS[table].names]
        if unknown:
            yield f"columns_of[{table!r}]: no such column(s) {unknown} (see docs/tables.md)"


def _per_table(
    cls: type[AnalysisPlugin], attribute: str, what: str, *, steps: bool = False
) -> tuple[list[str], list[tuple[str, object]]]:
    """A mapping attribute keyed by declared inputs (and `step_inputs`, with `steps`): its
    problems, and the entries of the declared tables to check further."""
    found: object = getattr(cls, attribute, None)
    if not isinstance(found, Mapping):
        return [f"{attribute}: expected a mapping of table name to {what}, found {found!r}"], []
    inputs = _tuple(getattr(cls, "inputs", ()))
    where = "inputs"
    if steps:
        inputs, where = (*inputs, *_tuple(getattr(cls, "step_inputs", ()))), "inputs or step_inputs"
    problems = [
        f"{attribute}: {t!r} is not one of the declared {where}" for t in found if t not in inputs
    ]
    return problems, [(t, v) for t, v in found.items() if t in inputs]


def _tuple(value: object) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else ()


def _page_problems(page: object, params: type[BaseModel]) -> Iterable[str]:
    if page is None:
        return
    if not isinstance(page, Page):
        yield f"page: expected None or a pulsar_lens.api.Page, found {page!r}"
        return
    if not isinstance(page.title, str) or not page.title.strip():
        yield f"page.title: expected a non-empty string, found {page.title!r}"
    if page.url_path and not (isinstance(page.url_path, str) and SLUG_PATTERN.match(page.url_path)):
        yield f"page.url_path: expected a kebab-case path, found {page.url_path!r}"
    unknown = [c for c in page.controls if c not in params.model_fields]
    if unknown:
        known = ", ".join(params.model_fields) or "none"
        yield f"page.controls: {', '.join(map(repr, unknown))} are not Params fields ({known})"
    if not isinstance(page.panels, tuple) or not all(p in PANELS for p in page.panels):
        yield f"page.panels: expected a tuple of {', '.join(PANELS)}, found {page.panels!r}"


def _params_default_problems(params: type[BaseModel]) -> Iterable[str]:
    """Every field needs a default that passes its own rules: the CLI and the dashboard form
    both start from the defaults, and pydantic does not check them itself."""
    defaults: dict[str, Any] = {}
    for name, info in params.model_fields.items():
        if info.is_required():
            yield f"Params.{name}: expected a default value (forms and the CLI start from it)"
        else:
            defaults[name] = info.get_default(call_default_factory=True)
    if len(defaults) < len(params.model_fields):
        return
    try:
        params.model_validate(defaults)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "?"
            yield (
                f"Params.{where}: its default {error.get('input')!r} breaks its own rule: "
                f"{error['msg']}"
            )
    except Exception as exc:  # a validator of the plugin's own that crashes
        yield f"Params: validating the defaults raised {type(exc).__name__}: {exc}"


def _table_problems(inputs: Any) -> Iterable[str]:
    if not isinstance(inputs, tuple) or not all(isinstance(t, str) for t in inputs):
        yield f"inputs: expected a tuple of table names, found {inputs!r}"
        return
    unknown = [t for t in inputs if t not in TABLES]
    if unknown:
        yield f"inputs: expected tables among {', '.join(TABLES)}, found {', '.join(unknown)}"


def _output_problems(outputs: Any, attribute: str = "outputs") -> Iterable[str]:
    if (
        not isinstance(outputs, tuple)
        or not outputs
        or not all(isinstance(o, str) for o in outputs)
    ):
        yield f"{attribute}: expected a non-empty tuple of frame names, found {outputs!r}"
    elif len(set(outputs)) != len(outputs):
        yield f"{attribute}: expected unique frame names, found {outputs!r}"


def _step_problems(cls: type[AnalysisPlugin], engine: object) -> Iterable[str]:
    """`step_inputs`, `step_outputs` and `step` come together, on snapshot tables, for a
    plugin analysed after each poll, written for the plugin API that has them."""
    tables: object = getattr(cls, "step_inputs", ())
    outputs: object = getattr(cls, "step_outputs", ())
    defined = cls.step is not AnalysisPlugin.step
    if tables == () and outputs == () and not defined:
        return
    if not isinstance(tables, tuple) or not tables or not all(isinstance(t, str) for t in tables):
        yield f"step_inputs: expected a non-empty tuple of table names, found {tables!r}"
    elif unknown := [t for t in tables if t not in TABLES or t in TIMED_TABLES]:
        yield (
            f"step_inputs: expected snapshot tables (not {', '.join(TIMED_TABLES)}), "
            f"found {', '.join(map(repr, unknown))}"
        )
    yield from _output_problems(outputs, "step_outputs")
    if not defined:
        yield "step: expected the plugin to define step() for its step_inputs"
    named: object = getattr(cls, "step_params", ())
    fields = getattr(getattr(cls, "Params", None), "model_fields", {})
    if not isinstance(named, tuple) or not all(isinstance(n, str) for n in named):
        yield f"step_params: expected a tuple of Params field names, found {named!r}"
    elif unknown := [n for n in named if n not in fields]:
        yield f"step_params: {', '.join(map(repr, unknown))} are not Params fields"
    if isinstance(engine, str) and engine in BY_NAME and not BY_NAME[engine].per_poll:
        yield f"step_inputs: steps are for plugins analysed after each poll, not {engine!r} ones"
    declared = getattr(cls, "api_version", None)
    if isinstance(declared, int) and declared < STEPS_API_VERSION:
        yield (
            f"step_inputs: steps came with plugin API {STEPS_API_VERSION}; declare "
            f"api_version = {STEPS_API_VERSION}"
        )


def _api_version_problems(declared: Any) -> Iterable[str]:
    """The plugin API the plugin was written for must be one this version runs."""
    if OLDEST_API_VERSION == API_VERSION:
        supported = f"plugin API {API_VERSION}"
    else:
        supported = f"plugin API {OLDEST_API_VERSION} to {API_VERSION}"
    if not isinstance(declared, int) or isinstance(declared, bool):
        yield f"api_version: expected an integer, found {declared!r}; this version runs {supported}"
    elif declared > API_VERSION:
        yield (
            f"api_version: declares plugin API {declared}, written for a newer Pulsar Lens; "
            f"this version runs {supported} (upgrade Pulsar Lens, or use a release of the "
            "plugin written for this API)"
        )
    elif declared < OLDEST_API_VERSION:
        yield (
            f"api_version: declares plugin API {declared}, which this version no longer runs; "
            f"it runs {supported} (update the plugin)"
        )


def _requires_problems(requires: Any, name: Any) -> Iterable[str]:
    if not isinstance(requires, tuple) or not all(
        isinstance(r, str) and SLUG_PATTERN.match(r) for r in requires
    ):
        yield f"requires: expected a tuple of plugin slugs, found {requires!r}"
    elif len(set(requires)) != len(requires):
        yield f"requires: expected unique plugin slugs, found {requires!r}"
    elif name in requires:
        yield (
            f"requires: expected other plugins, found its own slug {name!r}; a plugin cannot "
            "build on its own result"
        )


VIEW_TYPES = (Chart, Table, Metric, Note, Section, Columns, Tabs)


def check_result(
    plugin: AnalysisPlugin,
    result: Any,
    outputs: tuple[str, ...] | None = None,
    method: str = "analyze",
) -> None:
    """`result` is a Result holding exactly the declared outputs (`outputs`, or the
    `step_outputs` of a `step`), each a DataFrame."""
    if not isinstance(result, Result):
        raise PluginContractError(
            plugin.name,
            f"{method} must return pulsar_lens.api.Result, found {type(result).__name__}",
        )
    expected, found = set(plugin.outputs if outputs is None else outputs), set(result.frames)
    if expected != found:
        declared = "outputs" if method == "analyze" else f"{method}_outputs"
        raise PluginContractError(
            plugin.name,
            f"{method} must return exactly the declared {declared}; expected "
            f"{sorted(expected)}, found {sorted(found)}",
        )
    for name, frame in result.frames.items():
        if not isinstance(frame, pd.DataFrame):
            raise PluginContractError(
                plugin.name, f"output {name!r} must be a pandas DataFrame, found {type(frame)}"
            )


def check_views(plugin: AnalysisPlugin, views: Any, depth: int = 0) -> None:
    """Every view is one of the API's kinds with fields of the declared types, also inside
    columns and tabs (nested 4 deep), so the dashboard can draw each of them."""
    if depth > 4:
        raise PluginContractError(plugin.name, "render nests columns and tabs over 4 deep")
    if not isinstance(views, list | tuple):
        raise PluginContractError(plugin.name, f"views must be a list, found {type(views)}")
    for view in views:
        if not isinstance(view, VIEW_TYPES):
            raise PluginContractError(
                plugin.name,
                "render must return Chart, Table, Metric, Note, Section, Columns or Tabs "
                f"views, found {type(view)}",
            )
        for problem in _view_problems(view):
            raise PluginContractError(plugin.name, f"render returned a {problem}")
        if isinstance(view, Columns):
            for column in view.columns:
                check_views(plugin, column, depth + 1)
        elif isinstance(view, Tabs):
            for tab in view.tabs:
                if not (isinstance(tab, tuple) and len(tab) == 2 and isinstance(tab[0], str)):
                    raise PluginContractError(
                        plugin.name, f"Tabs take (label, views) pairs, found {tab!r}"
                    )
                check_views(plugin, tab[1], depth + 1)


NOTE_LEVELS = ("info", "warning", "error")


def _view_problems(view: Any) -> Iterable[str]:
    """What in one view's fields the dashboard could not draw."""
    kind = type(view).__name__
    texts = {
        Chart: ("title", "caption"),
        Table: ("title", "caption"),
        Metric: ("label",),
        Note: ("markdown",),
        Section: ("title", "caption"),
    }.get(type(view), ())
    for name in texts:
        value = getattr(view, name)
        if not isinstance(value, str):
            yield f"{kind} whose {name} is not text: {type(value).__name__}"
    if isinstance(view, Chart) and not _is_altair_chart(view.chart):
        yield f"Chart of {type(view.chart).__name__}, not an Altair chart"
    elif isinstance(view, Table) and not isinstance(view.frame, pd.DataFrame):
        yield f"Table of {type(view.frame).__name__}, not a pandas DataFrame"
    elif isinstance(view, Table) and not (
        isinstance(view.links, tuple) and all(c in view.frame.columns for c in view.links)
    ):
        yield f"Table whose links {view.links!r} are not a tuple of its columns"
    elif isinstance(view, Metric):
        if view.value is not None and not _scalar(view.value):
            yield f"Metric {view.label!r} whose value is a {type(view.value).__name__}"
        if view.delta is not None and not _scalar(view.delta):
            yield f"Metric {view.label!r} whose delta is a {type(view.delta).__name__}"
        if view.help is not None and not isinstance(view.help, str):
            yield f"Metric {view.label!r} whose help is not text"
    elif isinstance(view, Note) and view.level not in NOTE_LEVELS:
        yield f"Note of level {view.level!r}, not one of {', '.join(NOTE_LEVELS)}"
    elif isinstance(view, Columns):
        columns = view.columns
        if not isinstance(columns, list | tuple) or not columns:
            yield "Columns without a list of columns"
        elif view.widths and (
            len(view.widths) != len(columns)
            or not all(isinstance(w, numbers.Real) and w > 0 for w in view.widths)
        ):
            yield f"Columns whose widths {list(view.widths)!r} are not one number > 0 a column"
    elif isinstance(view, Tabs) and (not isinstance(view.tabs, list | tuple) or not view.tabs):
        yield "Tabs without a list of (label, views) pairs"


def _scalar(value: Any) -> bool:
    """Text or a real number (numpy's too; finite or not: the dashboard shows it)."""
    return isinstance(value, str | numbers.Real)


def _is_altair_chart(chart: object) -> bool:
    """An Altair top-level chart; altair is imported here, on use, as by the render that made
    the chart (discovering plugins needs no altair)."""
    import altair as alt

    return isinstance(chart, alt.TopLevelMixin)
