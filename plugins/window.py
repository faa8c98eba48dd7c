"""Which snapshots a plugin reads: its window of the newest `history` polls of a store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

import pandas as pd
import pyarrow as pa

from pulsar_lens.api import AnalysisPlugin


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
