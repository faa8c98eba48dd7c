"""What `pulsar-lens plugins` lists, without importing third-party code in this process.

`discover()` imports a drop-in or an entry point's module twice: in a worker first (so one
that hangs, exits or crashes at import is a load failure), then here, to run it. A listing
runs nothing, so the worker alone imports it, validates its plugin classes as `discover()`
does (`registry.validated`) and sends back what the listing shows of each (`PluginInfo`),
or the load failure. Built-ins are imported here, as `discover()` does; slugs taken twice and
requirements are decided here over both (`registry.accept`, `registry.ready`).

What the workers answered is kept in the listing cache (`listcache`): a run whose key is
unchanged starts no worker at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pulsar_lens.core.errors import PluginLoadError, PluginRunError
from pulsar_lens.core.origin import Origin
from pulsar_lens.plugins import isolation
from pulsar_lens.plugins.isolation import Limits
from pulsar_lens.plugins.listcache import ListingCache
from pulsar_lens.plugins.sources import (
    Source,
    candidates_of,
    import_failure,
    refused,
    resolve,
    sources,
)

__all__ = ["Answer", "Failure", "Listing", "PluginInfo", "describe", "list_plugins"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PluginInfo:
    """What the listing shows of a loaded plugin."""

    name: str
    title: str
    version: str
    engine: str
    api_version: int
    requires: tuple[str, ...]
    source: str

    @classmethod
    def of(cls, loaded: Any) -> PluginInfo:
        """The info of a `registry.LoadedPlugin`."""
        plugin = loaded.plugin
        return cls(
            name=loaded.name,
            title=loaded.title,
            version=loaded.version,
            engine=loaded.engine,
            api_version=plugin.api_version,
            requires=tuple(plugin.requires),
            source=loaded.source,
        )


@dataclass(frozen=True)
class Failure:
    """A `PluginLoadError` as data, to cross from the worker by pickle (an exception whose
    constructor takes more than its message does not)."""

    source: str
    message: str
    plugin: str | None = None
    origin: Origin | None = None
    file: str | None = None
    line: int | None = None

    @classmethod
    def of(cls, error: PluginLoadError) -> Failure:
        return cls(error.source, error.message, error.plugin, error.origin, error.file, error.line)

    def error(self) -> PluginLoadError:
        return PluginLoadError(
            self.source,
            self.message,
            self.plugin,
            origin=self.origin,
            file=self.file,
            line=self.line,
        )


Answer = Failure | tuple[tuple[str, PluginInfo | Failure], ...]
"""What a worker says of one source: its import failed (or found no `PLUGINS`), or each
plugin class it stands for, by source, validated or refused."""


@dataclass(frozen=True)
class Listing:
    """The plugins that loaded, by slug, and the load failures, as `discover()` finds them."""

    plugins: Mapping[str, PluginInfo] = field(default_factory=dict)
    failures: list[PluginLoadError] = field(default_factory=list)
    from_cache: bool = False
    """The third-party answers came from the listing cache: no worker was started."""


def list_plugins(
    *,
    plugin_dirs: Sequence[str | os.PathLike[str]] = (),
    limits: Limits | None = None,
    cache_dir: Path | None = None,
    fresh: bool = False,
) -> Listing:
    """The listing of the built-ins, the entry points and the drop-ins of `plugin_dirs`.

    `cache_dir` (None: no cache) holds the workers' answers; `fresh` asks the workers again
    whatever it holds, and refreshes it.
    """
    limits = limits or Limits()
    dirs = [Path(d).expanduser() for d in plugin_dirs]
    found = sources(entry_points=True, dirs=dirs)
    probes = list({f.source: f for f in found if isinstance(f, Source)}.values())
    cache = None
    if cache_dir is not None and probes:  # the built-ins alone are listed without a worker
        cache = ListingCache.for_sources(cache_dir, probes, dirs, limits)
    answers = None if fresh or cache is None else _cached(cache, probes)
    if probes and answers is None:
        with contextlib.suppress(OSError):  # the first probe starts it again, and says why
            isolation.warm()  # its preload runs beside this process's imports of the built-ins
    from pulsar_lens.plugins import registry  # the API and the built-ins: after that start

    failures: list[PluginLoadError] = []
    candidates: list[tuple[str, Callable[[], PluginInfo]]] = [
        (s, partial(_builtin_info, o, s)) for s, o in registry.builtin_candidates(failures)
    ]
    from_cache = answers is not None
    if answers is None:
        answers = {p.source: _probe(p, limits) for p in probes}
        if cache is not None:
            _keep(cache, answers)
    candidates.extend(_answered(found, answers, failures))
    plugins = registry.accept(candidates, failures)
    return Listing(registry.ready(plugins, failures), failures, from_cache=from_cache)


def _answered(
    found: Sequence[Source | PluginLoadError],
    answers: Mapping[str, Answer],
    failures: list[PluginLoadError],
) -> Iterator[tuple[str, Callable[[], PluginInfo]]]:
    """The candidates of the third-party sources, in order, from the workers' answers; a
    source that failed goes to `failures` (as `discover()` does before it accepts any)."""
    for item in found:
        if isinstance(item, PluginLoadError):
            failures.append(item)
            continue
        answer = answers[item.source]
        if isinstance(answer, Failure):
            failures.append(answer.error())
            continue
        yield from ((s, partial(_known, outcome)) for s, outcome in answer)


def _builtin_info(obj: Any, source: str) -> PluginInfo:
    from pulsar_lens.plugins.registry import validated

    return PluginInfo.of(validated(obj, source, isolated=False, limits=Limits()))


def _known(outcome: PluginInfo | Failure) -> PluginInfo:
    if isinstance(outcome, Failure):
        raise outcome.error()
    return outcome


def _probe(found: Source, limits: Limits) -> Answer:
    try:
        answer: Answer = isolation.probe(
            found.source, found.locator, limits, partial(describe, found, limits)
        )
    except PluginRunError as exc:
        return Failure.of(refused(found.source, exc))
    return answer


def describe(found: Source, limits: Limits, module: Any) -> Answer:
    """What the listing needs of a source whose `module` a worker imported: run there, with
    the code `discover()` runs on it here."""
    from pulsar_lens.plugins.registry import validated

    try:
        obj = resolve(found, module)
    except Exception as exc:
        return Failure.of(import_failure(found.source, exc, home=found.home))
    try:
        pairs = candidates_of(found, obj)
    except PluginLoadError as exc:
        return Failure.of(exc)
    described: list[tuple[str, PluginInfo | Failure]] = []
    for source, cls in pairs:
        try:
            info = PluginInfo.of(validated(cls, source, isolated=True, limits=limits))
        except PluginLoadError as exc:
            described.append((source, Failure.of(exc)))
        else:
            described.append((source, info))
    return tuple(described)


def _keep(cache: ListingCache, answers: Mapping[str, Answer]) -> None:
    """Keep the answers when every source loaded and every plugin validated; else remove
    the entry (why: `listcache`)."""
    kept: dict[str, list[Any]] = {}
    for source, answer in answers.items():
        if isinstance(answer, Failure) or any(isinstance(o, Failure) for _, o in answer):
            cache.forget()
            return
        kept[source] = [[s, dataclasses.asdict(o)] for s, o in answer]
    cache.write(kept)


def _cached(cache: ListingCache, probes: Sequence[Source]) -> dict[str, Answer] | None:
    """The answers the cache keeps for these sources; None on a miss, or when its entry is
    not what `_keep` writes."""
    kept = cache.read()
    if kept is None:
        return None
    try:
        if set(kept) != {p.source for p in probes}:
            raise ValueError("other sources")
        return {source: tuple(_info_pair(pair) for pair in kept[source]) for source in kept}
    except (TypeError, ValueError) as exc:
        log.info("the plugin listing cache %s is damaged (%s); asking again", cache.path, exc)
        return None


def _info_pair(pair: Any) -> tuple[str, PluginInfo]:
    source, data = pair
    if not isinstance(source, str) or not isinstance(data, dict):
        raise TypeError(f"expected a source and its plugin, found {pair!r}")
    names = {f.name for f in dataclasses.fields(PluginInfo)}
    if set(data) != names:
        raise ValueError(f"expected the fields {sorted(names)}, found {sorted(data)}")
    texts = [data[k] for k in ("name", "title", "version", "engine", "source")]
    requires = data["requires"]
    api = data["api_version"]
    if not all(isinstance(t, str) for t in texts) or type(api) is not int:
        raise TypeError(f"expected texts and a whole api_version, found {data!r}")
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise TypeError(f"expected requires as a list of slugs, found {requires!r}")
    return source, PluginInfo(**{**data, "requires": tuple(requires)})
