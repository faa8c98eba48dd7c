"""`failover-assignment`'s frames: groups, partitions with flapping, per-consumer counts, the
consumer x partition matrix and the active consumer over time (see the package for rules)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import frame_of
from pulsar_lens.plugins.builtin.shared.failover import imbalance, overload
from pulsar_lens.plugins.builtin.shared.versions import BrokerLine

GROUP_COLUMNS = [
    "label",
    "subscription",
    "topics",
    "partitions",
    "consumers",
    "mode",
    "unexplained",
    "imbalance",
    "overload",
    "alternative",
    "imbalance_alternative",
    "partitions_moving",
    "flapping",
]
PARTITION_COLUMNS = [
    "label",
    "subscription",
    "topic",
    "parent_topic",
    "partition_index",
    "consumers",
    "observed",
    "modulo",
    "consistent_hashing",
    "mode",
    "alternative",
    "explained",
    "moves",
    "changes",
    "flapping",
    "seen",
]
CONSUMER_COLUMNS = ["label", "consumer_name", "partitions", "partitions_alternative", "vs_fair"]
MATRIX_COLUMNS = ["label", "topic", "consumer_name", "role"]
TIMELINE_COLUMNS = ["label", "topic", "collected_at", "active_consumer_name"]


def with_flaps(partitions: pd.DataFrame, history: pd.DataFrame, params: Any) -> pd.DataFrame:
    """Active-consumer changes per partition over the stored snapshots."""
    if partitions.empty:
        return partitions
    window = history[(history["type"] == "Failover") & history["active_consumer_name"].notna()]
    window = window.sort_values("collected_at", kind="stable")
    changes: dict[tuple[str, str], int] = {}
    names: dict[tuple[str, str], dict[str, None]] = {}  # in the order first seen
    last: dict[tuple[str, str], str] = {}
    columns = (window[c] for c in ("topic", "subscription", "active_consumer_name"))
    for topic, sub, active in zip(*columns, strict=True):
        key, name = (topic, sub), str(active)
        if key in last and last[key] != name:
            changes[key] = changes.get(key, 0) + 1
        last[key] = name
        names.setdefault(key, {})[name] = None
    keys = list(zip(partitions["topic"], partitions["subscription"], strict=True))
    out = partitions.assign(
        changes=[changes.get(k, 0) for k in keys],
        seen=[", ".join(names.get(k, ())) for k in keys],
    )
    return out.assign(flapping=out["changes"] >= params.flap_changes)


Names = Mapping[tuple[str, str], frozenset[str]]


def group_consumers(rows: pd.DataFrame, names: Names) -> list[str]:
    """Every consumer name connected to any partition of the group, sorted."""
    keys = zip(rows["topic"], rows["subscription"], strict=True)
    return sorted(set().union(*(names.get(k, frozenset()) for k in keys)))


def current_of(rows: pd.DataFrame) -> pd.Series:
    """The observed active consumer, or the model's choice where the stats have none."""
    predicted = rows["consistent_hashing"].where(rows["mode"] == "consistent", rows["modulo"])
    return rows["observed"].where(rows["observed"].notna(), predicted)


def _counts(active: pd.Series, consumers: Sequence[str]) -> list[int]:
    tally = active.value_counts()
    return [int(tally.get(name, 0)) for name in consumers]


def group_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows = []
    for label, mine in partitions.groupby("label", sort=False):
        consumers = group_consumers(mine, names)
        mode = str(mine["mode"].iloc[0])
        counts = _counts(current_of(mine), consumers)
        whatif = mine["alternative"].notna().any()  # none without PIP-392 (3.0)
        rows.append(
            {
                "label": label,
                "subscription": mine["subscription"].iloc[0],
                "topics": mine["parent_topic"].nunique(),
                "partitions": len(mine),
                "consumers": len(consumers),
                "mode": mode,
                "unexplained": int((~mine["explained"].astype(bool)).sum()),
                "imbalance": imbalance(counts, len(mine)),
                "overload": overload(counts, len(mine)),
                "alternative": ("modulo" if mode == "consistent" else "consistent")
                if whatif
                else None,
                "imbalance_alternative": imbalance(
                    _counts(mine["alternative"], consumers), len(mine)
                )
                if whatif
                else None,
                "partitions_moving": int(mine["moves"].astype(bool).sum()),
                "flapping": int(mine["flapping"].astype(bool).sum()),
            }
        )
    return frame_of(rows, GROUP_COLUMNS)


