"""The dashboard's data access: the only module with st.cache_data / st.cache_resource.

Tables are cached by (store root, snapshot id, table): a snapshot never changes once written,
so only the index is re-read often (short ttl). Plugin results come from the runner: the one
stored for the newest snapshot when the params are the defaults, else analysed and cached
under core.digest.cache_key(plugin, version, params, snapshot ids).

A store several clusters share is read one cluster at a time: the one chosen in the sidebar
(`chosen_cluster`, by default the cluster of the newest poll). The index, the poll status and
the plugin runs then see that cluster's snapshots only (`pulsar_lens.core.clusterview.ClusterView`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from pulsar_lens.collectors.health import HealthReport, read_health
from pulsar_lens.core.clusterview import ClusterView, clusters_in
from pulsar_lens.core.errors import PluginError, SettingsError
from pulsar_lens.core.parts import PluginLimits, use_charset_setting
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard import frames
from pulsar_lens.exporter.facts import read_hook_errors
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.isolation import limits_of
from pulsar_lens.plugins.registry import Registry, discover

log = logging.getLogger(__name__)

INDEX_TTL_SECONDS = 2.0
CLUSTER_KEY = "sidebar_cluster"


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


def snapshot_index(root: str) -> pd.DataFrame:
    """The index of the chosen cluster's snapshots (of the only one's), oldest first."""
    index = full_index(root)
    cluster = chosen_cluster(root)
    if cluster is None:
        return index
    return index[index["cluster"] == cluster].reset_index(drop=True)


def store_for(root: str) -> Store | ClusterView:
    """What the runner reads: the store, or the chosen cluster's part of it."""
    cluster = chosen_cluster(root)
    store = get_store(root)
    return store if cluster is None else ClusterView(store, cluster)


def poll_status(root: str) -> frames.PollStatus | None:
    """The newest poll of the store, its age and errors; None when the store is empty."""
    return frames.compute_poll_status(
        snapshot_index(root),
        now=dt.datetime.now(dt.UTC),
        interval_seconds=poll_interval_seconds(),
    )


@st.cache_data(ttl=3600, max_entries=96, show_spinner=False)
def latest_table(root: str, snapshot_id: str, name: str) -> pd.DataFrame:
    """Rows of table `name` in snapshot `snapshot_id`."""
    return get_store(root).read(name, snapshot_ids=[snapshot_id]).to_pandas()


def tables(root: str, snapshot_id: str, *names: str) -> dict[str, pd.DataFrame]:
    return {name: latest_table(root, snapshot_id, name) for name in names}


def run_plugin(root: str, slug: str, params: Mapping[str, Any] | None = None) -> runner.RunOutput:
    """Run one plugin on the store (the runner caches by plugin, params and snapshots)."""
    return runner.run(registry().get(slug), store_for(root), params)


def plugin_loaded(slug: str) -> bool:
    return slug in registry().plugins


@st.cache_data(ttl=3600, max_entries=64, show_spinner=False)
def _param_choices(
    root: str, snapshot_id: str, slug: str
) -> tuple[dict[str, list[str]], str | None]:
    try:
        output = run_plugin(root, slug)  # the default run the page reuses from the cache
    except PluginError:  # the page shows the failure when it runs; the form needs no choices
        return {}, None
    return {name: list(values) for name, values in output.choices.items()}, output.choices_error


def param_choices(root: str, slug: str) -> dict[str, list[str]]:
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
def metrics_hook_errors(root: str) -> dict[str, str]:
    """Why each plugin's metrics() hook failed when /metrics last built the families of a
    snapshot (written by the collect process that serves /metrics), by slug."""
    failed = read_hook_errors(root).get("failed")
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
