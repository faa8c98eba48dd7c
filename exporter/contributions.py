"""What the plugins add to /metrics: the families of each loaded plugin's `metrics` hook, read
from its stored result of the newest snapshot, checked against the rules (named
`pulsar_lens_*`, no name taken twice, no label the exporter sets itself); which plugins without
a hook failed their stored analysis; and the hooks that failed, written beside the stored
results (`results/.metrics-hooks.json`, per cluster) for the dashboard to say so.

Built-ins and third-party plugins go through the same functions. `LensCollector` calls them
once per new snapshot (`pulsar_lens.exporter.collector`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric

from pulsar_lens.core import links
from pulsar_lens.core.errors import PluginError, ResultNotReady
from pulsar_lens.core.parts import PluginLimits
from pulsar_lens.core.secrets import clean
from pulsar_lens.exporter.facts import hook_entries, hook_errors_path

if TYPE_CHECKING:  # the analyses (and altair with them) load at the first scrape, not before
    from pulsar_lens.plugins.runner import SnapshotStore

log = logging.getLogger(__name__)

PREFIX = "pulsar_lens_"


def discovered(
    plugin_dirs: Sequence[str | os.PathLike[str]] = (), limits: PluginLimits | None = None
) -> tuple[list[Any], list[Any], list[str]]:
    """The loaded plugins with a `metrics` hook (built-in, entry point or drop-in from
    `plugin_dirs`, as `discover` takes them with `limits`), the light ones without, and the
    names of plugins that failed to load."""
    from pulsar_lens.api import AnalysisPlugin
    from pulsar_lens.plugins.engines import engine_of
    from pulsar_lens.plugins.registry import discover

    registry = discover(plugin_dirs=plugin_dirs, limits=limits)
    hooked = [p for p in registry if type(p.plugin).metrics is not AnalysisPlugin.metrics]
    silent = [p for p in registry if p not in hooked and engine_of(p).per_poll]
    return hooked, silent, [f.plugin or f.source for f in registry.failures]


def contributions(
    plugins: Sequence[Any],
    source: SnapshotStore,
    context: Any,
    *,
    taken: set[str],
    reserved: Sequence[str],
    stored_only: bool,
    closing: threading.Event,
) -> tuple[list[Metric], list[str], dict[str, str]]:
    """The families `plugins` contribute for the newest snapshot of `source` (their stored
    results only, with `stored_only`), the plugins that failed, and why each failed hook did.
    Stops at the next plugin once `closing` is set: nothing will scrape the rest."""
    from pulsar_lens.plugins import runner

    families: list[Metric] = []
    failed: list[str] = []
    hooks: dict[str, str] = {}
    taken = set(taken)
    for plugin in plugins:
        if closing.is_set():
            break
        name = getattr(plugin, "name", "?")
        try:
            # the collect process: its results pass stored what is presented here; the views
            # are a page's business
            result = runner.run(
                plugin, source, use_cache=False, stored_only=stored_only, views=False
            ).result
        except ResultNotReady:  # a Spark analysis before its first job: nothing to say yet
            continue
        except Exception as exc:  # one failing plugin must not break the scrape
            log.warning("/metrics: plugin %s contributed no series: %s", name, exc)
            failed.append(name)
            continue
        try:
            mine = runner.metrics(plugin, result, context)
            check_families(mine, taken, reserved=reserved)
        except Exception as exc:  # its hook: the analysis itself is fine
            log.warning("/metrics: the metrics() hook of plugin %s failed: %s", name, exc)
            failed.append(name)
            why = exc.detail if isinstance(exc, PluginError) else str(exc)
            hooks[name] = clean(why, limit=500)
            continue
        taken |= names_of(mine)
        families.extend(mine)
    return families, failed, hooks


def stored_failures(source: SnapshotStore, plugins: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Of the plugins without a hook: those whose stored result of the newest snapshot can be
    read, and those of them whose stored analysis failed (none without results)."""
    from pulsar_lens.plugins import runner

    results = runner.results_for(source)
    if results is None:
        return [], []
    checked: list[str] = []
    failed: list[str] = []
    for loaded in plugins:
        plugin = loaded.plugin
        try:
            window = runner.snapshot_window(plugin, source)
            ids = [str(s) for s in window["snapshot_id"]]
            params = runner.validate_params(plugin, None).model_dump(mode="json")
            stored = results.read(plugin.name, plugin.version, params, ids)
        except Exception as exc:  # reading it must not break the scrape
            log.warning("/metrics: the stored result of %s is unreadable: %s", plugin.name, exc)
            continue
        checked.append(plugin.name)
        if stored is not None and stored.status == "failed":
            failed.append(plugin.name)
    return checked, failed


def write_hook_errors(
    root: Path, key: str | None, sid: str, hooks: Mapping[str, str], *, at: str
) -> None:
    """Say which hooks failed for cluster `key`'s snapshot `sid` (None: the store's), beside
    the other clusters' entries; the caller writes one at a time."""
    path = hook_errors_path(root)
    try:
        entries = hook_entries(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):  # none yet, or unreadable: start again
        entries = {}
    entries[key or ""] = {"snapshot_id": sid, "at": at, "failed": dict(hooks)}
    text = json.dumps({"clusters": entries})
    staging = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        links.real_folder(root, path.parent.relative_to(root))  # never through a link
        staging.write_text(text, encoding="utf-8")
        os.replace(staging, path)
    except OSError as exc:  # e.g. a read-only store: /metrics still answers
        log.warning("could not write %s: %s", path, exc)


def names_of(families: Sequence[Metric]) -> set[str]:
    return {f.name for f in families}


def check_families(families: Any, taken: set[str], *, reserved: Sequence[str] = ()) -> None:
    """A plugin's families: Prometheus metric families named pulsar_lens_*, none taken, no
    sample labelled with a `reserved` label (`cluster`, which the exporter sets itself)."""
    if not isinstance(families, list | tuple):
        raise TypeError(f"metrics() must return a list of metric families, found {type(families)}")
    seen: set[str] = set()
    for family in families:
        if not isinstance(family, Metric):
            raise TypeError(f"metrics() returned {type(family).__name__}, not a metric family")
        if not family.name.startswith(PREFIX):
            raise ValueError(f"metric {family.name!r} must be named {PREFIX}*")
        if family.name in taken or family.name in seen:
            raise ValueError(f"metric {family.name!r} is already exported")
        if clash := sorted({k for s in family.samples for k in s.labels} & set(reserved)):
            raise ValueError(f"metric {family.name!r} has the label {clash[0]!r}, set by /metrics")
        seen.add(family.name)
