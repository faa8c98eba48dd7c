"""Plugin discovery and load-time validation.

Three sources, loaded by an explicit `discover()` call (never at import):
built-ins (`plugins.builtin.BUILTIN_PLUGINS`), installed packages (entry-point group
`pulsar_lens.plugins`) and `*.py` drop-in files in the directories of PULSAR_LENS_PLUGIN_DIRS.
A plugin that fails to import or validate becomes a `PluginLoadError` in `Registry.failures`;
so does one whose `requires` names a plugin that is not loaded or forms a cycle.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from core.errors import PluginLoadError, PluginUnavailable, SettingsError
from core.model import TABLES
from plugins import isolation
from plugins.api import API_VERSION, ENGINES, OLDEST_API_VERSION, AnalysisPlugin, Page
from plugins.builtin import BUILTIN_PLUGINS
from plugins.isolation import Locator

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PLUGIN_DIRS_ENV",
    "LoadedPlugin",
    "Registry",
    "discover",
    "plugin_dirs_from_env",
    "validate_plugin",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "pulsar_lens.plugins"
PLUGIN_DIRS_ENV = "PULSAR_LENS_PLUGIN_DIRS"
SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
METADATA_STRINGS = ("title", "description", "version")


@dataclass(frozen=True)
class LoadedPlugin:
    """A validated plugin instance and where it came from.

    `requirements` are the loaded plugins named in its `requires`, in that order, each with
    its own requirements: `discover()` links them, so the runner needs no registry.
    """

    plugin: AnalysisPlugin
    source: str  # "builtin plugins.builtin.x:Y", "entry point n = m:C (dist 1.0)", a file path
    version: str
    requirements: tuple[LoadedPlugin, ...] = field(default=(), repr=False, compare=False)

    @property
    def isolated(self) -> bool:
        """Third-party code (entry points, drop-in files) runs in a worker process."""
        return not self.source.startswith("builtin ")

    @property
    def name(self) -> str:
        return self.plugin.name

    @property
    def title(self) -> str:
        return self.plugin.title

    @property
    def engine(self) -> str:
        return self.plugin.engine


@dataclass(frozen=True)
class Registry:
    """What `discover()` found: loaded plugins by slug, and the load failures."""

    plugins: Mapping[str, LoadedPlugin] = field(default_factory=dict)
    failures: list[PluginLoadError] = field(default_factory=list)

    def get(self, slug: str) -> LoadedPlugin:
        """The plugin named `slug`; PluginUnavailable names the loaded ones or the load error."""
        loaded = self.plugins.get(slug)
        if loaded is not None:
            return loaded
        for failure in self.failures:
            if failure.plugin == slug:
                raise PluginUnavailable(slug, f"it failed to load: {failure}")
        known = ", ".join(sorted(self.plugins)) or "none"
        message = f"no plugin has this name; loaded plugins: {known}"
        unnamed = [str(f) for f in self.failures if f.plugin is None]
        if unnamed:
            message += f"; {len(unnamed)} failed to load and may define it: " + "; ".join(unnamed)
        raise PluginUnavailable(slug, message)

    def __iter__(self) -> Iterator[LoadedPlugin]:
        return iter(self.plugins.values())

    def __len__(self) -> int:
        return len(self.plugins)


def plugin_dirs_from_env(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The drop-in directories listed in PULSAR_LENS_PLUGIN_DIRS (os.pathsep-separated)."""
    raw = (os.environ if environ is None else environ).get(PLUGIN_DIRS_ENV, "")
    return [Path(part).expanduser() for part in raw.split(os.pathsep) if part.strip()]