def consumer_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for label, mine in partitions.groupby("label", sort=False):
        consumers = group_consumers(mine, names)
        now = _counts(current_of(mine), consumers)
        then: list[Any] = (
            _counts(mine["alternative"], consumers)
            if mine["alternative"].notna().any()
            else [None] * len(consumers)
        )
        fair = len(mine) / len(consumers) if consumers else 0.0
        rows.extend(
            {
                "label": label,
                "consumer_name": name,
                "partitions": now[i],
                "partitions_alternative": then[i],
                "vs_fair": now[i] / fair if fair else 0.0,
            }
            for i, name in enumerate(consumers)
        )
    return frame_of(rows, CONSUMER_COLUMNS)


def matrix_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    """Consumers x partitions: 'active' or 'standby' for every connected consumer."""
    rows = [
        {
            "label": row.label,
            "topic": row.topic,
            "consumer_name": name,
            "role": "active" if name == row.observed else "standby",
        }
        for row in partitions.itertuples(index=False)
        for name in sorted(names.get((row.topic, row.subscription), frozenset()))
    ]
    return frame_of(rows, MATRIX_COLUMNS)


def timeline_frame(partitions: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """The active consumer of every partition of every group in each stored snapshot."""
    if partitions.empty or history.empty:
        return frame_of([], TIMELINE_COLUMNS)
    keys = partitions[["label", "topic", "subscription"]]
    rows = history.merge(keys, on=["topic", "subscription"], how="inner")
    rows = rows.sort_values(["label", "topic", "collected_at"], kind="stable")
    return rows[TIMELINE_COLUMNS].reset_index(drop=True)


def summarize(
    frames: Mapping[str, pd.DataFrame], selected: str, line: BrokerLine | None = None
) -> dict[str, Any]:
    groups = frames["groups"]
    chosen = groups[groups["label"] == selected]
    line = line or BrokerLine("4.0", ())
    summary: dict[str, Any] = {
        "pulsar": line.line,
        "broker_versions": list(line.versions),
        "model": line.caption(),
        "pip_392": line.line != "3.0",  # activeConsumerFailoverConsistentHashing exists
        "groups": len(groups),
        "partitions": int(groups["partitions"].sum()) if len(groups) else 0,
        "unexplained": int(groups["unexplained"].sum()) if len(groups) else 0,
        "flapping": int(groups["flapping"].sum()) if len(groups) else 0,
        "max_imbalance": float(groups["imbalance"].max()) if len(groups) else 0.0,
        "selected": selected,
    }
    if len(chosen):
        row = chosen.iloc[0]
        parts = frames["partitions"]
        mine = parts[parts["label"] == selected]
        summary["selection"] = {
            "mode": row["mode"],
            "imbalance": float(row["imbalance"]),
            "alternative": row["alternative"],
            "imbalance_alternative": None
            if pd.isna(row["imbalance_alternative"])
            else float(row["imbalance_alternative"]),
            "partitions_moving": int(row["partitions_moving"]),
            # None, not NaN, where the stats named no active consumer: a summary is JSON
            "observed": {
                t: None if pd.isna(o) else o
                for t, o in zip(mine["topic"], mine["observed"], strict=True)
            },
            "alternative_assignment": {
                t: None if pd.isna(a) else a
                for t, a in zip(mine["topic"], mine["alternative"], strict=True)
            },
        }
    return summary
