"""Hashes draining for more than one consumer in the same snapshot (a broker bug), with
whole-column aggregates: one Python step per row at most, never one pandas call per hash."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pulsar_lens.api import empty_frame

VIOLATION_COLUMNS = [
    "topic",
    "subscription",
    "hash",
    "consumers",
    "first_seen_at",
    "last_seen_at",
    "snapshots",
]
MAX_LISTED = 5
"""Consumer names listed per violation; the rest are counted, so a row stays short however
many consumers a broken broker lists."""


def compute_violations(draining: pd.DataFrame) -> pd.DataFrame:
    """Hashes that drained for more than one consumer in the same snapshot."""
    key = ["snapshot_id", "collected_at", "topic", "subscription", "hash"]
    shared = draining[draining.duplicated(key, keep=False)] if len(draining) else draining
    if shared.empty:
        return empty_frame(VIOLATION_COLUMNS)
    where = ["topic", "subscription", "hash"]
    out = shared.groupby(where, as_index=False, sort=True).agg(
        first_seen_at=("collected_at", "min"),
        last_seen_at=("collected_at", "max"),
        snapshots=("snapshot_id", "nunique"),
    )
    names = shared[[*where, "consumer_name"]].astype({"consumer_name": str}).drop_duplicates()
    names = names.sort_values([*where, "consumer_name"], kind="stable")
    group = names.groupby(where, sort=True).ngroup().to_numpy(np.int64)
    out["consumers"] = listed_names(group, names["consumer_name"].tolist(), len(out))
    return out.reindex(columns=VIOLATION_COLUMNS)


def listed_names(group: np.ndarray, names: Sequence[str], groups: int) -> list[str]:
    """Per group (rows sorted by group): its first MAX_LISTED names joined, and how many
    there are in all when more; equal lists share one string."""
    listed: list[list[str]] = [[] for _ in range(groups)]
    counts = np.bincount(group, minlength=groups).tolist()
    for g, name in zip(group.tolist(), names, strict=True):
        if len(listed[g]) < MAX_LISTED:
            listed[g].append(name)
    texts: dict[tuple[tuple[str, ...], int], str] = {}
    out = []
    for chosen, count in zip(listed, counts, strict=True):
        key = (tuple(chosen), count)
        if key not in texts:
            more = f", … ({count} in all)" if count > len(chosen) else ""
            texts[key] = ", ".join(chosen) + more
        out.append(texts[key])
    return out
