"""Sticky-key hash ranges as the broker reports them, for the Key_Shared analyses.

A 4.0 broker routes every message by a hash in [1, 65535]: consistent hashing computes
`h31 % 65535 + 1`, auto split and sticky `h31 % 65536` with 0 turned into 1. Ranges in the
stats are inclusive; auto split ends its top range at 65536 and starts its first at 0, and
sticky ranges may start at 0. Shares are therefore counted over the routable hashes 1..65535.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pulsar_lens.core.hashing import PulsarLine, SelectorKind
from pulsar_lens.core.model import HashRange

ROUTABLE_LOW = 1
ROUTABLE_HIGH = 65535
ROUTABLE = ROUTABLE_HIGH - ROUTABLE_LOW + 1
SLOTS = 65537  # owner arrays cover 0..65536: auto split's top range ends at 65536
AUTO_SPLIT_TOP = 65536
STICKY_TOP = 65535
Run = tuple[int, int, int]  # (first hash, last hash, how many ranges cover them)
WIDE_HIGH = 2**31 - 1

Kind = SelectorKind | str  # plus "unknown" when the ranges fit no 4.0 selector


def hash_selector(kind: Kind) -> SelectorKind:
    """The selector whose hash reduction a key gets under `kind`: its own for the 4.0
    selectors, the consistent-hashing one for ranges that fit none ("unknown")."""
    return kind if kind in ("consistent", "auto-split", "sticky") else "consistent"


I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Member:
    """One connected consumer of a subscription, as the stats list it."""

    name: str
    ranges: tuple[HashRange, ...]
    connected_since: Any = None


def ranges_of(cell: Any) -> tuple[HashRange, ...]:
    """A stored `hash_ranges` cell (list of {start, end}; None or NaN when missing), sorted."""
    if cell is None or isinstance(cell, float):
        return ()
    return tuple(sorted((int(r["start"]), int(r["end"])) for r in list(cell)))


def members_of(consumers: pd.DataFrame) -> list[Member]:
    """Consumers of one subscription in connection order.

    Sorted by `connected_since`; ties and missing times keep the stats' order, which is the
    broker's join order as well.
    """
    if consumers.empty:
        return []
    frame = consumers.reset_index(drop=True)
    since = pd.to_datetime(frame["connected_since"], utc=True)
    order = frame.assign(_since=since, _row=range(len(frame))).sort_values(
        ["_since", "_row"], kind="stable", na_position="last"
    )
    return [
        Member(str(row.consumer_name), ranges_of(row.hash_ranges), row.connected_since)
        for row in order.itertuples(index=False)
    ]


def infer_selector(mode: Any, members: Sequence[Member], *, pulsar: PulsarLine = "4.0") -> Kind:
    """The selector behind a subscription's ranges on a broker of line `pulsar`.

    STICKY mode is the sticky (HashRangeExclusive) selector. Otherwise ranges that start at 0
    and tile 0..65536 come from auto split (`subscriptionKeySharedUseConsistentHashing=false`),
    and ranges within 1..65535 from 4.0's consistent hashing; on 3.0, 31-bit ranges from 0
    come from 3.0's consistent hashing (`wide_consistent`). Anything else (no ranges at all,
    or 31-bit ranges on 4.0, as its classic dispatcher reports them) is "unknown".
    """
    if isinstance(mode, str) and mode.upper() == "STICKY":
        return "sticky"
    ranges = sorted(r for m in members for r in m.ranges)
    if not ranges:
        return "unknown"
    if tiles(ranges, 0, AUTO_SPLIT_TOP) and all(len(m.ranges) == 1 for m in members):
        return "auto-split"
    if ranges[0][0] >= ROUTABLE_LOW and ranges[-1][1] <= ROUTABLE_HIGH:
        return "consistent"
    if wide_consistent(ranges[0][0], max(e for _, e in ranges), pulsar):
        return "consistent"
    return "unknown"


def wide_consistent(low: int, high: int, pulsar: PulsarLine) -> bool:
    """Whether ranges from `low` to `high` are a 3.0 broker's consistent-hashing ring: 31-bit,
    listed from 0 (3.0.7 lists one range per ring point, the first from 0)."""
    return pulsar == "3.0" and low == 0 and AUTO_SPLIT_TOP < high <= WIDE_HIGH


def tiles(ranges: Sequence[HashRange], low: int, high: int) -> bool:
    """Whether sorted ranges cover low..high exactly, without gaps or overlaps."""
    expected = low
    for start, end in ranges:
        if start != expected or end < start:
            return False
        expected = end + 1
    return expected == high + 1


def routable_count(
    ranges: Iterable[HashRange], *, low: int = ROUTABLE_LOW, high: int = ROUTABLE_HIGH
) -> int:
    """How many routable hashes (by default 1..65535) the ranges hold."""
    return sum(max(0, min(end, high) - max(start, low) + 1) for start, end in ranges)


def hash_space(members: Sequence[Member]) -> tuple[int, int]:
    """The hashes shares are counted over: 1..65535, or 0..2**31-1 for 31-bit ranges (a 3.0
    broker, or the classic dispatcher of 4.0.7, which reports its ring in 31 bits)."""
    if any(end > AUTO_SPLIT_TOP for m in members for _, end in m.ranges):
        return 0, WIDE_HIGH
    return ROUTABLE_LOW, ROUTABLE_HIGH


def differing_by_owner(
    observed: Sequence[Iterable[HashRange]], modelled: Sequence[Iterable[HashRange]]
) -> tuple[int, list[int]]:
    """Hashes whose owner differs between two sets of per-owner ranges (any width, each set
    disjoint), and per owner the hashes one set gives it and the other does not."""
    sides = [_owned(observed), _owned(modelled)]
    cuts = np.unique(np.concatenate([np.concatenate([s, e + 1]) for s, e, _ in sides]))
    if len(cuts) < 2:
        return 0, [0] * len(observed)
    low, sizes = cuts[:-1], np.diff(cuts)
    a, b = (_owner_at(side, low) for side in sides)
    differs = a != b
    total = int(sizes[differs].sum())
    per_owner = [int(sizes[(a == p) != (b == p)].sum()) for p in range(len(observed))]
    return total, per_owner


def _owned(per_owner: Sequence[Iterable[HashRange]]) -> tuple[I64, I64, I64]:
    rows = sorted((s, e, p) for p, ranges in enumerate(per_owner) for s, e in ranges)
    table = np.asarray(rows, np.int64).reshape(-1, 3)
    return table[:, 0], table[:, 1], table[:, 2]


def _owner_at(side: tuple[I64, I64, I64], hashes: I64) -> I64:
    starts, ends, who = side
    if not len(starts):
        return np.full(len(hashes), -1, np.int64)
    at = np.clip(np.searchsorted(starts, hashes, side="right") - 1, 0, None)
    hit = (np.searchsorted(starts, hashes, side="right") > 0) & (ends[at] >= hashes)
    return np.where(hit, who[at], -1)


def owner_array(ranges_per_owner: Sequence[Iterable[HashRange]]) -> I64:
    """Owner position per hash 0..65536 (-1: nobody; a later owner wins an overlap)."""
    rows = [(s, e, p) for p, ranges in enumerate(ranges_per_owner) for s, e in ranges]
    owners = np.full(SLOTS, -1, np.int64)
    if not rows:
        return owners
    table = np.asarray(sorted(rows), np.int64)
    starts, ends, who = np.clip(table[:, 0], 0, SLOTS - 1), table[:, 1], table[:, 2]
    if np.all(ends[:-1] < starts[1:]):  # disjoint, the usual case: one vectorized lookup
        slots = np.arange(SLOTS)
        at = np.searchsorted(starts, slots, side="right") - 1
        hit = (at >= 0) & (ends[np.clip(at, 0, None)] >= slots)
        return np.where(hit, who[np.clip(at, 0, None)], -1)
    for position, ranges in enumerate(ranges_per_owner):
        for start, end in ranges:
            owners[max(start, 0) : min(end, SLOTS - 1) + 1] = position
    return owners


def coverage_runs(ranges: Iterable[HashRange], *, high: int = STICKY_TOP) -> list[Run]:
    """How many of `ranges` cover each hash 0..high, as maximal runs `(start, end, count)`
    in hash order. From the ranges' ends alone: an array of every hash, summed and cut into
    runs, cost a third of sticky-ranges at 300,000 topics (tens of thousands of groups with
    a few ranges each)."""
    steps: dict[int, int] = {}
    for start, end in ranges:
        lo, hi = max(start, 0), min(end, high)
        if lo <= hi:
            steps[lo] = steps.get(lo, 0) + 1
            steps[hi + 1] = steps.get(hi + 1, 0) - 1
    found: list[Run] = []
    count = at = 0
    for point in sorted(steps):
        if point > high or not steps[point]:
            continue
        if point > at:
            found.append((at, point - 1, count))
        count, at = count + steps[point], point
    found.append((at, high, count))
    return found


def ranges_text(ranges: Iterable[HashRange]) -> str:
    """Ranges as the stats print them: [[1, 200], [300, 400]]."""
    return "[" + ", ".join(f"[{s}, {e}]" for s, e in ranges) + "]"


def share_stats(shares: Sequence[float]) -> tuple[float, float]:
    """(imbalance, stddev) of shares: the largest over the fair share 1/n, and the spread."""
    if not shares:
        return 0.0, 0.0
    values = np.asarray(shares, float)
    return float(values.max() * len(values)), float(values.std())
