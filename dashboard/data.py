"""The dashboard's data access: the only module with st.cache_data / st.cache_resource.

Tables are cached by (store root, snapshot id, table): a snapshot never changes once written,
so only the index is re-read often (short ttl). Plugin results come from the runner: the one
stored for the newest snapshot when the params are the defaults, else analysed and cached
under core.digest.cache_key(plugin, version, params, snapshot ids).

A store several clusters share is read one cluster at a time: the one chosen in the sidebar
(`chosen_cluster`, by default the cluster of the newest poll). The index, the poll status and
the plugin runs then see that cluster's snapshots only (`pulsar_lens.core.clusterview.ClusterView`).

A page can be shown as of a past snapshot (`chosen_snapshot`, set by the sidebar's time
control, `dashboard.timetravel`): the view then also ends at that snapshot, so every table
read, the poll status and every plugin run see the store as the collector left it then. The
Spark plugins, which show their newest stored job result, are not time-travelled.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import streamlit as st

from pulsar_lens.collectors.health import HealthReport, read_health
from pulsar_lens.core.clusterview import ClusterView, clusters_in
from pulsar_lens.core.errors import PluginError, SettingsError
from pulsar_lens.core.parts import PluginLimits, use_charset_setting
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard import forms, frames
from pulsar_lens.exporter.facts import read_hook_errors
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.isolation import limits_of
from pulsar_lens.plugins.registry import LoadedPlugin, Registry, discover

log = logging.getLogger(__name__)

INDEX_TTL_SECONDS = 2.0
CLUSTER_KEY = "sidebar_cluster"
SNAPSHOT_KEY = "sidebar_at"  # the snapshot id shown; "" (or absent) for the newest


def settings() -> Settings:
    """The PULSAR_* settings, read once per server process while the environment and the
    settings file stay the same (`Settings.current`), though Streamlit runs the page script
    anew for every interaction; a malformed value falls back to the defaults (and is logged).
    The JVM charset setting goes to the params validated here."""
    try:
        loaded = Settings.current()
    except SettingsError as exc:
        log.warning("ignoring malformed settings: %s", exc)
        loaded = Settings()
    use_charset_setting(loaded.jvm_charset)
    return loaded


def store_root() -> str:
    """The store directory (PULSAR_LENS_STORE, else ./var/store) as an absolute path."""
    return str(Path(settings().store_dir).resolve())


def poll_interval_seconds() -> float:
    return settings().poll_interval.total_seconds()


@st.cache_resource(max_entries=4)
def get_store(root: str) -> Store:
    return Store(root)


@st.cache_resource(ttl=3600, max_entries=4)
def _discover(
    plugin_dirs: tuple[str, ...], timeout: float, memory: int, imports: float
) -> Registry:
    """The plugin folders and limits (PULSAR_LENS_PLUGIN_*) are the cache key and what
    discover() is given."""
    limits = PluginLimits(timeout=timeout, memory=memory, import_timeout=imports)
    return discover(plugin_dirs=plugin_dirs, limits=limits)


def registry() -> Registry:
    """Every plugin that loaded and every load failure; re-discovered when the plugin folders
    or limits change."""
    current = settings()
    limits = limits_of(current)
    dirs = tuple(str(d) for d in current.plugin_dirs)
    return _discover(dirs, limits.timeout, limits.memory, limits.import_timeout)


@st.cache_data(ttl=INDEX_TTL_SECONDS, max_entries=8, show_spinner=False)
def full_index(root: str) -> pd.DataFrame:
    """The index of every cluster's snapshots, oldest first."""
    return get_store(root).snapshots()


def cluster_names(root: str) -> list[str]:
    """The clusters of the store, the one of the newest poll first, then by name."""
    return clusters_in(full_index(root))


def chosen_cluster(root: str) -> str | None:
    """The cluster the sidebar chose (default the newest poll's); None with one cluster."""
    names = cluster_names(root)
    if len(names) < 2:
        return None
    chosen = st.session_state.get(CLUSTER_KEY)
    return chosen if chosen in names else names[0]


def newest_index(root: str) -> pd.DataFrame:
    """The index of the chosen cluster's snapshots (of the only one's), oldest first, up to
    the newest poll whatever snapshot the page shows."""
    index = full_index(root)
    cluster = chosen_cluster(root)
    if cluster is None:
        return index
    return index[index["cluster"] == cluster].reset_index(drop=True)


def chosen_snapshot(root: str) -> pd.Series | None:
    """The index row of the past snapshot the pages show; None for the newest (the default,
    and when the id chosen is not one of the chosen cluster's snapshots)."""
    wanted = st.session_state.get(SNAPSHOT_KEY)
    if not wanted:
        return None
    index = newest_index(root)
    found = index[index["snapshot_id"] == wanted]
    return None if found.empty else found.iloc[-1]


def upto(root: str) -> dt.datetime | None:
    """When the snapshot shown was collected; None when the pages show the newest."""
    row = chosen_snapshot(root)
    return None if row is None else pd.Timestamp(row["collected_at"]).to_pydatetime()


def snapshot_index(root: str) -> pd.DataFrame:
    """The chosen cluster's index up to the snapshot shown (the newest by default)."""
    index = newest_index(root)
    end = upto(root)
    if end is None:
        return index
    return index[index["collected_at"] <= pd.Timestamp(end)].reset_index(drop=True)


