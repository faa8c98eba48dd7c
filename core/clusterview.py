"""One cluster's part of a store that several clusters share.

The collector writes every cluster's snapshots into one store; each row carries its `cluster`.
`ClusterView(store, name)` reads like a store holding that cluster alone: its index, its
newest snapshots, its rows. The runner and the dashboard read through it, so each cluster's
snapshot is analysed and shown on its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core.store import Store

MAX_INDEX_GROWTH = 4  # each further look at the index reads this many times more rows


def clusters_in(index: pd.DataFrame) -> list[str]:
    """The clusters of an index frame, the one of the newest snapshot first, then by name."""
    if index.empty or "cluster" not in index:
        return []
    newest = str(index["cluster"].iloc[-1])
    return [newest, *sorted(str(c) for c in set(index["cluster"]) if c != newest)]


class ClusterView:
    """The snapshots and rows of cluster `cluster` in `store` (the runner's SnapshotStore).

    With `upto` (a snapshot's `collected_at`) the view ends there: its newest snapshot stays
    that one while newer polls are written, so analyses run one after another on it all see
    the same snapshots. `cluster=None` is every cluster's (the store's own, ended at `upto`).
    """

    def __init__(
        self, store: Store, cluster: str | None, *, upto: dt.datetime | None = None
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.upto = upto

    def __repr__(self) -> str:
        upto = "" if self.upto is None else f", upto={self.upto.isoformat()!r}"
        return f"ClusterView({self.store!r}, {self.cluster!r}{upto})"

    def pinned(self) -> ClusterView:
        """This view ending at its newest snapshot as of now (itself when it has none)."""
        newest = self.snapshots(limit=1)
        if newest.empty:
            return self
        at = pd.Timestamp(newest["collected_at"].iloc[-1]).to_pydatetime()
        return ClusterView(self.store, self.cluster, upto=at)

    @property
    def root(self) -> Path:
        return self.store.root

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame:
        """This cluster's index rows, oldest first: the newest `limit`, or all of them.

        Reads the store's newest index rows, more each time, until `limit` of this cluster's
        are in or the index is exhausted: polls of N clusters side by side cost ~N times
        `limit` rows.
        """
        if limit is None:
            return self._mine(self.store.snapshots())
        asked = max(limit, 1) * 2
        while True:
            index = self.store.snapshots(limit=asked)
            mine = self._mine(index)
            if len(mine) >= limit or len(index) < asked:
                return mine.tail(limit).reset_index(drop=True)
            asked *= MAX_INDEX_GROWTH

    def latest_snapshot_id(self) -> str | None:
        newest = self.snapshots(limit=1)
        return str(newest["snapshot_id"].iloc[-1]) if len(newest) else None

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Rows of this cluster, as `Store.read` (tables on their own clock included)."""
        table = self.store.read(
            name, snapshot_ids=snapshot_ids, since=since, until=until, columns=columns
        )
        if self.cluster is None:
            return table
        return table.filter(pc.equal(table["cluster"], pa.scalar(self.cluster, pa.string())))

    def read_latest(self, name: str) -> pa.Table:
        return self.read_history(name, snapshots=1)

    def read_history(self, name: str, *, snapshots: int) -> pa.Table:
        ids = [str(s) for s in self.snapshots(limit=snapshots)["snapshot_id"]]
        return self.read(name, snapshot_ids=ids)

    def _mine(self, index: pd.DataFrame) -> pd.DataFrame:
        keep = pd.Series(True, index=index.index)
        if self.cluster is not None:
            keep &= index["cluster"] == self.cluster
        if self.upto is not None:
            keep &= index["collected_at"] <= pd.Timestamp(self.upto)
        return index[keep].reset_index(drop=True)
