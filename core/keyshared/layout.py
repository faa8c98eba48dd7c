"""The consumers and hash ranges of many Key_Shared subscriptions as flat arrays.

`from_frame` reads the consumers frame once: every subscription's consumers in connection
order (as `core.keyshared.ranges.members_of` orders them), and their ranges, sorted, back to back.
The analyses then work on whole columns; `Layout.members` gives one subscription's `Member`s
where the per-subscription models need them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.keyshared.ranges import (
    AUTO_SPLIT_TOP,
    I64,
    ROUTABLE_HIGH,
    ROUTABLE_LOW,
    Kind,
    Member,
    ranges_of,
    tiles,
    wide_consistent,
)

_RANGE_CELL = pa.list_(pa.struct([("start", pa.int64()), ("end", pa.int64())]))


@dataclass(frozen=True)
class Layout:
    """Subscriptions (in the given order), their consumers and ranges, flat.

    Consumer `c` of subscription `s` is `first[s] <= c < first[s + 1]`, in connection order;
    its ranges are `starts/ends[range_first[c]:range_first[c + 1]]`, sorted.
    """

    first: I64
    names: list[str]
    since: Sequence[Any]  # indexed by consumer: a Python list or the frame column's array
    range_first: I64
    starts: I64
    ends: I64

    @property
    def subscriptions(self) -> int:
        return len(self.first) - 1

    def size(self, sub: int) -> int:
        """How many consumers subscription `sub` has."""
        return int(self.first[sub + 1] - self.first[sub])

    def sub_of(self) -> I64:
        """The subscription of every consumer."""
        return np.repeat(np.arange(self.subscriptions, dtype=np.int64), np.diff(self.first))

    def positions(self) -> I64:
        """Every consumer's position within its subscription."""
        return np.arange(len(self.names), dtype=np.int64) - self.first[self.sub_of()]

    def range_owner(self) -> I64:
        """The consumer of every range."""
        return np.repeat(np.arange(len(self.names), dtype=np.int64), np.diff(self.range_first))

    def members_of(self, subs: Sequence[int]) -> list[list[Member]]:
        """`members` of each of `subs`, read from the arrays once for all of them (the
        ranges of every consumer sliced from two lists, not from the arrays a consumer at a
        time: 1.6 times quicker for 250,000 subscriptions)."""
        chosen = np.asarray(subs, np.int64)
        consumers = segments(self.first, chosen)
        counts = self.range_first[consumers + 1] - self.range_first[consumers]
        at = segments(self.range_first, consumers)
        pairs = list(zip(self.starts[at].tolist(), self.ends[at].tolist(), strict=True))
        edges = np.concatenate(([0], np.cumsum(counts))).tolist()
        names = self.names
        flat = [
            Member(names[c], tuple(pairs[edges[k] : edges[k + 1]]), since)
            for k, (c, since) in enumerate(
                zip(consumers.tolist(), _taken(self.since, consumers), strict=True)
            )
        ]
        cuts = np.concatenate(([0], np.cumsum(self.first[chosen + 1] - self.first[chosen])))
        bounds = cuts.tolist()
        return [flat[bounds[k] : bounds[k + 1]] for k in range(len(chosen))]

    def members(self, sub: int) -> list[Member]:
        out = []
        for c in range(int(self.first[sub]), int(self.first[sub + 1])):
            low, high = int(self.range_first[c]), int(self.range_first[c + 1])
            pairs = zip(self.starts[low:high].tolist(), self.ends[low:high].tolist(), strict=True)
            out.append(Member(self.names[c], tuple(pairs), self.since[c]))
        return out


def _taken(values: Sequence[Any], chosen: I64) -> list[Any]:
    """`[values[c] for c in chosen]`: of a column's array in one take (a Python object made
    per value at once, not one indexing call each: 3.4 s more for 650,000 consumers)."""
    if isinstance(values, list):
        return [values[c] for c in chosen.tolist()]
    found: list[Any] = values.take(chosen).tolist()  # type: ignore[attr-defined]
    return found


