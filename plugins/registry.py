"""Plugin discovery and load-time validation.

Three sources, loaded by an explicit `discover()` call (never at import):
built-ins (`pulsar_lens.plugins.builtin.BUILTIN_PLUGINS`), installed packages (entry-point group
`pulsar_lens.plugins`) and `*.py` drop-in files in the directories of PULSAR_LENS_PLUGIN_DIRS.
A plugin that fails to import or validate becomes a `PluginLoadError` in `Registry.failures`;
so does one whose `requires` names a plugin that is not loaded or forms a cycle.
`pulsar-lens plugins` lists them with `listing.list_plugins`, which shares the sources
(`sources.py`), the validation (`validated`), the slug check (`accept`) and the requirements
(`ready`) with `discover()` but imports third-party code only in workers.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.errors import PluginLoadError, PluginUnavailable
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.builtin import BUILTIN_PLUGINS
from pulsar_lens.plugins.isolation import ENTRY_POINT_GROUP, PLUGIN_DIRS_ENV, Limits
from pulsar_lens.plugins.sources import (
    Source,
    candidates_of,
    import_failure,
    import_in_process,
    refused,
    sources,
)
from pulsar_lens.plugins.validation import validate_plugin

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PLUGIN_DIRS_ENV",
    "Listed",
    "LoadedPlugin",
    "Registry",
    "accept",
    "builtin_candidates",
    "discover",
    "instance_of",
    "ready",
    "validate_plugin",
    "validated",
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

    @property
    def requires(self) -> tuple[str, ...]:
        return tuple(self.plugin.requires)


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
    failures: list[PluginLoadError] = []
    candidates: list[tuple[str, Callable[[], LoadedPlugin]]] = []
    dirs = [Path(d).expanduser() for d in plugin_dirs]
    if entry_points or dirs:
        isolation.warm_for(dirs, entry_points=entry_points)  # beside the built-ins' imports
    if builtins:
        candidates.extend(
            (s, partial(validated, o, s, isolated=False, limits=limits))
            for s, o in builtin_candidates(failures)
        )
    for found in sources(entry_points=entry_points, dirs=dirs):
        try:
            pairs = _imported(found, limits)
        except PluginLoadError as exc:
            failures.append(exc)
            continue
        candidates.extend(
            (s, partial(validated, o, s, isolated=True, limits=limits)) for s, o in pairs
        )
    plugins = accept(candidates, failures)
    return Registry(plugins=_link_requirements(plugins, failures), failures=failures)


def _imported(found: Source | PluginLoadError, limits: Limits) -> list[tuple[str, Any]]:
    """The candidates of a third-party source, imported in a worker first and then here;
    PluginLoadError when either import failed (or `found` is a failure already)."""
    if isinstance(found, PluginLoadError):
        raise found
    refusal = isolation.probe_import(found.source, found.locator, limits)
    if refusal is not None:
        raise refused(found.source, refusal)
    try:
        obj = import_in_process(found)
    except Exception as exc:
        raise import_failure(found.source, exc, home=found.home) from exc
    return candidates_of(found, obj)


class Listed(Protocol):
    """What acceptance and requirements need of a plugin: a `LoadedPlugin`, or what a
    listing knows of one (`listing.PluginInfo`)."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def requires(self) -> tuple[str, ...]: ...


ListedT = TypeVar("ListedT", bound=Listed)


def accept(
    candidates: Iterable[tuple[str, Callable[[], ListedT]]], failures: list[PluginLoadError]
) -> dict[str, ListedT]:
    """The candidates that validate (each callable validates one, or raises PluginLoadError)
    and whose slug is not taken by an earlier one, by slug; the others become failures."""
    accepted: dict[str, ListedT] = {}
    for source, validate in candidates:
        try:
            item = validate()
            other = accepted.get(item.name)
            if other is not None:
                raise PluginLoadError(
                    source,
                    f"slug {item.name!r} is already taken by the plugin from {other.source}; "
                    "expected a unique name",
                    plugin=item.name,
                )
        except PluginLoadError as exc:
            log.warning("%s", exc)
            failures.append(exc)
        else:
            accepted[item.name] = item
    return accepted


def _link_requirements(
    plugins: Mapping[str, LoadedPlugin], failures: list[PluginLoadError]
) -> dict[str, LoadedPlugin]:
    """The plugins whose requirements are all loaded and acyclic, each linked to them."""
    kept = ready(plugins, failures)
    linked: dict[str, LoadedPlugin] = {}

    def link(slug: str) -> LoadedPlugin:
        if slug not in linked:
            loaded = kept[slug]
            requirements = tuple(link(r) for r in loaded.plugin.requires)
            linked[slug] = replace(loaded, requirements=requirements) if requirements else loaded
        return linked[slug]

    return {slug: link(slug) for slug in kept}


def ready(plugins: Mapping[str, ListedT], failures: list[PluginLoadError]) -> dict[str, ListedT]:
    """The plugins whose requirements are all loaded and acyclic; the others become failures.

    Refusing one can leave its dependants short of a requirement, so this repeats until
    nothing more is refused.
    """
    kept = dict(plugins)
    while True:
        refused_now = _unmet(kept, failures) or _cyclic(kept)
        if not refused_now:
            return kept
        for slug, message in refused_now.items():
            item = kept.pop(slug)
            error = PluginLoadError(item.source, message, plugin=slug)
            log.warning("%s", error)
            failures.append(error)


def _unmet(kept: Mapping[str, Listed], failures: list[PluginLoadError]) -> dict[str, str]:
    """Why each plugin requiring one that is not loaded is refused, by slug."""
    failed = {f.plugin for f in failures if f.plugin is not None}
    refused: dict[str, str] = {}
    for slug, loaded in kept.items():
        missing = [r for r in loaded.requires if r not in kept]
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


def _cyclic(kept: Mapping[str, Listed]) -> dict[str, str]:
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


def _path_back(start: str, kept: Mapping[str, Listed]) -> list[str] | None:
    """The shortest chain of requirements from `start` back to itself, or None."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for slug in frontier:
            for required in kept[slug].requires:
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


def validated(obj: Any, source: str, *, isolated: bool, limits: Limits) -> LoadedPlugin:
    """`obj` checked against the contract (`validate_plugin`), as loaded from `source`."""
    instance = validate_plugin(obj, source)
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


def builtin_candidates(failures: list[PluginLoadError]) -> Iterator[tuple[str, Any]]:
    """The built-ins' (source, class) pairs, imported here; an import failure goes to
    `failures`."""
    for reference in BUILTIN_PLUGINS:
        source = f"builtin {reference}"
        try:
            yield source, _load_reference(reference)
        except Exception as exc:
            failures.append(import_failure(source, exc))
