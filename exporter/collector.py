"""The /metrics endpoint: a Prometheus collector over the store, and the HTTP server for it.

At each scrape `LensCollector` reports the loop's own polls and the results passes that
analysed them (from a `PollRecorder`, which the collect process tells of both), the
dashboard's external URL when configured (`pulsar_lens_dashboard_info`, for alert links) and
the age of the newest stored snapshot; the cluster families (see `pulsar_lens.exporter.families`)
and the families every loaded plugin contributes through its `metrics(result, context)` hook
(read from its stored result of the newest snapshot) are built at most once per new snapshot
id. When the recorder tallies several clusters, all of that is done for each cluster's newest
snapshot (read through a `ClusterView`) and every family carries `cluster`.
Built-ins and third-party plugins go through the same hook (`pulsar_lens.exporter.contributions`);
a plugin whose analysis or hook fails, or whose families break the rules (not `pulsar_lens_*`,
a name taken), sets `pulsar_lens_plugin_errors{plugin}` and the scrape goes on without its
series. A plugin with no hook is there too when the store keeps results: 1 when its stored
analysis of the newest snapshot failed. The hooks that failed are also written beside the
stored results (`results/.metrics-hooks.json`, per cluster), so the dashboard says so on the
plugin's page.
After each poll the recorder reports, a background thread builds the new snapshot's families,
so a scrape never waits for the analyses: while that thread runs, a scrape answers with the
previous snapshot's families (Prometheus gives up on a scrape slower than its scrape_timeout).
Where it listens and its HTTP server: `pulsar_lens.exporter.server`.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pulsar_lens.core.parts import PluginLimits
from pulsar_lens.exporter.contributions import (
    contributions,
    discovered,
    names_of,
    stored_failures,
    write_hook_errors,
)
from pulsar_lens.exporter.facts import read_facts
from pulsar_lens.exporter.families import (
    CLUSTER_LABEL,
    DEFAULT_MAX_SUBSCRIPTIONS,
    PollStats,
    compute_analysis_pass_families,
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
        families.extend(compute_analysis_pass_families(self._recorder.passes()))
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
        plugins = self._loaded()  # discovers on the first call, which fills `_unloaded`
        contributed, failed, hooks = contributions(
            plugins,
            source,
            context,
            taken=names_of(cluster),
            reserved=reserved,
            stored_only=self._follows_analyses,
            closing=self._closing,
        )
        failed = [*self._unloaded, *failed]
        names = [p.name for p in plugins] + self._unloaded
        checked, silent_failed = stored_failures(source, self._silent)
        self._write_hook_errors(key, sid, hooks)
        return [
            *cluster,
            *contributed,
            *compute_plugin_error_families(names + checked, failed + silent_failed),
        ]

    def _loaded(self) -> list[Any]:
        if self._plugins is None:
            self._plugins, self._silent, self._unloaded = discovered(
                self._plugin_dirs, self._plugin_limits
            )
        return self._plugins

    def _write_hook_errors(self, key: str | None, sid: str, hooks: Mapping[str, str]) -> None:
        """Say which hooks failed for view `key`'s snapshot `sid` (under `_lock`: one build at
        a time writes the file); nothing for a store with no folder."""
        root = getattr(self._store, "root", None)
        if isinstance(root, str | os.PathLike):
            write_hook_errors(Path(root), key, sid, hooks, at=self._now().isoformat())
