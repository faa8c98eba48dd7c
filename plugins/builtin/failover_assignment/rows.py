"""`failover-assignment`'s partition rows, built column by column for the whole snapshot: the
consumers of each Failover subscription, the groups they link, both rules' active consumer and
the verdict (see the package for the rules). Plain lists and numpy over every row at once:
no pandas group, no frame per group, no row dict; the consumer sets' rings are built together
(`consumer_sets`, `active_positions`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import consumer_sets, partition_index, rule_positions
from pulsar_lens.plugins.builtin.shared.failover import group_label, parent_at

MODES = np.array(["unexplained", "consistent", "modulo", "either"], dtype=object)


@dataclass(frozen=True)
class Members:
    """The connected consumers of each row of the Failover subscriptions: `names[i]` the
    sorted names of row i; `rows`/`flat` the same as (row, name) pairs in that order."""

    names: list[tuple[str, ...]]
    rows: list[int]
    flat: list[str]


@dataclass(frozen=True)
class Groups:
    """Group labels in order, the group of each subscription row (-1: in none)."""

    labels: list[str]
    of_row: np.ndarray


def members_of(consumers: pd.DataFrame, subs: pd.DataFrame) -> Members:
    """The names of the consumers connected to each row of `subs` (topic, subscription)."""
    names: list[tuple[str, ...]] = [()] * len(subs)
    if consumers.empty or subs.empty:
        return Members(names, [], [])
    keys = pd.DataFrame(
        {"topic": subs["topic"], "subscription": subs["subscription"], "_row": range(len(subs))}
    )
    found = consumers[["topic", "subscription", "consumer_name"]].merge(
        keys, on=["topic", "subscription"], how="inner"
    )
    rows, flat = distinct_pairs(
        found["_row"].to_numpy(np.int64), list(map(str, found["consumer_name"].tolist()))
    )
    bounds = np.searchsorted(np.asarray(rows, np.int64), np.arange(len(subs) + 1)).tolist()
    names = [tuple(flat[bounds[i] : bounds[i + 1]]) for i in range(len(subs))]
    return Members(names, rows, flat)


def distinct_pairs(rows: np.ndarray, names: list[str]) -> tuple[list[int], list[str]]:
    """`sorted(set(zip(rows, names)))` as its rows and its names, sorted as integers: each
    name becomes its rank among the distinct names (a sort of millions of Python tuples was
    most of this plugin's `members_of` at 1,000,000 topics)."""
    distinct = sorted(set(names))
    rank = {name: i for i, name in enumerate(distinct)}
    codes = np.fromiter((rank[name] for name in names), np.int64, len(names))
    order = np.lexsort((codes, rows))
    rows, codes = rows[order], codes[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (codes[1:] != codes[:-1])
    return rows[first].tolist(), [distinct[c] for c in codes[first].tolist()]


def group_rows(subs: pd.DataFrame, members: Members) -> Groups:
    """Rows of one subscription name linked by a shared consumer name, directly or through
    other rows, form a group (union-find); per name (sorted), groups in the order of their last
    row. `subs` is sorted by subscription, then topic."""
    of_row = np.full(len(subs), -1, np.int64)
    labels: list[str] = []
    taken: set[str] = set()
    subscriptions = subs["subscription"].tolist() if len(subs) else []
    topics = subs["topic"].tolist() if len(subs) else []
    start = 0
    while start < len(subscriptions):
        name = subscriptions[start]
        end = start
        while end < len(subscriptions) and subscriptions[end] == name:
            end += 1
        if not pd.isna(name):  # as pandas' groupby, which drops a missing key
            for members_ in _linked(members.names[start:end]):
                rows = [start + i for i in members_]
                label = _unique(group_label(str(name), [(topics[r], name) for r in rows]), taken)
                taken.add(label)
                of_row[rows] = len(labels)
                labels.append(label)
        start = end
    return Groups(labels, of_row)


def _linked(names: Sequence[tuple[str, ...]]) -> list[list[int]]:
    """Positions grouped by shared names, each group ordered, groups by their last position."""
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, mine in enumerate(names):
        for name in mine:
            j = first_with.setdefault(name, i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for i in range(len(names)):
        members.setdefault(root(i), []).append(i)
    return sorted(members.values(), key=lambda group: group[-1])


def _unique(label: str, taken: set[str]) -> str:
    candidate, n = label, 1
    while candidate in taken:
        n += 1
        candidate = f"{label} #{n}"
    return candidate


def partition_columns(
    subs: pd.DataFrame, members: Members, groups: Groups, *, pip_392: bool, charset: str
) -> tuple[dict[str, Any], np.ndarray]:
    """The partition rows' columns up to `moves`, group by group, each group's rows in `subs`
    order; and the subscription row of each."""
    order = np.lexsort((np.arange(len(subs)), groups.of_row))
    order = order[groups.of_row[order] >= 0]
    group = groups.of_row[order]
    topics = [str(t) for t in subs["topic"].to_numpy(dtype=object)[order]]
    names = [members.names[i] for i in order.tolist()]
    observed_col = subs["active_consumer_name"]
    missing = observed_col.isna().to_numpy()[order].tolist()
    observed = [
        None if m else str(v)
        for v, m in zip(observed_col.to_numpy(dtype=object)[order].tolist(), missing, strict=True)
    ]
    indexes = [partition_index(t) for t in topics]  # once: parents and the modulo rule too
    modulo, ring = _picks(names, topics, indexes, charset)
    columns: dict[str, Any] = {
        "label": [groups.labels[g] for g in group.tolist()],
        "subscription": subs["subscription"].to_numpy(dtype=object)[order].tolist(),
        "topic": topics,
        "parent_topic": [parent_at(t, i) for t, i in zip(topics, indexes, strict=True)],
        "partition_index": indexes,
        "consumers": [len(n) for n in names],
        "observed": observed,
        "modulo": modulo,
        "consistent_hashing": ring,
    }
    columns.update(_verdict(group, observed, modulo, ring, len(groups.labels), pip_392=pip_392))
    return columns, order


def _picks(
    names: Sequence[tuple[str, ...]], topics: Sequence[str], indexes: Sequence[int], charset: str
) -> tuple[list[str | None], list[str | None]]:
    """Each row's active consumer by the modulo rule (the ring for a non-partitioned topic)
    and by the ring, None where no consumer is connected."""
    distinct: dict[tuple[str, ...], int] = {}
    set_of = [distinct.setdefault(n, len(distinct)) if n else -1 for n in names]
    sets = consumer_sets(distinct)
    modulo, ring = rule_positions(sets, set_of, topics, charset=charset, indexes=indexes)
    named = sets.ordered
    return (
        [None if p < 0 else named[p] for p in modulo.tolist()],
        [None if p < 0 else named[p] for p in ring.tolist()],
    )


def _verdict(
    group: np.ndarray,
    observed: list[str | None],
    modulo: list[str | None],
    ring: list[str | None],
    count: int,
    *,
    pip_392: bool,
) -> dict[str, list[Any]]:
    """Each group's mode (the rule explaining every observation), and per row the alternative
    rule's choice, whether the model explains it and whether it would move."""
    seen = np.array([o is not None for o in observed], bool)
    off_modulo = seen & np.array([o != m for o, m in zip(observed, modulo, strict=True)], bool)
    off_ring = seen & np.array([o != r for o, r in zip(observed, ring, strict=True)], bool)
    by_modulo = np.bincount(group, weights=off_modulo, minlength=count) == 0
    by_ring = (np.bincount(group, weights=off_ring, minlength=count) == 0) & pip_392
    modes = MODES[by_modulo * 2 + by_ring][group].tolist()
    consistent = [m == "consistent" for m in modes]
    predicted = [r if c else m for r, m, c in zip(ring, modulo, consistent, strict=True)]
    other = [m if c else r for r, m, c in zip(ring, modulo, consistent, strict=True)]
    alternative = other if pip_392 else [None] * len(other)
    current = [p if o is None else o for o, p in zip(observed, predicted, strict=True)]
    return {
        "mode": modes,
        "alternative": alternative,
        "explained": [o is None or o == p for o, p in zip(observed, predicted, strict=True)],
        "moves": [pip_392 and c != a for c, a in zip(current, alternative, strict=True)],
    }
