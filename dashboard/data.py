"""The dashboard's data access: the only module with st.cache_data / st.cache_resource.

Tables are cached by (store root, snapshot id, table): a snapshot never changes once written,
so only the index is re-read often (short ttl). Plugin results are cached by the runner under
core.digest.cache_key(plugin, version, params, snapshot ids).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from core.errors import SettingsError
from core.settings import Settings
from core.store import Store
from dashboard import frames, keyshared
from plugins import runner
from plugins.registry import PLUGIN_DIRS_ENV, Registry, discover

log = logging.getLogger(__name__)

INDEX_TTL_SECONDS = 2.0


def settings() -> Settings:
    """The PULSAR_* settings; a malformed value falls back to the defaults (and is logged)."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        log.warning("ignoring malformed settings: %s", exc)
        return Settings()


def store_root() -> str:
    """The store directory (PULSAR_LENS_STORE, else ./var/store) as an absolute path."""
    return str(Path(settings().store_dir).resolve())


def poll_interval_seconds() -> float:
    return settings().poll_interval.total_seconds()


@st.cache_resource(max_entries=4)
def get_store(root: str) -> Store:
    return Store(root)


@st.cache_resource(ttl=3600, max_entries=4)
def _discover(plugin_dirs: str) -> Registry:
    """`plugin_dirs` (PULSAR_LENS_PLUGIN_DIRS) is the cache key: discover() reads it itself."""
    return discover()


def registry() -> Registry:
    """Every plugin that loaded and every load failure; re-discovered when the dirs change."""
    return _discover(os.environ.get(PLUGIN_DIRS_ENV, ""))


@st.cache_data(ttl=INDEX_TTL_SECONDS, max_entries=8, show_spinner=False)
def snapshot_index(root: str) -> pd.DataFrame:
    return get_store(root).snapshots()


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


@st.cache_data(ttl=3600, max_entries=32, show_spinner=False)
def history_table(root: str, snapshot_id: str, name: str, snapshots: int) -> pd.DataFrame:
    """Rows of table `name` in the newest `snapshots` polls up to `snapshot_id`."""
    index = snapshot_index(root)
    ids = list(index["snapshot_id"])
    end = ids.index(snapshot_id) + 1 if snapshot_id in ids else len(ids)
    window = ids[max(0, end - snapshots) : end]
    return get_store(root).read(name, snapshot_ids=window).to_pandas()


def tables(root: str, snapshot_id: str, *names: str) -> dict[str, pd.DataFrame]:
    return {name: latest_table(root, snapshot_id, name) for name in names}


def run_plugin(root: str, slug: str, params: Mapping[str, Any] | None = None) -> runner.RunOutput:
    """Run one plugin on the store (the runner caches by plugin, params and snapshots)."""
    return runner.run(registry().get(slug), get_store(root), params)


def plugin_loaded(slug: str) -> bool:
    return slug in registry().plugins


@st.cache_data(ttl=3600, max_entries=64, show_spinner=False)
def _param_choices(root: str, snapshot_id: str, slug: str) -> dict[str, list[str]]:
    loaded = registry().get(slug)
    inputs = runner.load_inputs(loaded.plugin, get_store(root))
    choices = runner.param_choices(loaded, inputs)
    return {str(name): [str(v) for v in values] for name, values in choices.items()}


def param_choices(root: str, slug: str) -> dict[str, list[str]]:
    """The plugin's allowed values for its str params, from the newest snapshots."""
    status = poll_status(root)
    return _param_choices(root, status.snapshot_id, slug) if status else {}


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def key_shared_subscriptions(root: str, snapshot_id: str) -> pd.DataFrame:
    return keyshared.key_shared_subscriptions(latest_table(root, snapshot_id, "subscriptions"))


@st.cache_data(ttl=3600, max_entries=32, show_spinner=False)
def key_shared_view(root: str, snapshot_id: str, label: str) -> keyshared.KeySharedView:
    snap = tables(root, snapshot_id, "subscriptions", "consumers", "draining_hashes")
    return keyshared.compute_view(
        snap["subscriptions"], snap["consumers"], snap["draining_hashes"], label
    )


KEY_SAMPLE_POLLS = 12
"""How many recent polls of key samples the Key_Shared page weighs consumers by."""


@st.cache_data(ttl=3600, max_entries=32, show_spinner=False)
def key_traffic(root: str, snapshot_id: str, label: str) -> pd.DataFrame:
    view = key_shared_view(root, snapshot_id, label)
    samples = history_table(root, snapshot_id, "key_samples", KEY_SAMPLE_POLLS)
    return keyshared.compute_traffic(samples, view)


def lookup_key(root: str, snapshot_id: str, label: str, key: str) -> keyshared.KeyLookup:
    view = key_shared_view(root, snapshot_id, label)
    return keyshared.lookup_key(key, view.ranges, view.draining, view.kind)


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def stuck_subscriptions(root: str, snapshot_id: str, polls: int) -> list[str]:
    return frames.stuck_subscriptions(history_table(root, snapshot_id, "draining_hashes", polls))


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def draining_timeline(root: str, snapshot_id: str, label: str, polls: int) -> pd.DataFrame:
    topic, subscription = keyshared.split_label(label)
    history = history_table(root, snapshot_id, "draining_hashes", polls)
    return frames.draining_timeline(history, topic, subscription)


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def failover_view(root: str, snapshot_id: str, label: str, polls: int) -> frames.FailoverView:
    snap = tables(root, snapshot_id, "subscriptions", "consumers")
    history = history_table(root, snapshot_id, "subscriptions", polls)
    return frames.compute_failover_view(snap["subscriptions"], snap["consumers"], history, label)


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def ownership_view(root: str, snapshot_id: str, polls: int) -> frames.OwnershipView:
    bundles = history_table(root, snapshot_id, "bundles", polls)
    events = history_table(root, snapshot_id, "events", polls)
    return frames.compute_ownership_view(bundles, events)


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def failover_subscriptions(root: str, snapshot_id: str) -> list[str]:
    return frames.failover_subscriptions(latest_table(root, snapshot_id, "subscriptions"))


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def subscriptions_table(root: str, snapshot_id: str) -> pd.DataFrame:
    return frames.subscriptions_table(latest_table(root, snapshot_id, "subscriptions"))


KEY_SHARED_MAP = "key-shared-map"


def key_shared_what_if(
    root: str, snapshot_id: str, label: str, change: Mapping[str, Any]
) -> keyshared.WhatIfView | None:
    """One what-if on a subscription, computed by the key-shared-map plugin; None when the
    plugin did not report one (e.g. no change asked for)."""
    params = {"subscription": label, **change}
    output = run_plugin(root, KEY_SHARED_MAP, params)
    facts = output.result.summary.get("what_if")
    if not facts:
        return None
    frames_ = output.result.frames
    now = key_shared_view(root, snapshot_id, label).ranges
    return keyshared.WhatIfView(
        change=str(facts["change"]),
        moved_fraction=float(facts["moved_fraction"]),
        losers=list(facts.get("losers", [])),
        lanes=keyshared.what_if_lanes(now, frames_["what_if_ranges"], frames_["moves"]),
        per_consumer=frames_["what_if"].drop(columns=["label"], errors="ignore"),
    )
