"""Consistent-hashing models of many Key_Shared subscriptions at once (see `core.keyshared.rebuild`
for the rules: name indexes, the replica-points candidates, drift).

Every step works on whole columns: the ring points come from one `PointTable`, the lower
bound of the replica points of every subscription from one sorted search, and each round
rebuilds the ring of every subscription still unresolved at its next candidate. A ring
that gives exactly the broker's ranges has no drift; any other is compared hash by hash.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pulsar_lens.core.keyshared.layout import Layout, segments
from pulsar_lens.core.keyshared.points import FIRST_POINTS, PointTable
from pulsar_lens.core.keyshared.ranges import I64, ROUTABLE_HIGH, owner_array
from pulsar_lens.core.limits import MAX_REPLICA_POINTS
from pulsar_lens.core.selectors import DEFAULT_POINTS

MAX_POINTS = MAX_REPLICA_POINTS  # the ring fit searches as far as any model goes
EXTRA_POINTS = 32
EXTRA_INDEXES = 4
_HASH_BITS = 16  # ring points are 1..65535
Ring = tuple[I64, I64, I64, I64]  # (subscription, start, end, owner position) per range


@dataclass
class Fit:
    """The models of the subscriptions `subs` (layout indexes), aligned with them.

    `model_*` are the chosen rings' ranges, sorted by subscription (its index in `subs`)
    and start; `model_owner` is a consumer's position in its subscription.
    """

    subs: I64
    indexes: list[tuple[int, ...]] = field(default_factory=list)
    points: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    drift: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    charset: str = "utf-8"  # how the broker's JVM encodes consumer names
    model_sub: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    model_start: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    model_end: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    model_owner: I64 = field(default_factory=lambda: np.zeros(0, np.int64))

    def model_columns(self) -> tuple[I64, I64, I64]:
        """(owner position, start, end) of every model range."""
        return self.model_owner, self.model_start, self.model_end


def fit_consistent(layout: Layout, subs: I64, *, points: int = 0, charset: str = "utf-8") -> Fit:
    """Name indexes, replica points (`points`, or inferred when 0) and drift of `subs`, for
    a broker JVM that encodes consumer names in `charset`."""
    table = PointTable(charset)
    fit = Fit(subs, charset=charset)
    if not len(subs):
        return fit
    consumers = segments(layout.first, subs)
    indexes = name_indexes_of(layout, subs, table)
    uids = table.ids(list(zip([layout.names[c] for c in consumers], indexes.tolist(), strict=True)))
    tried: list[list[int]] = []
    if points:
        tried = [[points] for _ in subs]
        fit.notes = ["given"] * len(subs)
    else:
        lower, unexplained = lower_bounds(layout, subs, consumers, uids, table)
        for low, missing in zip(lower.tolist(), unexplained.tolist(), strict=True):
            candidates, note = point_candidates(low, missing)
            tried.append(candidates)
            fit.notes.append(note)
    local = np.zeros(len(layout.names), np.int64)
    local[consumers] = np.arange(len(consumers))
    fit.indexes = [tuple(indexes[local[a:b]].tolist()) for a, b in _bounds(layout, subs)]
    by_consumer = np.zeros(len(layout.names), np.int64)
    by_consumer[consumers] = uids
    _search(layout, fit, tried, by_consumer, table)
    return fit


def _bounds(layout: Layout, subs: I64) -> list[tuple[int, int]]:
    return list(zip(layout.first[subs].tolist(), layout.first[subs + 1].tolist(), strict=True))


def point_candidates(lower: int, unexplained: int) -> tuple[list[int], str]:
    if lower == 0:
        return [DEFAULT_POINTS], "not inferable (no boundary between consumers): default assumed"
    tried = [DEFAULT_POINTS] if lower <= DEFAULT_POINTS else []
    tried += [p for p in range(lower, lower + EXTRA_POINTS + 1) if p != DEFAULT_POINTS]
    note = f"inferred: range ends need at least {lower}"
    if unexplained:
        note += f"; {unexplained} range end(s) are no ring point of their consumer"
    return tried, note


def name_indexes_of(layout: Layout, subs: I64, table: PointTable) -> I64:
    """Every consumer's `ConsumerNameIndexTracker` index (in `segments(first, subs)` order):
    0, except among namesakes, where the range ends decide."""
    out = []
    for a, b in _bounds(layout, subs):
        names = layout.names[a:b]
        if len(set(names)) == len(names):
            out.append(np.zeros(b - a, np.int64))
        else:
            out.append(np.asarray(_namesake_indexes(layout, a, names, table), np.int64))
    found: I64 = np.concatenate(out) if out else np.zeros(0, np.int64)
    return found


def _ends(layout: Layout, consumer: int) -> I64:
    low, high = int(layout.range_first[consumer]), int(layout.range_first[consumer + 1])
    ends = layout.ends[low:high]
    kept: I64 = ends[ends != ROUTABLE_HIGH]
    return kept


def _namesake_indexes(layout: Layout, first: int, names: list[str], table: PointTable) -> list[int]:
    chosen = [0] * len(names)
    by_name: dict[str, list[int]] = {}
    for position, name in enumerate(names):
        by_name.setdefault(name, []).append(position)
    for name, positions in by_name.items():
        if len(positions) == 1:
            continue
        candidates = len(positions) + EXTRA_INDEXES
        score = _scores(layout, [first + p for p in positions], name, candidates, table)
        scored = sorted(
            (-int(score[k, j]), p, j) for k, p in enumerate(positions) for j in range(candidates)
        )
        for position, j in greedy_indexes(scored, positions, candidates).items():
            chosen[position] = j
    return chosen


def _scores(
    layout: Layout, consumers: list[int], name: str, candidates: int, table: PointTable
) -> I64:
    """How many range ends of each consumer are ring points (within MAX_POINTS) of `name`
    holding each candidate index: score[consumer k, index j]."""
    keys = table.index_keys(name, candidates, MAX_POINTS)
    ends = [_ends(layout, consumer) for consumer in consumers]
    owner = np.repeat(np.arange(len(consumers)), [len(e) for e in ends])
    flat = np.concatenate(ends)
    routable = (flat >= 1) & (flat <= ROUTABLE_HIGH)
    owner, flat = owner[routable], flat[routable]
    wanted = (np.arange(candidates, dtype=np.int64)[:, None] << _HASH_BITS) | flat
    at = np.searchsorted(keys, wanted)
    hit = keys[np.minimum(at, len(keys) - 1)] == wanted  # (index j, range end)
    cell = owner[None, :] * candidates + np.arange(candidates)[:, None]
    score = np.bincount(cell[hit], minlength=len(consumers) * candidates)
    return score.reshape(len(consumers), candidates)


def lower_bounds(
    layout: Layout, subs: I64, consumers: I64, uids: I64, table: PointTable
) -> tuple[I64, I64]:
    """Per subscription: the least replica points explaining its range ends, and how many
    range ends are no ring point of their consumer (within MAX_POINTS)."""
    low, high = layout.range_first[consumers], layout.range_first[consumers + 1]
    rows = segments(layout.range_first, consumers)
    owner = np.repeat(np.arange(len(consumers), dtype=np.int64), high - low)
    ends = layout.ends[rows]
    keep = ends != ROUTABLE_HIGH
    owner, ends = owner[keep], ends[keep]
    routable = (ends >= 1) & (ends <= ROUTABLE_HIGH)
    found = np.full(len(ends), -1, np.int64)
    found[routable] = table.first_positions(uids, owner[routable], ends[routable], FIRST_POINTS)
    for width in (256, 512, MAX_POINTS):  # the first `i` found stays the first in a wider search
        again = (found < 0) & routable
        if not again.any():
            break
        who, local = np.unique(owner[again], return_inverse=True)
        found[again] = table.first_positions(uids[who], local, ends[again], width)
    sub = np.repeat(np.arange(len(subs), dtype=np.int64), np.diff(layout.first)[subs])[owner]
    lower = np.zeros(len(subs), np.int64)
    np.maximum.at(lower, sub[found >= 0], found[found >= 0] + 1)
    unexplained = np.bincount(sub[found < 0], minlength=len(subs))
    return lower, unexplained


def _search(layout: Layout, fit: Fit, tried: list[list[int]], uids: I64, table: PointTable) -> None:
    """Try each subscription's candidates in order until one reproduces its ranges; keep
    the first closest one when none does."""
    n = len(fit.subs)
    fit.points, fit.drift, fit.reasons = [0] * n, [-1] * n, [""] * n
    observed = _observed(layout, fit.subs)
    best: dict[int, Ring] = {}
    pieces: list[Ring] = []
    pending, step = np.arange(n, dtype=np.int64), 0
    while len(pending):
        candidates = np.asarray([tried[s][step] for s in pending.tolist()], np.int64)
        ring = ring_ranges(layout, fit.subs[pending], candidates, uids, table)
        equal = _equal(observed, pending, ring)
        rows = equal[ring[0]]
        pieces.append((pending[ring[0][rows]], ring[1][rows], ring[2][rows], ring[3][rows]))
        for k in np.flatnonzero(equal).tolist():
            fit.drift[int(pending[k])], fit.points[int(pending[k])] = 0, int(candidates[k])
        still = []
        for k in np.flatnonzero(~equal).tolist():
            s = int(pending[k])
            low, high = np.searchsorted(ring[0], [k, k + 1])
            part = (ring[1][low:high], ring[2][low:high], ring[3][low:high])
            mine = (np.full(high - low, s, np.int64), *part)
            drift = _differing(layout, int(fit.subs[s]), part)
            if fit.drift[s] < 0 or drift < fit.drift[s]:
                fit.drift[s], fit.points[s], best[s] = drift, int(candidates[k]), mine
            if drift and step + 1 < len(tried[s]):
                still.append(s)
            else:
                pieces.append(best.pop(s))
                fit.reasons[s] = _reason(fit, s, tried[s])
        pending, step = np.asarray(still, np.int64), step + 1
    sub, start, end, own = (np.concatenate(p) for p in zip(*pieces, strict=True))
    order = np.argsort((sub << 32) | start, kind="stable")
    fit.model_sub, fit.model_start = sub[order], start[order]
    fit.model_end, fit.model_owner = end[order], own[order]


def _reason(fit: Fit, at: int, tried: list[int]) -> str:
    if not fit.drift[at]:
        return ""
    return (
        f"no replica-points value in {tried[0]}..{tried[-1]} reproduces the broker's ranges; "
        f"closest: {fit.points[at]} ({fit.drift[at]} hashes differ)"
    )


def ring_ranges(layout: Layout, subs: I64, points: I64, uids: I64, table: PointTable) -> Ring:
    """The 4.0 snapshot of each subscription's ring with its members joined in order, each
    with `points[k]` replica points: (k, start, end, owner position), by k and start."""
    consumers = segments(layout.first, subs)
    counts = np.diff(layout.first)[subs]
    k = np.repeat(np.arange(len(subs), dtype=np.int64), counts)
    position = consumers - layout.first[subs][k]
    bits = max(1, int(position.max()).bit_length())
    if len(subs) > 1 and len(subs).bit_length() + _HASH_BITS + bits > 62:  # keys fit int64
        half = len(subs) // 2
        low = ring_ranges(layout, subs[:half], points[:half], uids, table)
        high = ring_ranges(layout, subs[half:], points[half:], uids, table)
        return tuple(  # type: ignore[return-value]
            np.concatenate([a, b + (half if i == 0 else 0)])
            for i, (a, b) in enumerate(zip(low, high, strict=True))
        )
    width = int(points.max())
    ring = table.points(uids[consumers], width)
    used = np.arange(width)[None, :] < points[k][:, None]
    keys = np.sort(((((k[:, None] << _HASH_BITS) | ring) << bits) | position[:, None])[used])
    point_of = keys >> bits
    head = np.ones(len(keys), bool)
    head[1:] = point_of[1:] != point_of[:-1]  # the first consumer to join holds a point
    sub, point, owner = (
        point_of[head] >> _HASH_BITS,
        point_of[head] & 0xFFFF,
        keys[head] & ((1 << bits) - 1),
    )
    return _snapshot(sub, point, owner)


def _snapshot(sub: I64, point: I64, owner: I64) -> tuple[I64, I64, I64, I64]:
    """`core.selectors.ring_assignments` of many rings: point p owns (previous point, p], the
    first point also the tail after the last one; one consumer's neighbours are joined."""
    first = np.ones(len(sub), bool)
    first[1:] = sub[1:] != sub[:-1]
    last = np.append(first[1:], True)
    starts = np.where(first, 1, np.concatenate([[0], point[:-1]]) + 1)
    tail = last & (point != ROUTABLE_HIGH)
    heads = np.flatnonzero(first)
    head_owner = owner[heads][np.cumsum(first) - 1]
    at = np.flatnonzero(tail) + 1
    sub = np.insert(sub, at, sub[tail])
    starts = np.insert(starts, at, point[tail] + 1)
    ends = np.insert(point, at, ROUTABLE_HIGH)
    owner = np.insert(owner, at, head_owner[tail])
    keep = np.ones(len(sub), bool)
    keep[1:] = (sub[1:] != sub[:-1]) | (owner[1:] != owner[:-1])
    kept = np.flatnonzero(keep)
    last_row = np.append(kept[1:] - 1, len(sub) - 1)
    return sub[kept], starts[kept], ends[last_row], owner[kept]