class PastView(ClusterView):
    """A view ending at a past snapshot whose rows on their own clock (the probes) end there
    too: read "up to now" by a plugin, they would show what came after the poll shown."""

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        end = self.upto if until is None or (self.upto and until > self.upto) else until
        return super().read(
            name, snapshot_ids=snapshot_ids, since=since, until=end, columns=columns
        )


def store_for(root: str, *, travel: bool = True) -> Store | ClusterView:
    """What the runner reads: the store, or the chosen cluster's part of it, ending at the
    snapshot shown (unless `travel` is False: the newest, for the Spark plugins)."""
    cluster = chosen_cluster(root)
    store = get_store(root)
    end = upto(root) if travel else None
    if end is not None:
        return PastView(store, cluster, upto=end)
    return store if cluster is None else ClusterView(store, cluster)


def poll_status(root: str) -> frames.PollStatus | None:
    """The poll of the snapshot shown (the newest by default), its age and errors; None when
    the store is empty. A past snapshot is never `stale`: whether polls still arrive is the
    newest poll's (`newest_poll_status`), which the sidebar shows."""
    status = _status_of(snapshot_index(root))
    if status is not None and upto(root) is not None:
        return dataclasses.replace(status, stale=False)
    return status


def newest_poll_status(root: str) -> frames.PollStatus | None:
    """The newest poll of the chosen cluster, whatever snapshot the pages show."""
    return _status_of(newest_index(root))


def _status_of(index: pd.DataFrame) -> frames.PollStatus | None:
    return frames.compute_poll_status(
        index, now=dt.datetime.now(dt.UTC), interval_seconds=poll_interval_seconds()
    )


@st.cache_data(ttl=3600, max_entries=96, show_spinner=False)
def latest_table(
    root: str, snapshot_id: str, name: str, columns: tuple[str, ...] | None = None
) -> pd.DataFrame:
    """Rows of table `name` in snapshot `snapshot_id`: only `columns` of it (and the store's
    `snapshot_id`, `collected_at`, `cluster`) when given."""
    return get_store(root).read(name, snapshot_ids=[snapshot_id], columns=columns).to_pandas()


def tables(
    root: str,
    snapshot_id: str,
    *names: str,
    columns: Mapping[str, tuple[str, ...]] | None = None,
) -> dict[str, pd.DataFrame]:
    """`latest_table` of each of `names`, of only the `columns` given for it."""
    only = columns or {}
    return {name: latest_table(root, snapshot_id, name, only.get(name)) for name in names}


def run_plugin(root: str, slug: str, params: Mapping[str, Any] | None = None) -> runner.RunOutput:
    """Run one plugin on the store as of the snapshot shown (the runner caches by plugin,
    params and snapshots); a plugin that runs as a job (Spark) shows its newest result."""
    loaded = registry().get(slug)
    return runner.run(loaded, store_for(root, travel=travels(loaded)), params)


def travels(loaded: LoadedPlugin) -> bool:
    """Whether the plugin's page follows the snapshot shown: those analysed per poll do; a
    Spark plugin's page shows its newest stored job result."""
    return engine_of(loaded).per_poll


def plugin_loaded(slug: str) -> bool:
    return slug in registry().plugins


@st.cache_data(ttl=3600, max_entries=64, show_spinner=False)
def _param_choices(
    root: str, snapshot_id: str, slug: str
) -> tuple[dict[str, Sequence[str]], str | None]:
    try:
        output = run_plugin(root, slug)  # the default run the page reuses from the cache
    except PluginError:  # the page shows the failure when it runs; the form needs no choices
        return {}, None
    # a list too long for a select box stays as stored (its count alone is shown: a million
    # topic names are not read for that)
    listed = {
        name: values if len(values) > forms.MAX_CHOICES else list(values)
        for name, values in output.choices.items()
    }
    return listed, output.choices_error


def param_choices(root: str, slug: str) -> dict[str, Sequence[str]]:
    """The plugin's allowed values for its str params, which come with its default-params
    result (stored, or analysed now and cached for the page's own run)."""
    status = poll_status(root)
    return _param_choices(root, status.snapshot_id, slug)[0] if status else {}


def param_choices_error(root: str, slug: str) -> str | None:
    """Why the plugin's param_choices() failed for the newest snapshot; None when it did not
    (its select boxes are text boxes then, and the page says why)."""
    status = poll_status(root)
    return _param_choices(root, status.snapshot_id, slug)[1] if status else None


@st.cache_data(ttl=INDEX_TTL_SECONDS, max_entries=8, show_spinner=False)
def metrics_hook_errors(root: str, cluster: str | None) -> dict[str, str]:
    """Why each plugin's metrics() hook failed when /metrics last built the families of
    `cluster`'s newest snapshot (written by the collect process that serves /metrics), by
    slug."""
    failed = read_hook_errors(root, cluster).get("failed")
    return {str(k): str(v) for k, v in failed.items()} if isinstance(failed, dict) else {}


@st.cache_data(ttl=INDEX_TTL_SECONDS, max_entries=8, show_spinner=False)
def quarantined_files(root: str) -> int:
    """How many files the store moved to its quarantine/ folder (unreadable as its tables)."""
    try:
        return get_store(root).quarantined_files()
    except OSError:
        return 0


@st.cache_data(ttl=INDEX_TTL_SECONDS, max_entries=8, show_spinner=False)
def collector_health(root: str) -> HealthReport | None:
    """What the collect process writing this store last said of its polls and writes; None
    when it never wrote (or wrote nothing readable)."""
    return read_health(root)
