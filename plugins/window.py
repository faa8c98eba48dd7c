"""Which snapshots a plugin reads (its window of the newest `history` polls of a store), and
its declared tables over them as pandas frames."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pandas as pd
import pyarrow as pa

from pulsar_lens.api import AnalysisPlugin, BaseModel
from pulsar_lens.core.arrowframes import table_frame
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
        columns: Sequence[str] | None = None,
    ) -> pa.Table: ...


def window_size(plugin: AnalysisPlugin) -> int:
    """How many recent snapshots the plugin reads at most (`history`, or more by `history_of`)."""
    return max([plugin.history, *plugin.history_of.values()])


def snapshot_window(plugin: AnalysisPlugin, store: SnapshotStore) -> pd.DataFrame:
    """The index rows of the newest snapshots the plugin reads, oldest first."""
    size = window_size(plugin)
    return store.snapshots(limit=size).tail(size).reset_index(drop=True)


ReadKey = tuple[str, tuple[str, ...] | None, dt.datetime | None, dt.datetime | None]
"""The arguments of one `SnapshotStore.read` (`read_key`): name, snapshot ids, since, until."""


@dataclass(frozen=True, slots=True)
class TableRead:
    """One declared table over a plugin's part of its window: `snapshot_ids` (oldest first),
    or for a timed table the rows `since` the first of them, up to now; no ids, no rows.
    `columns`: only those are read (the plugin's `columns_of`; None: all)."""

    name: str
    snapshot_ids: tuple[str, ...]
    since: dt.datetime | None = None
    columns: tuple[str, ...] | None = None

    @property
    def key(self) -> ReadKey | None:
        """What `read_key` makes of the store read this does (None when it reads nothing)."""
        if not self.snapshot_ids:
            return None
        if self.since is not None:
            return read_key(self.name, since=self.since)
        return read_key(self.name, snapshot_ids=self.snapshot_ids)

    def load(self, store: SnapshotStore) -> pa.Table:
        if not self.snapshot_ids:
            return SCHEMAS[self.name].empty_table()
        if self.since is not None:
            return store.read(self.name, since=self.since, columns=self.columns)
        return store.read(self.name, snapshot_ids=list(self.snapshot_ids), columns=self.columns)


def read_key(
    name: str,
    *,
    snapshot_ids: Sequence[str] | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> ReadKey:
    """The arguments of one `SnapshotStore.read`, as a key: equal keys read equal rows from
    one pinned view of a store."""
    ids = None if snapshot_ids is None else tuple(str(s) for s in snapshot_ids)
    return (name, ids, since, until)


def polls_read(plugin: AnalysisPlugin, params: BaseModel | None = None) -> int:
    """How many of the newest polls of the window the tables `history_of` does not name are
    read: `history`, or at most the value of the `history_param` field of `params` (of the
    default params when None)."""
    field = plugin.history_param
    if field is None:
        return plugin.history
    fields = plugin.Params.model_fields
    value = fields[field].default if params is None else getattr(params, field)
    return max(1, min(plugin.history, int(value)))


def table_reads(
    plugin: AnalysisPlugin, index: pd.DataFrame, params: BaseModel | None = None
) -> list[TableRead]:
    """What `read_tables` reads for each declared table, in declared order, for `params`
    (the default ones when None)."""
    ids = [str(s) for s in index["snapshot_id"]] if len(index) else []
    reads: list[TableRead] = []
    polls = polls_read(plugin, params)
    for name in plugin.inputs:
        mine = tuple(ids[-plugin.history_of.get(name, polls) :])
        since = None
        if mine and name in TIMED_TABLES:  # rows of the window's time span, up to now
            since = pd.Timestamp(index["collected_at"].iloc[-len(mine)]).to_pydatetime()
        columns = plugin.columns_of.get(name)
        reads.append(TableRead(name, mine, since, None if columns is None else tuple(columns)))
    return reads


def read_tables(
    plugin: AnalysisPlugin,
    store: SnapshotStore,
    index: pd.DataFrame,
    params: BaseModel | None = None,
) -> dict[str, pd.DataFrame]:
    """Each declared table over its newest `history` (or `history_of[table]`) snapshots of
    `index`, read through pyarrow; a timed table over the window's time span, up to now.

    Each plugin gets frames of its own, converted from the Arrow table here: a store that
    hands several plugins the same (immutable) table (`plugins.sharedreads`) still gives
    each one frames no other plugin's changes reach. Of a table named in `columns_of`, only
    those columns are read and converted (and `snapshot_id`, `collected_at`); a store that
    hands over more (a read shared with a plugin that wants more) is cut to them."""
    return {
        read.name: table_frame(keep_columns(read.load(store), plugin.columns_of.get(read.name)))
        for read in table_reads(plugin, index, params)
    }


ALWAYS_READ = ("snapshot_id", "collected_at")


def keep_columns(table: pa.Table, wanted: Sequence[str] | None) -> pa.Table:
    """`table` with only the `wanted` columns (and `ALWAYS_READ`), in its own order."""
    if wanted is None:
        return table
    keep = {*ALWAYS_READ, *wanted}
    return table.select([name for name in table.column_names if name in keep])