def _observed(layout: Layout, subs: I64) -> tuple[I64, I64, I64, I64, I64]:
    """The broker's ranges of `subs`: (offsets by k, k, start, end, owner position), each
    subscription's sorted by start and end."""
    consumers = segments(layout.first, subs)
    counts = np.diff(layout.first)[subs]
    k = np.repeat(np.arange(len(subs), dtype=np.int64), counts)
    position = consumers - layout.first[subs][k]
    rows = segments(layout.range_first, consumers)
    sizes = np.diff(layout.range_first)[consumers]
    k_rows, own = np.repeat(k, sizes), np.repeat(position, sizes)
    start, end = layout.starts[rows], layout.ends[rows]
    # by start only: a tie means overlapping ranges, which no ring gives, so their order
    # does not matter
    order = np.argsort((k_rows << 32) | start, kind="stable")
    offsets = np.searchsorted(k_rows[order], np.arange(len(subs) + 1)).astype(np.int64)
    return offsets, k_rows[order], start[order], end[order], own[order]


def _equal(
    observed: tuple[I64, I64, I64, I64, I64], pending: I64, ring: tuple[I64, I64, I64, I64]
) -> np.ndarray:
    """Which pending subscriptions' rings give exactly the broker's ranges."""
    offsets = observed[0]
    rows = segments(offsets, pending)
    seen = np.diff(offsets)[pending]
    made = np.bincount(ring[0], minlength=len(pending))
    same: np.ndarray = seen == made
    mine = same[np.repeat(np.arange(len(pending)), seen)]
    theirs = same[ring[0]]
    a = [observed[i][rows][mine] for i in (2, 3, 4)]
    b = [ring[i][theirs] for i in (1, 2, 3)]
    wrong = (a[0] != b[0]) | (a[1] != b[1]) | (a[2] != b[2])
    same[np.unique(ring[0][theirs][wrong])] = False
    return same


def _differing(layout: Layout, sub: int, model: tuple[I64, I64, I64]) -> int:
    """Hashes whose owner differs between the broker's ranges and the model's."""
    members = layout.members(sub)
    start, end, own = model
    modelled: list[list[tuple[int, int]]] = [[] for _ in members]
    for s, e, o in zip(start.tolist(), end.tolist(), own.tolist(), strict=True):
        modelled[o].append((s, e))
    observed = owner_array([m.ranges for m in members])
    return int((observed != owner_array(modelled)).sum())


def greedy_indexes(
    scored: Iterable[tuple[int, int, int]], positions: Sequence[int], candidates: int
) -> dict[int, int]:
    """The index each of a name's positions takes, from (-score, position, index) triples
    sorted best first: each position and each index once, a triple scoring nothing never;
    a position left over takes the lowest index no one took."""
    chosen: dict[int, int] = {}
    taken: set[int] = set()
    for neg, position, j in scored:
        if neg < 0 and position not in chosen and j not in taken:
            chosen[position] = j
            taken.add(j)
    free = (j for j in range(candidates + len(positions)) if j not in taken)
    for position in positions:
        if position not in chosen:
            chosen[position] = next(free)
    return chosen
