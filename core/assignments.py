"""Who owns which sticky-key hashes, and what moves when a consumer joins or leaves.

`Assignments` mirrors the broker's `ConsumerHashAssignmentsSnapshot`: sorted, non-overlapping
inclusive ranges, each with one consumer. `Impact` is the difference of two of them, which is
what a 4.0 broker turns into draining hashes (`ImpactedConsumersResult`). `Selector` is the
surface every selector model shares (see `pulsar_lens.core.selectors`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pulsar_lens.core.hashing import PulsarLine, SelectorKind, sticky_key_hash
from pulsar_lens.core.model import HashRange

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class Consumer:
    """A consumer of a Key_Shared subscription, compared by identity: names may repeat.

    `sticky_ranges` are the ranges a STICKY consumer asks for (inclusive, 0..65535).
    """

    name: str
    sticky_ranges: tuple[HashRange, ...] = ()

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}@{id(self):x})"


@dataclass(frozen=True, slots=True)
class RangeMove:
    """Hashes `start..end` (inclusive) moved from `before` to `after` (None: nobody)."""

    start: int
    end: int
    before: Consumer | None
    after: Consumer | None


class Assignments:
    """Sorted, non-overlapping inclusive ranges with their owners (a selector snapshot)."""

    __slots__ = ("ends", "owners", "starts", "table")

    def __init__(self, starts: I64, ends: I64, owners: I64, table: Sequence[Consumer]) -> None:
        self.starts = starts
        self.ends = ends
        self.owners = owners  # indexes into `table`
        self.table = table

    @classmethod
    def empty(cls) -> Assignments:
        none = np.zeros(0, np.int64)
        return cls(none, none, none, ())

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, int, Consumer]]) -> Assignments:
        """Build from `(start, end, consumer)` rows, already sorted and non-overlapping."""
        table: list[Consumer] = []
        ids: dict[Consumer, int] = {}
        starts, ends, owners = [], [], []
        for start, end, consumer in rows:
            starts.append(start)
            ends.append(end)
            owners.append(ids.setdefault(consumer, len(ids)))
            if len(table) < len(ids):
                table.append(consumer)
        return cls(_i64(starts), _i64(ends), _i64(owners), tuple(table))

    def rows(self) -> list[tuple[int, int, Consumer]]:
        return [
            (int(s), int(e), self.table[int(o)])
            for s, e, o in zip(self.starts, self.ends, self.owners, strict=True)
        ]

    def owner_of(self, hashes: I64) -> I64:
        """Owner index per hash, -1 where no range covers it."""
        at = np.searchsorted(self.starts, hashes, side="right") - 1
        safe = np.clip(at, 0, max(len(self.starts) - 1, 0))
        covered = (at >= 0) & (len(self.starts) > 0)
        if len(self.starts):
            covered &= self.ends[safe] >= hashes
            return np.where(covered, self.owners[safe], -1)
        return np.full(len(hashes), -1, np.int64)

    def by_consumer(self, order: Iterable[Consumer] = ()) -> dict[Consumer, tuple[HashRange, ...]]:
        """Ranges per consumer, sorted, overlapping or touching ranges merged.

        This is the broker's `getRangesByConsumer()`, i.e. the stats' `keyHashRangeArrays`.
        Consumers in `order` come first (with `()` when they own nothing), then the rest.
        """
        grouped: dict[Consumer, tuple[HashRange, ...]] = dict.fromkeys(order, ())
        if not len(self.starts):
            return grouped
        by_owner = np.argsort(self.owners, kind="stable")  # rows stay ascending per owner
        own, lows, highs = self.owners[by_owner], self.starts[by_owner], self.ends[by_owner]
        first = np.ones(len(own), bool)
        first[1:] = (own[1:] != own[:-1]) | (highs[:-1] + 1 < lows[1:])
        heads = np.flatnonzero(first)
        tails = np.append(heads[1:] - 1, len(own) - 1)
        own, lows, highs = own[heads], lows[heads], highs[tails]
        cuts = [0, *(np.flatnonzero(own[1:] != own[:-1]) + 1).tolist(), len(own)]
        lows_l, highs_l = lows.tolist(), highs.tolist()
        for a, b in itertools.pairwise(cuts):
            pairs = tuple(zip(lows_l[a:b], highs_l[a:b], strict=True))
            grouped[self.table[int(own[a])]] = pairs
        return grouped


def _no_snapshot() -> Assignments:
    raise AssertionError("an impact made of known moves has no snapshots")


def merge_ranges(ranges: Iterable[HashRange]) -> list[HashRange]:
    """Sort and merge ranges that overlap or touch (`prev.end >= next.start - 1`)."""
    merged: list[HashRange] = []
    for start, end in sorted(ranges):
        if merged and merged[-1][1] >= start - 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class Impact:
    """What one add or remove changed: the hash ranges that moved between consumers.

    Computed lazily from the snapshots before and after. `removed(c)` are the ranges the
    broker reports as lost by `c` (merged); a 4.0 broker marks as draining every hash of
    those ranges for which `c` still holds unacknowledged messages (see `draining`).
    """

    __slots__ = ("_after", "_before", "_moves", "consumer", "operation")

    def __init__(
        self,
        operation: str,
        consumer: Consumer,
        before: Callable[[], Assignments],
        after: Callable[[], Assignments],
    ) -> None:
        self.operation = operation  # "add" or "remove"
        self.consumer = consumer
        self._before = before
        self._after = after
        self._moves: tuple[RangeMove, ...] | None = None

    @classmethod
    def of_moves(cls, operation: str, consumer: Consumer, moves: tuple[RangeMove, ...]) -> Impact:
        """An impact whose moves the selector knows already (no snapshots to diff)."""
        impact = cls(operation, consumer, _no_snapshot, _no_snapshot)
        impact._moves = moves
        return impact

    @property
    def moves(self) -> tuple[RangeMove, ...]:
        """Maximal runs of hashes whose owner changed, ascending."""
        if self._moves is None:
            self._moves = diff_assignments(self._before(), self._after())
        return self._moves

    def removed(self, consumer: Consumer) -> tuple[HashRange, ...]:
        return tuple(merge_ranges((m.start, m.end) for m in self.moves if m.before is consumer))

    def added(self, consumer: Consumer) -> tuple[HashRange, ...]:
        return tuple(merge_ranges((m.start, m.end) for m in self.moves if m.after is consumer))

    def removed_by_consumer(self) -> dict[Consumer, tuple[HashRange, ...]]:
        losers = dict.fromkeys(m.before for m in self.moves if m.before is not None)
        return {c: self.removed(c) for c in losers if c is not None}

    def draining(self, pending: Mapping[Consumer, Iterable[int]]) -> dict[Consumer, list[int]]:
        """Hashes a 4.0 broker starts draining: pending-ack hashes that moved away from their
        holder, for every holder other than the consumer being added or removed."""
        result: dict[Consumer, list[int]] = {}
        for holder, hashes in pending.items():
            if holder is self.consumer:
                continue
            lost = self.removed(holder)
            hit = sorted({h for h in hashes if any(s <= h <= e for s, e in lost)})
            if hit:
                result[holder] = hit
        return result


def diff_assignments(before: Assignments, after: Assignments) -> tuple[RangeMove, ...]:
    """Every maximal run of hashes whose owner differs between two snapshots, ascending."""
    bounds = [before.starts, before.ends + 1, after.starts, after.ends + 1]
    cuts = sorted_unique(np.concatenate(bounds))
    if len(cuts) < 2:
        return ()
    lows = cuts[:-1]
    table, to_common_b, to_common_a = _common_table(before.table, after.table)
    was = _remap(before.owner_of(lows), to_common_b)
    now = _remap(after.owner_of(lows), to_common_a)
    changed = was != now
    # a run starts at a changed segment whose predecessor is unchanged or moved differently
    first = changed.copy()
    first[1:] &= ~(changed[:-1] & (was[1:] == was[:-1]) & (now[1:] == now[:-1]))
    starts_at = np.flatnonzero(first)
    if not len(starts_at):
        return ()  # nothing changed owner
    ends_at = np.append(starts_at[1:], len(lows))
    moves = []
    for i, j in zip(starts_at.tolist(), ends_at.tolist(), strict=True):
        last = i + int(np.argmin(changed[i:j])) if not changed[i:j].all() else j
        b, a = int(was[i]), int(now[i])
        moves.append(
            RangeMove(
                int(lows[i]),
                int(cuts[last]) - 1,
                table[b] if b >= 0 else None,
                table[a] if a >= 0 else None,
            )
        )
    return tuple(moves)


def _common_table(
    left: Sequence[Consumer], right: Sequence[Consumer]
) -> tuple[list[Consumer], I64, I64]:
    if left is right:
        ids = np.arange(len(left), dtype=np.int64)
        return list(left), ids, ids
    table = list(left)
    index = {c: i for i, c in enumerate(table)}
    for consumer in right:
        if consumer not in index:
            index[consumer] = len(table)
            table.append(consumer)
    return table, np.arange(len(left), dtype=np.int64), _i64([index[c] for c in right])


def _remap(owners: I64, mapping: I64) -> I64:
    if len(mapping) == 0:
        return np.full(len(owners), -1, np.int64)
    return np.where(owners >= 0, mapping[np.clip(owners, 0, None)], -1)


def sorted_unique(values: I64) -> I64:
    """np.unique by sorting (numpy 2's hash-based unique is slower on these arrays)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _i64(values: Sequence[int]) -> I64:
    return np.asarray(values, dtype=np.int64)


class Selector:
    """Common surface of every selector; subclasses keep the broker's own state."""

    kind: SelectorKind
    pulsar: PulsarLine = "4.0"

    def __init__(self) -> None:
        self._consumers: list[Consumer] = []

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        """Connected consumers in join order (the order of the stats' `consumers[]`)."""
        return tuple(self._consumers)

    def key_hash(self, key: bytes) -> int:
        return sticky_key_hash(key, selector=self.kind, pulsar=self.pulsar)

    def select_key(self, key: bytes) -> Consumer | None:
        return self.select(self.key_hash(key))

    def select(self, key_hash: int) -> Consumer | None:
        raise NotImplementedError

    def assignments(self) -> Assignments:
        raise NotImplementedError

    def ranges(self) -> dict[Consumer, tuple[HashRange, ...]]:
        """Per connected consumer in join order: its ranges as `keyHashRangeArrays` lists
        them (sorted, touching ranges merged; `()` where the broker omits the field)."""
        return {c: r for c, r in self.assignments().by_consumer(self._consumers).items()}

    def clone(self) -> Selector:
        """An independent copy sharing the consumer handles: for what-if questions."""
        memo: dict[int, object] = {id(c): c for c in self._known()}
        return copy.deepcopy(self, memo)

    def _known(self) -> list[Consumer]:
        return list(self._consumers)

    def what_if(
        self, *, join: Sequence[Consumer] = (), leave: Sequence[Consumer] = ()
    ) -> tuple[Selector, list[Impact]]:
        """Apply leaves then joins to a clone; the live selector is untouched."""
        other = self.clone()
        impacts = [other.remove(c) for c in leave] + [other.add(c) for c in join]
        return other, impacts

    def add(self, consumer: Consumer) -> Impact:
        raise NotImplementedError

    def remove(self, consumer: Consumer) -> Impact:
        raise NotImplementedError

    def _impact(self, operation: str, consumer: Consumer, before: Assignments) -> Impact:
        after = self.assignments()
        return Impact(operation, consumer, lambda: before, lambda: after)
