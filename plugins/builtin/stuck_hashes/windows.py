"""Snapshot windows shared by the built-ins: snapshot positions and runs of consecutive polls."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

ENTITY_KEYS = ("topic", "subscription", "consumer_name", "hash")


def snapshot_order(snapshots: pd.DataFrame) -> pd.DataFrame:
    """snapshot_id -> position (0 = oldest) and collected_at."""
    order = snapshots[["snapshot_id", "collected_at"]].reset_index(drop=True)
    return order.assign(position=range(len(order)))


def with_positions(frame: pd.DataFrame, order: pd.DataFrame) -> pd.DataFrame:
    """The frame with each row's snapshot position, oldest first; unknown snapshots dropped."""
    if order.empty:
        return frame.iloc[0:0].assign(position=pd.Series(dtype="int64"))
    merged = frame.merge(order[["snapshot_id", "position"]], on="snapshot_id", how="inner")
    keys = ["position", *(k for k in ENTITY_KEYS if k in merged)]
    return merged.sort_values(keys, kind="stable").reset_index(drop=True)


def run_start(positions: Sequence[int]) -> int:
    """Index of the first of the consecutive positions that end the (ascending) sequence."""
    start = len(positions) - 1
    while start > 0 and positions[start - 1] == positions[start] - 1:
        start -= 1
    return start