def segments(offsets: I64, chosen: I64) -> I64:
    """The indexes `offsets[k] .. offsets[k + 1] - 1` of every chosen `k`, concatenated."""
    lows, highs = offsets[chosen], offsets[chosen + 1]
    sizes = highs - lows
    total = int(sizes.sum())
    if not total:
        return np.zeros(0, np.int64)
    shift: I64 = np.repeat(lows - (np.cumsum(sizes) - sizes), sizes)
    return np.arange(total, dtype=np.int64) + shift


def subscription_keys(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """(topic, subscription) of each row of `frame`, in order: the `keys` `places` and
    `from_frame` take."""
    if not len(frame):
        return []
    return list(zip(frame["topic"].tolist(), frame["subscription"].tolist(), strict=True))


def places(keys: Sequence[tuple[str, str]], consumers: pd.DataFrame) -> I64:
    """Each consumer row's place in `keys` (the last, for a key listed twice), -1 where its
    (topic, subscription) is not there: one Arrow hash join, not a Python lookup a row (0.2
    s instead of 0.7-0.9 s for 2,100,000 consumers)."""
    if consumers.empty:
        return np.zeros(0, np.int64)
    where = {key: s for s, key in enumerate(keys)}  # the last place of a key listed twice
    found_at = np.full(len(consumers), -1, np.int64)
    if not where:
        return found_at
    text = pa.string()
    rows = pa.table(
        {
            "topic": pa.array(consumers["topic"], text, from_pandas=True),
            "subscription": pa.array(consumers["subscription"], text, from_pandas=True),
            "row": pa.array(np.arange(len(consumers), dtype=np.int64)),
        }
    )
    listed = pa.table(
        {
            "topic": pa.array([t for t, _ in where], text),
            "subscription": pa.array([s for _, s in where], text),
            "place": pa.array(list(where.values()), pa.int64()),
        }
    )
    found = rows.join(listed, keys=["topic", "subscription"], join_type="inner", use_threads=False)
    found_at[found["row"].to_numpy()] = found["place"].to_numpy()
    return found_at


def from_frame(
    keys: Sequence[tuple[str, str]], consumers: pd.DataFrame, sub_of_row: I64 | None = None
) -> Layout:
    """The consumers of each (topic, subscription) in `keys`, in connection order;
    `sub_of_row`: `places(keys, consumers)` when the caller found it already."""
    if sub_of_row is None:
        sub_of_row = places(keys, consumers)
    rows = np.flatnonzero(sub_of_row >= 0)
    if len(rows):
        since = pd.DatetimeIndex(pd.to_datetime(consumers["connected_since"], utc=True))
        order = np.lexsort(
            (rows, since.asi8[rows], since.isna()[rows], sub_of_row[rows])
        )  # members_of's order: by time, missing times last, then as listed
        rows = rows[order]
    first = np.searchsorted(sub_of_row[rows], np.arange(len(keys) + 1)).astype(np.int64)
    names = [str(n) for n in consumers["consumer_name"].iloc[rows].to_numpy()] if len(rows) else []
    # the column's own array, each value made a Python object only when a member is built
    # (`tolist` of 700,000 timestamps: 1.1 s at 1,000,000 topics, for a few members)
    since_values = consumers["connected_since"].iloc[rows].array if len(rows) else []
    cells = consumers["hash_ranges"].to_numpy()[rows] if len(rows) else []
    range_first, starts, ends = flat_ranges(cells)
    return Layout(first, names, since_values, range_first, starts, ends)


def from_members(members: Sequence[Member]) -> Layout:
    """One subscription's members as a `Layout`."""
    ranges = [sorted(m.ranges) for m in members]
    return Layout(
        first=np.asarray([0, len(members)], np.int64),
        names=[m.name for m in members],
        since=[m.connected_since for m in members],
        range_first=np.cumsum([0, *map(len, ranges)]).astype(np.int64),
        starts=np.asarray([s for r in ranges for s, _ in r], np.int64),
        ends=np.asarray([e for r in ranges for _, e in r], np.int64),
    )


def flat_ranges(cells: Any) -> tuple[I64, I64, I64]:
    """Stored `hash_ranges` cells as (offsets, starts, ends), each cell's ranges sorted."""
    try:
        array = pa.array(cells, type=_RANGE_CELL, from_pandas=True)
        offsets = array.offsets.to_numpy().astype(np.int64)
        flat = array.flatten()
        starts = flat.field("start").to_numpy(zero_copy_only=False).astype(np.int64)
        ends = flat.field("end").to_numpy(zero_copy_only=False).astype(np.int64)
        offsets -= offsets[0]
    except (pa.ArrowException, TypeError, ValueError):
        per_cell = [ranges_of(cell) for cell in cells]
        offsets = np.cumsum([0, *map(len, per_cell)]).astype(np.int64)
        starts = np.asarray([s for r in per_cell for s, _ in r], np.int64)
        ends = np.asarray([e for r in per_cell for _, e in r], np.int64)
        return offsets, starts, ends
    owner = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    same = owner[1:] == owner[:-1]
    if np.any(
        same & ((starts[1:] < starts[:-1]) | ((starts[1:] == starts[:-1]) & (ends[1:] < ends[:-1])))
    ):
        order = np.lexsort((ends, starts, owner))
        starts, ends = starts[order], ends[order]
    return offsets, starts, ends


def infer_kinds(layout: Layout, modes: Sequence[Any], *, pulsar: PulsarLine = "4.0") -> list[Kind]:
    """`core.keyshared.ranges.infer_selector` of every subscription, from the flat ranges, on
    a broker of line `pulsar`."""
    bounds = layout.range_first[layout.first]  # each subscription's ranges, back to back
    sizes = np.diff(bounds)
    low, high = np.zeros(len(sizes), np.int64), np.zeros(len(sizes), np.int64)
    widest = np.zeros(len(sizes), np.int64)
    heads = bounds[:-1][sizes > 0]
    if len(heads):  # the least range's start and the greatest range's end, as tuples sort
        low[sizes > 0] = np.minimum.reduceat(layout.starts, heads)
        top = np.maximum.reduceat(layout.starts, heads)
        at_top = layout.starts == np.repeat(top, sizes[sizes > 0])
        ends = np.where(at_top, layout.ends, np.iinfo(np.int64).min)
        high[sizes > 0] = np.maximum.reduceat(ends, heads)
        widest[sizes > 0] = np.maximum.reduceat(layout.ends, heads)
    counts = np.diff(layout.range_first)
    kinds: list[Kind] = []
    for s, mode in enumerate(modes):
        if isinstance(mode, str) and mode.upper() == "STICKY":
            kinds.append("sticky")
        elif not sizes[s]:
            kinds.append("unknown")
        elif _auto_split(layout, s, counts):
            kinds.append("auto-split")
        elif _consistent(int(low[s]), int(high[s]), int(widest[s]), pulsar):
            kinds.append("consistent")
        else:
            kinds.append("unknown")
    return kinds


def _consistent(low: int, high: int, widest: int, pulsar: PulsarLine) -> bool:
    """4.0's ranges within 1..65535, or a 3.0 broker's 31-bit ring."""
    narrow = low >= ROUTABLE_LOW and high <= ROUTABLE_HIGH
    return narrow or wide_consistent(low, widest, pulsar)


def _auto_split(layout: Layout, sub: int, counts: I64) -> bool:
    a, b = int(layout.first[sub]), int(layout.first[sub + 1])
    if not np.all(counts[a:b] == 1):
        return False
    ranges = sorted(r for m in layout.members(sub) for r in m.ranges)
    return tiles(ranges, 0, AUTO_SPLIT_TOP)
