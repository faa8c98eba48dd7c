"""`failover-assignment`'s frames: groups, partitions with flapping, per-consumer counts, the
consumer x partition matrix and the active consumer over time (see the package for rules)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

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


def partition_history(partitions: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """The `history` rows (each poll's rows of Failover subscriptions, oldest poll first) of
    the partitions' (topic, subscription), in their order, with `collected_at`,
    `active_consumer_name` and `_row`, the partition's position: what `with_flaps` and
    `timeline_frame` read, joined once (a join on two text keys over the whole window)."""
    columns = ["collected_at", "topic", "subscription", "active_consumer_name", "_row"]
    if partitions.empty or history.empty:
        return pd.DataFrame(columns=columns)
    return _of_partitions(history, partitions, ["active_consumer_name"])


def with_flaps(partitions: pd.DataFrame, window: pd.DataFrame, params: Any) -> pd.DataFrame:
    """Active-consumer changes per partition over the stored snapshots (`window`: their
    `partition_history`), and the names seen in the order first seen: each partition's named
    active consumers, oldest first."""
    if partitions.empty:
        return partitions
    window = window[window["active_consumer_name"].notna()]
    row = window["_row"].to_numpy(np.int64)
    at = window["collected_at"].to_numpy(dtype="datetime64[us]")
    order = np.lexsort((np.arange(len(row)), at, row))
    row = row[order]
    code, names = pd.factorize(window["active_consumer_name"].to_numpy(dtype=object)[order])
    changed = (row[1:] == row[:-1]) & (code[1:] != code[:-1])
    changes = np.bincount(row[1:][changed], minlength=len(partitions))
    seen: list[list[str]] = [[] for _ in range(len(partitions))]
    first = np.unique(row * (len(names) + 1) + code, return_index=True)[1]
    for i in np.sort(first).tolist():
        seen[row[i]].append(str(names[code[i]]))
    out = partitions.assign(changes=changes.tolist(), seen=[", ".join(n) for n in seen])
    return out.assign(flapping=out["changes"] >= params.flap_changes)


def _of_partitions(
    history: pd.DataFrame, partitions: pd.DataFrame, columns: Sequence[str]
) -> pd.DataFrame:
    """The `history` rows of the partitions' (topic, subscription), in their order, with
    `collected_at`, `columns` and `_row`, the partition's position."""
    rows = history[["collected_at", "topic", "subscription", *columns]]
    rows = rows[_isin(rows["topic"], partitions["topic"])]
    keys = pd.DataFrame(
        {
            "topic": partitions["topic"],
            "subscription": partitions["subscription"],
            "_row": np.arange(len(partitions)),
        }
    )
    return rows.merge(keys, on=["topic", "subscription"], how="inner")


def _isin(column: pd.Series, values: pd.Series) -> np.ndarray:
    """`column.isin(values)` through Arrow: pandas' own builds a scalar per value."""
    found = pc.is_in(pa.array(column, pa.string()), value_set=pa.array(values, pa.string()))
    flags: np.ndarray = found.fill_null(False).to_numpy(zero_copy_only=False)
    return flags


Names = Sequence[tuple[str, ...]]
"""The connected consumers of each partition row, sorted."""


def current_of(rows: pd.DataFrame) -> list[str | None]:
    """The observed active consumer, or the model's choice where the stats have none."""
    return [
        (r if mode == "consistent" else m) if _missing(o) else o
        for o, m, r, mode in zip(
            *(rows[c].tolist() for c in ("observed", "modulo", "consistent_hashing", "mode")),
            strict=True,
        )
    ]


def _group_of(partitions: pd.DataFrame) -> tuple[list[int], list[int]]:
    """The group (0, 1, ...) of each row, and where each group starts: a group's rows are
    consecutive."""
    labels = partitions["label"].tolist()
    starts = [i for i in range(len(labels)) if i == 0 or labels[i] != labels[i - 1]]
    group = np.cumsum(np.isin(np.arange(len(labels)), starts)) - 1
    return group.tolist(), starts


def _tally(group: Sequence[int], active: Sequence[Any]) -> Counter[tuple[int, str]]:
    return Counter((g, a) for g, a in zip(group, active, strict=True) if not _missing(a))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


@dataclass(frozen=True)
class _Counts:
    """Per group: its rows, its consumers (sorted), and their active partitions now and under
    the alternative rule (None without one)."""

    starts: list[int]
    consumers: list[list[str]]
    now: list[list[int]]
    then: list[list[int] | None]
    size: list[int]


def _counts(partitions: pd.DataFrame, names: Names) -> _Counts:
    group, starts = _group_of(partitions)
    count = len(starts)
    consumers: list[set[str]] = [set() for _ in range(count)]
    for g, mine in zip(group, names, strict=True):
        consumers[g].update(mine)
    ordered = [sorted(c) for c in consumers]
    alternative = partitions["alternative"].tolist()
    now, then = _tally(group, current_of(partitions)), _tally(group, alternative)
    whatif = [False] * count
    for g, a in zip(group, alternative, strict=True):
        whatif[g] = whatif[g] or not _missing(a)
    size = np.diff([*starts, len(group)]).tolist()
    return _Counts(
        starts,
        ordered,
        [[now[g, n] for n in ordered[g]] for g in range(count)],
        [[then[g, n] for n in ordered[g]] if whatif[g] else None for g in range(count)],
        size,
    )


def group_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    if partitions.empty:
        return frame_of([], GROUP_COLUMNS)
    counts = _counts(partitions, names)
    group = np.repeat(np.arange(len(counts.starts)), counts.size)
    parents = pd.DataFrame({"g": group, "p": partitions["parent_topic"].to_numpy(dtype=object)})
    topics = parents.drop_duplicates().groupby("g", sort=True).size().tolist()

    def total(column: str, negate: bool = False) -> list[int]:
        values = partitions[column].astype(bool).to_numpy()
        summed: list[int] = np.bincount(group, weights=~values if negate else values).tolist()
        return [int(v) for v in summed]

    unexplained, moving = total("explained", negate=True), total("moves")
    flapping = total("flapping")
    first = partitions.iloc[counts.starts]
    rows = []
    for g, (label, sub, mode) in enumerate(
        zip(first["label"], first["subscription"], first["mode"], strict=True)
    ):
        size, then = counts.size[g], counts.then[g]
        rows.append(
            {
                "label": label,
                "subscription": sub,
                "topics": topics[g],
                "partitions": size,
                "consumers": len(counts.consumers[g]),
                "mode": str(mode),
                "unexplained": unexplained[g],
                "imbalance": imbalance(counts.now[g], size),
                "overload": overload(counts.now[g], size),
                "alternative": None
                if then is None
                else ("modulo" if mode == "consistent" else "consistent"),
                "imbalance_alternative": None if then is None else imbalance(then, size),
                "partitions_moving": moving[g],
                "flapping": flapping[g],
            }
        )
    return frame_of(rows, GROUP_COLUMNS)


def consumer_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    if partitions.empty:
        return frame_of([], CONSUMER_COLUMNS)
    counts = _counts(partitions, names)
    labels = partitions["label"].to_numpy(dtype=object)[counts.starts].tolist()
    rows: list[dict[str, Any]] = []
    for g, label in enumerate(labels):
        consumers, now = counts.consumers[g], counts.now[g]
        then: list[Any] = counts.then[g] or [None] * len(consumers)
        fair = counts.size[g] / len(consumers) if consumers else 0.0
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
    if not any(names):
        return frame_of([], MATRIX_COLUMNS)
    counts = [len(n) for n in names]
    repeat = np.repeat(np.arange(len(names)), counts)
    flat = [n for mine in names for n in mine]
    observed = partitions["observed"].to_numpy(dtype=object)[repeat].tolist()
    return pd.DataFrame(
        {
            "label": partitions["label"].to_numpy(dtype=object)[repeat].tolist(),
            "topic": partitions["topic"].to_numpy(dtype=object)[repeat].tolist(),
            "consumer_name": flat,
            "role": [
                "active" if n == o else "standby" for n, o in zip(flat, observed, strict=True)
            ],
        },
        columns=MATRIX_COLUMNS,
    )


def timeline_frame(partitions: pd.DataFrame, window: pd.DataFrame) -> pd.DataFrame:
    """The active consumer of every partition of every group in each stored snapshot where
    its subscription was Failover (`window`: their `partition_history`)."""
    if partitions.empty or window.empty:
        return frame_of([], TIMELINE_COLUMNS)
    label = partitions["label"].to_numpy(dtype=object)[window["_row"].to_numpy(np.int64)]
    rows = window.assign(label=label)
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
        # the selected group's figures; its partitions, observed and both rules, are the
        # `partitions` frame's rows of its label (as maps here they were most of a stored
        # result: tens of megabytes at a million topics)
        row = chosen.iloc[0]
        summary["selection"] = {
            "mode": row["mode"],
            "imbalance": float(row["imbalance"]),
            "alternative": row["alternative"],
            "imbalance_alternative": None
            if pd.isna(row["imbalance_alternative"])
            else float(row["imbalance_alternative"]),
            "partitions_moving": int(row["partitions_moving"]),
        }
    return summary
