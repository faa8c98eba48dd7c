"""Which snapshots a plugin reads (its window of the newest `history` polls of a store), and
its declared tables over them as pandas frames."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

import pandas as pd
import pyarrow as pa

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.model import SCHEMAS, TIMED_TABLES


class SnapshotStore(Protocol):
    """The part of `pulsar_lens.core.store.Store` the runner reads."""

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame: ...

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
    ) -> pa.Table: ...


def window_size(plugin: AnalysisPlugin) -> int:
    """How many recent snapshots the plugin reads at most (`history`, or more by `history_of`)."""
    return max([plugin.history, *plugin.history_of.values()])


def snapshot_window(plugin: AnalysisPlugin, store: SnapshotStore) -> pd.DataFrame:
    """The index rows of the newest snapshots the plugin reads, oldest first."""
    size = window_size(plugin)
    return store.snapshots(limit=size).tail(size).reset_index(drop=True)


def read_tables(
    plugin: AnalysisPlugin, store: SnapshotStore, index: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """Each declared table over its newest `history` (or `history_of[table]`) snapshots of
    `index`, read through pyarrow; a timed table over the window's time span, up to now."""
    ids = [str(s) for s in index["snapshot_id"]] if len(index) else []
    tables: dict[str, pd.DataFrame] = {}
    for name in plugin.inputs:
        count = plugin.history_of.get(name, plugin.history)
        mine = ids[-count:]
        if not mine:
            table = SCHEMAS[name].empty_table()
        elif name in TIMED_TABLES:  # rows of the window's time span, up to now
            first = index["collected_at"].iloc[-len(mine)]
            table = store.read(name, since=pd.Timestamp(first).to_pydatetime())
        else:
            table = store.read(name, snapshot_ids=mine)
        tables[name] = table.to_pandas()
    return tables
