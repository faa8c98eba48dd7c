"""The /metrics endpoint: a Prometheus collector over the store, and the HTTP server for it.

At each scrape `LensCollector` reports the loop's own polls (from a `PollRecorder`), the
dashboard's external URL when configured (`pulsar_lens_dashboard_info`, for alert links) and the
age of the newest stored snapshot; the cluster families (see `pulsar_lens.exporter.families`)
and the families every loaded plugin contributes through its `metrics(result, context)` hook
(read from its stored result of the newest snapshot) are built at most once per new snapshot
id. When the recorder tallies several clusters, all of that is done for each cluster's newest
snapshot (read through a `ClusterView`) and every family carries `cluster`.
Built-ins and third-party plugins go through the same hook; a plugin whose analysis or hook
fails, or whose families break the rules (not `pulsar_lens_*`, a name taken), sets
`pulsar_lens_plugin_errors{plugin}` and the scrape goes on without its series. A plugin with
no hook is there too when the store keeps results: 1 when its stored analysis of the newest
snapshot failed. The hooks that failed are also written beside the stored results
(`results/.metrics-hooks.json`, per cluster), so the dashboard says so on the plugin's page.
After each poll the recorder reports, a background thread builds the new snapshot's families,
so a scrape never waits for the analyses: while that thread runs, a scrape answers with the
previous snapshot's families (Prometheus gives up on a scrape slower than its scrape_timeout).
Where it listens and its HTTP server: `pulsar_lens.exporter.server`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pulsar_lens.core import links
from pulsar_lens.core.errors import PluginError, ResultNotReady
from pulsar_lens.core.parts import PluginLimits
from pulsar_lens.core.secrets import clean
from pulsar_lens.exporter.facts import hook_entries, hook_errors_path, read_facts
from pulsar_lens.exporter.families import (
    CLUSTER_LABEL,
    DEFAULT_MAX_SUBSCRIPTIONS,
    PollStats,
    compute_cluster_families,
    compute_cluster_health_families,
    compute_collector_families,
    compute_dashboard_families,
    compute_plugin_error_families,
    top_subscriptions,
    with_cluster_label,
)
from pulsar_lens.exporter.polls import PollRecorder as PollRecorder  # where callers import it from

if TYPE_CHECKING:  # the analyses (and altair with them) load at the first scrape, not before
    from pulsar_lens.plugins.runner import SnapshotStore

log = logging.getLogger(__name__)

PREFIX = "pulsar_lens_"


def exporting_plugins(
    plugin_dirs: Sequence[str | os.PathLike[str]] = (), limits: PluginLimits | None = None
) -> tuple[list[Any], list[str]]:
    """Every loaded plugin with a `metrics` hook (built-in, entry point or drop-in from
    `plugin_dirs`, as `discover` takes them with `limits`), and the names of plugins that
    failed to load."""
    loaded, _, unloaded = _discovered(plugin_dirs, limits)
    return loaded, unloaded


def _discovered(
    plugin_dirs: Sequence[str | os.PathLike[str]] = (), limits: PluginLimits | None = None
) -> tuple[list[Any], list[Any], list[str]]:
    """The loaded plugins with a `metrics` hook, the light ones without, and the names of
    plugins that failed to load."""
    from pulsar_lens.api import AnalysisPlugin
    from pulsar_lens.plugins.engines import engine_of
    from pulsar_lens.plugins.registry import discover

    registry = discover(plugin_dirs=plugin_dirs, limits=limits)
    hooked = [p for p in registry if type(p.plugin).metrics is not AnalysisPlugin.metrics]
    silent = [p for p in registry if p not in hooked and engine_of(p).per_poll]
    return hooked, silent, [f.plugin or f.source for f in registry.failures]


Newest = tuple[str, dt.datetime, Mapping[str, Any]]  # snapshot id, collected at, index row


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LensCollector(Collector):
    """Prometheus collector over a store; analyses cached by the newest snapshot id."""

    def __init__(
        self,
        store: SnapshotStore,
        *,
        recorder: PollRecorder | None = None,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        plugins: Sequence[Any] | None = None,
        plugin_dirs: Sequence[str | os.PathLike[str]] = (),
        plugin_limits: PluginLimits | None = None,
        dashboard_url: str = "",
        now: Callable[[], dt.datetime] = utcnow,
        refresh_on_record: bool = True,
    ) -> None:
        """`plugins` None: the ones `discover(plugin_dirs=..., limits=plugin_limits)` loads,
        at first use. `dashboard_url`: the dashboard's external URL, served as
        `pulsar_lens_dashboard_info{url}` ('' : not served).

        `refresh_on_record`: build a new snapshot's families as soon as the recorder tallies
        its poll. False: only when `refresh()` is called, which the collect process does once
        the results pass has stored the plugins' results, so that this reads them instead of
        analysing beside it; until then a scrape answers the families built last."""
        self._dashboard_url = dashboard_url
        self._store = store
        self._plugin_dirs = plugin_dirs
        self._plugin_limits = plugin_limits
        self._recorder = recorder or PollRecorder()
        self._max = max_subscriptions
        self._plugins: list[Any] | None = None if plugins is None else list(plugins)
        self._unloaded: list[str] = []
        self._silent: list[Any] = []  # loaded plugins without a hook (when discovered here)
        self._now = now
        self._lock = threading.Lock()
        # by cluster (None: the whole store): the snapshot id, time and families built last
        self._cached: dict[str | None, tuple[str, dt.datetime, list[Metric]]] = {}
        self._refreshing = threading.Event()
        self._refresher: threading.Thread | None = None
        self._closing = threading.Event()
        self.computations = 0  # how many times the snapshot families were computed
        self._follows_analyses = not refresh_on_record
        if refresh_on_record:
            self._recorder.on_record(self._after_poll)

    def collect(self) -> Iterable[Metric]:
        now = self._now()
        # one tally for the whole scrape: a cluster whose first poll is counted between two
        # reads of it would get its poll health without the snapshot that poll stored
        tally = self._recorder.by_cluster()
        views = self._views(tally)
        newest = {key: self._newest(source) for key, source in views.items()}
        families = self._health(tally, newest, now)
        families.append(self._quarantined())
        families.extend(compute_dashboard_families(self._dashboard_url))
        built = {
            key: self._snapshot_families(key, source, *found, scrape=True)
            for key, source in views.items()
            if (found := newest[key]) is not None
        }
        if None in views:
            families.extend(built.get(None, []))
        else:
            families.extend(self._labelled(built))
        return families

    def _views(self, tally: Mapping[str, PollStats]) -> dict[str | None, SnapshotStore]:
        """What the snapshot families are built from: the store (key None), or the view of
        each cluster of the recorder's `tally` when it polls several."""
        clusters = sorted(tally)
        if not clusters:
            return {None: self._store}
        from pulsar_lens.core.clusterview import ClusterView

        return {name: ClusterView(self._store, name) for name in clusters}  # type: ignore[arg-type]

    def _labelled(self, built: Mapping[str | None, Sequence[Metric]]) -> list[Metric]:
        """Each cluster's families as one set, labelled `cluster` (nothing on a failure)."""
        try:
            return with_cluster_label({str(k): v for k, v in built.items()})
        except ValueError:  # _check_families refuses such plugin families before they get here
            log.exception("labelling the families of each cluster for /metrics failed")
            return []

    def _health(
        self,
        of: Mapping[str, PollStats],
        newest: Mapping[str | None, Newest | None],
        now: dt.datetime,
    ) -> list[Metric]:
        """The poll health families (per cluster of the tally `of` when the polls name their
        clusters), with the age of each view's `newest` snapshot."""
        at = {key: found[1] if found else None for key, found in newest.items()}
        if not of:
            return compute_collector_families(self._recorder.stats(), newest_at=at[None], now=now)
        return compute_cluster_health_families(
            of, newest_at={str(k): v for k, v in at.items()}, now=now
        )

    def refresh(self) -> None:
        """Build the newest snapshot's families now, off the scrape path."""
        self._after_poll()

    def _after_poll(self) -> None:
        """Start building the new snapshot's families off the scrape path (one thread at a
        time; a thread already running picks up the newer snapshot when it is done)."""
        if self._refreshing.is_set():
            return
        self._refreshing.set()
        refresher = threading.Thread(target=self._refresh, name="metrics-refresh", daemon=True)
        self._refresher = refresher
        refresher.start()

    def close(self, timeout: float = 30.0) -> None:
        """Wait (at most `timeout` s) for a refresh under way: a thread left inside pyarrow
        when the process exits deadlocks arrow's thread pool at exit. The refresh stops at
        its next plugin: running every plugin to the end held a stopping process for as long
        as a whole round of analyses took."""
        self._closing.set()
        refresher = self._refresher
        if refresher is not None:
            refresher.join(timeout)

    def _refresh(self) -> None:
        """Build the families of each view's newest snapshot until none is newer than what
        was built (a poll may store another meanwhile)."""
        try:
            done: dict[str | None, str] = {}
            moved = True
            while moved and not self._closing.is_set():
                moved = False
                for key, source in self._views(self._recorder.by_cluster()).items():
                    newest = self._newest(source)
                    if self._closing.is_set() or newest is None or done.get(key) == newest[0]:
                        continue
                    # following the analyses, their results are newer than what was built
                    self._snapshot_families(key, source, *newest, rebuild=self._follows_analyses)
                    done[key] = newest[0]
                    moved = True
        finally:
            self._refreshing.clear()

    def _quarantined(self) -> Metric:
        gauge = GaugeMetricFamily(
            "pulsar_lens_store_quarantined_files",
            "Files found in the store that could not be read as its tables (corrupt, empty, "
            "foreign) and were moved to its quarantine/ folder.",
        )
        counter = getattr(self._store, "quarantined_files", None)
        try:
            gauge.add_metric([], float(counter() if counter else 0))
        except OSError:
            log.exception("counting quarantined store files failed")
        return gauge

    def _newest(self, source: SnapshotStore) -> Newest | None:
        """The id, time and index row of the newest snapshot of `source`; None without one."""
        try:
            index = source.snapshots(limit=1)
        except Exception:  # a scrape must answer even when the store cannot be read
            log.exception("reading the snapshot index for /metrics failed")
            return None
        if not len(index):
            return None
        row = index.iloc[-1].to_dict()
        at = pd.Timestamp(row["collected_at"]).to_pydatetime()
        return str(row["snapshot_id"]), at, row

    def _snapshot_families(
        self,
        key: str | None,
        source: SnapshotStore,
        sid: str,
        collected_at: dt.datetime,
        index_row: Mapping[str, Any],
        *,
        scrape: bool = False,
        rebuild: bool = False,
    ) -> list[Metric]:
        """The families of snapshot `sid` of view `key`, built once per new snapshot (again
        with `rebuild`)."""
        if scrape and (ready := self._ready(key, sid, collected_at)) is not None:
            return ready
        with self._lock:  # concurrent scrapes of a new snapshot compute it once
            if scrape and (ready := self._ready(key, sid, collected_at)) is not None:
                return ready  # built (or being rebuilt) by the refresh thread meanwhile
            cached = self._cached.get(key)
            if cached is None or cached[0] != sid or rebuild:
                try:
                    families = self._compute(source, sid, collected_at, index_row, key=key)
                except Exception:
                    log.exception("computing /metrics for snapshot %s failed", sid)
                    return []
                cached = self._cached[key] = (sid, collected_at, families)
            return cached[2]

    def _ready(self, key: str | None, sid: str, collected_at: dt.datetime) -> list[Metric] | None:
        """What a scrape answers at once: `sid`'s families, or the last built while the
        refresh thread builds newer ones or when they are newer than `sid`; None when the
        scrape must build them itself."""
        cached = self._cached.get(key)
        if cached is None:
            return None
        if cached[0] == sid or cached[1] >= collected_at or self._refreshing.is_set():
            return cached[2]
        if self._follows_analyses:  # built once the analyses of `sid` are stored
            return cached[2]
        return None

    def _compute(
        self,
        source: SnapshotStore,
        sid: str,
        collected_at: dt.datetime,
        index_row: Mapping[str, Any],
        *,
        key: str | None,
    ) -> list[Metric]:
        self.computations += 1
        facts = read_facts(source, sid, collected_at, index_row)
        keep = top_subscriptions(facts.subscriptions, self._max)
        from pulsar_lens.api import MetricsContext

        cluster = compute_cluster_families(facts, keep=keep)
        context = MetricsContext(subscriptions=tuple(keep), max_groups=self._max)
        reserved = () if key is None else (CLUSTER_LABEL,)
        contributed, failed, hooks = self._contributed(
            source, context, taken=_names(cluster), reserved=reserved
        )
        names = [p.name for p in self._loaded()] + self._unloaded
        checked, silent_failed = self._stored_failures(source, self._silent)
        self._write_hook_errors(key, sid, hooks)
        return [
            *cluster,
            *contributed,
            *compute_plugin_error_families(names + checked, failed + silent_failed),
        ]

    def _loaded(self) -> list[Any]:
        if self._plugins is None:
            self._plugins, self._silent, self._unloaded = _discovered(
                self._plugin_dirs, self._plugin_limits
            )
        return self._plugins

    def _contributed(
        self, source: SnapshotStore, context: Any, *, taken: set[str], reserved: Sequence[str]
    ) -> tuple[list[Metric], list[str], dict[str, str]]:
        """The plugins' families, the plugins that failed, and why each failed hook did."""
        from pulsar_lens.plugins import runner

        families: list[Metric] = []
        plugins = self._loaded()  # discovers on the first call, which fills `_unloaded`
        failed = list(self._unloaded)
        hooks: dict[str, str] = {}
        for plugin in plugins:
            if self._closing.is_set():
                break  # closed: nothing will scrape what the other plugins contribute
            name = getattr(plugin, "name", "?")
            try:
                # the collect process: its results pass stored what is presented here;
                # the views are a page's business
                result = runner.run(
                    plugin,
                    source,
                    use_cache=False,
                    stored_only=self._follows_analyses,
                    views=False,
                ).result
            except ResultNotReady:  # a Spark analysis before its first job: nothing to say yet
                continue
            except Exception as exc:  # one failing plugin must not break the scrape
                log.warning("/metrics: plugin %s contributed no series: %s", name, exc)
                failed.append(name)
                continue
            try:
                mine = runner.metrics(plugin, result, context)
                _check_families(mine, taken, reserved=reserved)
            except Exception as exc:  # its hook: the analysis itself is fine
                log.warning("/metrics: the metrics() hook of plugin %s failed: %s", name, exc)
                failed.append(name)
                why = exc.detail if isinstance(exc, PluginError) else str(exc)
                hooks[name] = clean(why, limit=500)
                continue
            taken |= _names(mine)
            families.extend(mine)
        return families, failed, hooks

    def _stored_failures(
        self, source: SnapshotStore, plugins: Sequence[Any]
    ) -> tuple[list[str], list[str]]:
        """Of the plugins without a hook: those whose stored result of the newest snapshot
        can be read, and those of them whose stored analysis failed (none without results)."""
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

    def _write_hook_errors(self, key: str | None, sid: str, hooks: Mapping[str, str]) -> None:
        """Say which hooks failed for view `key`'s snapshot `sid`, beside the other clusters'
        (under `_lock`: one build at a time writes the file)."""
        root = getattr(self._store, "root", None)
        if not isinstance(root, str | os.PathLike):
            return
        path = hook_errors_path(root)
        try:
            entries = hook_entries(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):  # none yet, or unreadable: start again
            entries = {}
        at = self._now().isoformat()
        entries[key or ""] = {"snapshot_id": sid, "at": at, "failed": dict(hooks)}
        text = json.dumps({"clusters": entries})
        staging = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            links.real_folder(Path(root), path.parent.relative_to(root))  # never through a link
            staging.write_text(text, encoding="utf-8")
            os.replace(staging, path)
        except OSError as exc:  # e.g. a read-only store: /metrics still answers
            log.warning("could not write %s: %s", path, exc)


def _names(families: Sequence[Metric]) -> set[str]:
    return {f.name for f in families}


def _check_families(families: Any, taken: set[str], *, reserved: Sequence[str] = ()) -> None:
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
