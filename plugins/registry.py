"""Plugin discovery and load-time validation.

Three sources, loaded by an explicit `discover()` call (never at import):
built-ins (`pulsar_lens.plugins.builtin.BUILTIN_PLUGINS`), installed packages (entry-point group
`pulsar_lens.plugins`) and `*.py` drop-in files in the directories of PULSAR_LENS_PLUGIN_DIRS.
A plugin that fails to import or validate becomes a `PluginLoadError` in `Registry.failures`;
so does one whose `requires` names a plugin that is not loaded or forms a cycle.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.errors import (
    PluginLoadError,
    PluginRunError,
    PluginUnavailable,
    origin_of,
)
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.builtin import BUILTIN_PLUGINS
from pulsar_lens.plugins.isolation import (
    ENTRY_POINT_GROUP,
    PLUGIN_DIRS_ENV,
    Limits,
    Locator,
)
from pulsar_lens.plugins.validation import validate_plugin

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PLUGIN_DIRS_ENV",
    "LoadedPlugin",
    "Registry",
    "discover",
    "instance_of",
    "validate_plugin",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedPlugin:
    """A validated plugin instance and where it came from.

    `requirements` are the loaded plugins named in its `requires`, in that order, each with
    its own requirements: `discover()` links them, so the runner needs no registry.
    """

    plugin: AnalysisPlugin
    # "builtin pulsar_lens.plugins.builtin.x:Y", "entry point n = m:C (dist 1.0)", a file path
    source: str
    version: str
    isolated: bool = False
    """Its code runs in a limited worker process: set at load time for third-party code (entry
    points, drop-in files); built-ins run in the calling process."""
    limits: Limits = field(default_factory=Limits, repr=False, compare=False)
    """The time and memory its worker process may take (the settings' when it is isolated)."""
    requirements: tuple[LoadedPlugin, ...] = field(default=(), repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.plugin.name

    @property
    def title(self) -> str:
        return self.plugin.title

    @property
    def engine(self) -> str:
        return self.plugin.engine


def instance_of(plugin: AnalysisPlugin | LoadedPlugin) -> AnalysisPlugin:
    """The plugin object itself, whether given bare or as loaded."""
    return plugin.plugin if isinstance(plugin, LoadedPlugin) else plugin


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


def discover(
    *,
    builtins: bool = True,
    entry_points: bool = True,
    plugin_dirs: Sequence[str | os.PathLike[str]] = (),
    limits: Limits | None = None,
) -> Registry:
    """Load and validate plugins from the chosen sources.

    `plugin_dirs` are the drop-in directories (the settings' PULSAR_LENS_PLUGIN_DIRS); only
    these are read: drop-in files are arbitrary code. Third-party code is imported first, and
    later called, in a worker process under `limits` (the settings' plugin limits; default
    the built-in ones), which each loaded plugin keeps.
    """
    limits = limits or Limits()
    plugins: dict[str, LoadedPlugin] = {}
    failures: list[PluginLoadError] = []
    candidates: list[tuple[str, Any, bool]] = []  # source, object, isolated
    dirs = [Path(d).expanduser() for d in plugin_dirs]
    if entry_points or dirs:
        isolation.warm_for(dirs, entry_points=entry_points)  # beside the built-ins' imports
    if builtins:
        candidates.extend((s, o, False) for s, o in _builtin_candidates(failures))
    if entry_points:
        candidates.extend((s, o, True) for s, o in _entry_point_candidates(failures, limits))
    for directory in dirs:
        candidates.extend(
            (s, o, True) for s, o in _directory_candidates(directory, failures, limits)
        )
    for source, obj, isolated in candidates:
        try:
            loaded = _accept(obj, source, plugins, isolated=isolated, limits=limits)
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


def _accept(
    obj: Any, source: str, plugins: Mapping[str, LoadedPlugin], *, isolated: bool, limits: Limits
) -> LoadedPlugin:
    instance = validate_plugin(obj, source)
    other = plugins.get(instance.name)
    if other is not None:
        raise PluginLoadError(
            source,
            f"slug {instance.name!r} is already taken by the plugin from {other.source}; "
            "expected a unique name",
            plugin=instance.name,
        )
    return LoadedPlugin(
        plugin=instance,
        source=source,
        version=instance.version,
        isolated=isolated,
        limits=limits if isolated else Limits(),
    )


def _load_reference(reference: str) -> Any:
    module_name, _, qualname = reference.partition(":")
    with contextlib.redirect_stdout(sys.stderr):  # a print at import must not reach --json
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


def _entry_point_candidates(
    failures: list[PluginLoadError], limits: Limits
) -> Iterator[tuple[str, Any]]:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = f" ({ep.dist.name} {ep.dist.version})" if ep.dist is not None else ""
        source = f"entry point {ep.name} = {ep.value}{dist}"
        module = ep.value.partition(":")[0].strip()
        refused = isolation.probe_import(source, Locator("module", module, module), limits)
        if refused is not None:
            failures.append(_refused(source, refused))
            continue
        try:
            obj = ep.load()
        except Exception as exc:
            failures.append(_import_failure(source, exc))
            continue
        yield from _expand(source, obj)


def _directory_candidates(
    directory: Path, failures: list[PluginLoadError], limits: Limits
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
        refused = isolation.probe_import(str(path), locator, limits)
        if refused is not None:
            failures.append(_refused(str(path), refused))
            continue
        try:
            module = _import_file(path)
        except Exception as exc:
            failures.append(_import_failure(str(path), exc, home=str(path)))
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


def _import_file(path: Path) -> Any:
    module_name = _module_name(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with contextlib.redirect_stdout(sys.stderr):  # a print at import must not reach --json
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _refused(source: str, refused: PluginRunError) -> PluginLoadError:
    """The load failure of a file or module whose import failed in a worker."""
    return PluginLoadError(source, f"import failed: {refused.detail}", origin=refused.origin)


def _import_failure(source: str, exc: BaseException, *, home: str | None = None) -> PluginLoadError:
    """`exc` raised importing a plugin; `home` (a drop-in's file) is where its author looks."""
    error = PluginLoadError(
        source, f"import failed: {type(exc).__name__}: {exc}", origin=origin_of(exc, home=home)
    )
    error.__cause__ = exc
    return error