def discover(
    *,
    builtins: bool = True,
    entry_points: bool = True,
    plugin_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> Registry:
    """Load and validate plugins from the chosen sources.

    `plugin_dirs=None` reads PULSAR_LENS_PLUGIN_DIRS; pass `()` to read no drop-in directory.
    Only the listed directories are read: drop-in files are arbitrary code.
    """
    plugins: dict[str, LoadedPlugin] = {}
    failures: list[PluginLoadError] = []
    candidates: list[tuple[str, Any]] = []
    if builtins:
        candidates.extend(_builtin_candidates(failures))
    if entry_points:
        candidates.extend(_entry_point_candidates(failures))
    dirs = plugin_dirs_from_env() if plugin_dirs is None else [Path(d) for d in plugin_dirs]
    for directory in dirs:
        candidates.extend(_directory_candidates(directory, failures))
    for source, obj in candidates:
        try:
            loaded = _accept(obj, source, plugins)
        except PluginLoadError as exc:
            log.warning("%s", exc)
            failures.append(exc)
        else:
            plugins[loaded.name] = loaded
    return Registry(plugins=_link_requirements(plugins, failures), failures=failures)


def _link_requirements(
    plugins: Mapping[str, LoadedPlugin], failures: list[PluginLoadError]
) -> dict[str, LoadedPlugin]:
    """The plugins whose requirements are all loaded and acyclic, each linked to them.

    The others become failures. Refusing one can leave its dependants short of a requirement,
    so this repeats until nothing more is refused.
    """
    kept = dict(plugins)
    while True:
        refused = _unmet(kept, failures) or _cyclic(kept)
        if not refused:
            break
        for slug, message in refused.items():
            loaded = kept.pop(slug)
            error = PluginLoadError(loaded.source, message, plugin=slug)
            log.warning("%s", error)
            failures.append(error)
    linked: dict[str, LoadedPlugin] = {}

    def link(slug: str) -> LoadedPlugin:
        if slug not in linked:
            loaded = kept[slug]
            requirements = tuple(link(r) for r in loaded.plugin.requires)
            linked[slug] = replace(loaded, requirements=requirements) if requirements else loaded
        return linked[slug]

    return {slug: link(slug) for slug in kept}


def _unmet(kept: Mapping[str, LoadedPlugin], failures: list[PluginLoadError]) -> dict[str, str]:
    """Why each plugin requiring one that is not loaded is refused, by slug."""
    failed = {f.plugin for f in failures if f.plugin is not None}
    refused: dict[str, str] = {}
    for slug, loaded in kept.items():
        missing = [r for r in loaded.plugin.requires if r not in kept]
        if missing:
            reasons = [
                f"{r!r} ({'it failed to load' if r in failed else 'no plugin has this name'})"
                for r in missing
            ]
            refused[slug] = (
                f"requires: expected loaded plugins, found {', '.join(reasons)}; "
                f"loaded plugins: {', '.join(sorted(kept)) or 'none'}"
            )
    return refused


def _cyclic(kept: Mapping[str, LoadedPlugin]) -> dict[str, str]:
    """Why each plugin on a cycle of requirements is refused, by slug (every requirement is
    loaded when this runs)."""
    refused: dict[str, str] = {}
    for slug in kept:
        path = _path_back(slug, kept)
        if path is not None:
            refused[slug] = (
                f"requires: expected no cycle, found {' -> '.join(path)}; a plugin cannot "
                "build on its own result"
            )
    return refused


def _path_back(start: str, kept: Mapping[str, LoadedPlugin]) -> list[str] | None:
    """The shortest chain of requirements from `start` back to itself, or None."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for slug in frontier:
            for required in kept[slug].plugin.requires:
                if required == start:
                    chain = [slug]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return [*reversed(chain), start]
                if required not in previous:
                    previous[required] = slug
                    following.append(required)
        frontier = following
    return None


def _accept(obj: Any, source: str, plugins: Mapping[str, LoadedPlugin]) -> LoadedPlugin:
    instance = validate_plugin(obj, source)
    other = plugins.get(instance.name)
    if other is not None:
        raise PluginLoadError(
            source,
            f"slug {instance.name!r} is already taken by the plugin from {other.source}; "
            "expected a unique name",
            plugin=instance.name,
        )
    return LoadedPlugin(plugin=instance, source=source, version=instance.version)


def _load_reference(reference: str) -> Any:
    module_name, _, qualname = reference.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split(".") if qualname else ():
        obj = getattr(obj, part)
    return obj


def _builtin_candidates(failures: list[PluginLoadError]) -> Iterator[tuple[str, Any]]:
    for reference in BUILTIN_PLUGINS:
        source = f"builtin {reference}"
        try:
            yield source, _load_reference(reference)
        except Exception as exc:
            failures.append(_import_failure(source, exc))


def _entry_point_candidates(failures: list[PluginLoadError]) -> Iterator[tuple[str, Any]]:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = f" ({ep.dist.name} {ep.dist.version})" if ep.dist is not None else ""
        source = f"entry point {ep.name} = {ep.value}{dist}"
        module = ep.value.partition(":")[0].strip()
        refused = isolation.probe_import(source, Locator("module", module, module), _limits())
        if refused is not None:
            failures.append(PluginLoadError(source, f"import failed: {refused}"))
            continue
        try:
            obj = ep.load()
        except Exception as exc:
            failures.append(_import_failure(source, exc))
            continue
        yield from _expand(source, obj)


def _directory_candidates(
    directory: Path, failures: list[PluginLoadError]
) -> Iterator[tuple[str, Any]]:
    if not directory.is_dir():
        failures.append(
            PluginLoadError(
                str(directory), f"{PLUGIN_DIRS_ENV} names a directory that does not exist"
            )
        )
        return
    root = directory.resolve()
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith(("_", ".")):
            continue
        if not path.resolve().is_relative_to(root):
            failures.append(
                PluginLoadError(
                    str(path),
                    f"a link to {path.resolve()}, outside the plugin folder; refused (copy the "
                    "file into the folder, or list its own folder in PULSAR_LENS_PLUGIN_DIRS)",
                )
            )
            continue
        locator = Locator("file", str(path), _module_name(path))
        refused = isolation.probe_import(str(path), locator, _limits())
        if refused is not None:
            failures.append(PluginLoadError(str(path), f"import failed: {refused}"))
            continue
        try:
            module = _import_file(path)
        except Exception as exc:
            failures.append(_import_failure(str(path), exc))
            continue
        listed = getattr(module, "PLUGINS", None)
        if listed is None:
            failures.append(
                PluginLoadError(
                    str(path),
                    "expected a module-level PLUGINS tuple listing the plugin classes; found none",
                )
            )
            continue
        yield from _expand(str(path), listed)


def _expand(source: str, obj: Any) -> Iterator[tuple[str, Any]]:
    """A class stands for itself; a list or tuple stands for each of its items."""
    if isinstance(obj, list | tuple):
        for item in obj:
            name = getattr(item, "__qualname__", repr(item))
            yield f"{source} [{name}]" if len(obj) > 1 else source, item
    else:
        yield source, obj


def _module_name(path: Path) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return f"{isolation.DROPIN_PREFIX}{re.sub(r'[^0-9a-zA-Z_]', '_', path.stem)}_{digest}"


def _limits() -> isolation.Limits:
    try:
        return isolation.Limits.from_env()
    except SettingsError as exc:
        log.warning("%s; using the default plugin limits", exc)
        return isolation.Limits()


def _import_file(path: Path) -> Any:
    module_name = _module_name(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _import_failure(source: str, exc: BaseException) -> PluginLoadError:
    error = PluginLoadError(source, f"import failed: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


def validate_plugin(obj: Any, source: str) -> AnalysisPlugin:
    """Check a plugin class against the contract and return an instance of it."""
    label = getattr(obj, "name", None) if inspect.isclass(obj) else None
    plugin = label if isinstance(label, str) else None

    def fail(message: str) -> PluginLoadError:
        return PluginLoadError(source, message, plugin=plugin)

    if not (inspect.isclass(obj) and issubclass(obj, AnalysisPlugin)):
        raise fail(f"expected a subclass of plugins.api.AnalysisPlugin, found {obj!r}")
    for problem in _problems(obj):
        raise fail(problem)
    try:
        return obj()
    except Exception as exc:
        message = f"expected a class that takes no arguments; instantiating it raised {exc!r}"
        raise fail(message) from exc


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
    if engine not in ENGINES:
        unbuilt = " (this version has no Spark engine)" if engine == "spark" else ""
        yield f"engine: expected one of {', '.join(ENGINES)}, found {engine!r}{unbuilt}"
    yield from _table_problems(getattr(cls, "inputs", None))
    history = cls.history
    if not isinstance(history, int) or isinstance(history, bool) or history < 1:
        yield f"history: expected an integer >= 1, found {history!r}"
    yield from _history_of_problems(cls)
    yield from _output_problems(getattr(cls, "outputs", None))
    yield from _requires_problems(getattr(cls, "requires", None), name)
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
    history_of: object = getattr(cls, "history_of", None)
    if not isinstance(history_of, Mapping):
        yield f"history_of: expected a mapping of table name to count, found {history_of!r}"
        return
    inputs = getattr(cls, "inputs", ())
    for table, count in history_of.items():
        if table not in inputs:
            yield f"history_of: {table!r} is not one of the declared inputs"
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            yield f"history_of[{table!r}]: expected an integer >= 1, found {count!r}"


def _page_problems(page: object, params: type[BaseModel]) -> Iterable[str]:
    if page is None:
        return
    if not isinstance(page, Page):
        yield f"page: expected None or a plugins.api.Page, found {page!r}"
        return
    if not isinstance(page.title, str) or not page.title.strip():
        yield f"page.title: expected a non-empty string, found {page.title!r}"
    if page.url_path and not (isinstance(page.url_path, str) and SLUG_PATTERN.match(page.url_path)):
        yield f"page.url_path: expected a kebab-case path, found {page.url_path!r}"
    unknown = [c for c in page.controls if c not in params.model_fields]
    if unknown:
        known = ", ".join(params.model_fields) or "none"
        yield f"page.controls: {', '.join(map(repr, unknown))} are not Params fields ({known})"


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


def _output_problems(outputs: Any) -> Iterable[str]:
    if (
        not isinstance(outputs, tuple)
        or not outputs
        or not all(isinstance(o, str) for o in outputs)
    ):
        yield f"outputs: expected a non-empty tuple of frame names, found {outputs!r}"
    elif len(set(outputs)) != len(outputs):
        yield f"outputs: expected unique frame names, found {outputs!r}"


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
