"""Key_Shared consumer selectors of a Pulsar 4.0 broker: consistent hashing, auto split, sticky.

Each selector takes `add`/`remove` of `Consumer` handles (identity, not name, as the broker
does), answers `select(hash)` and reports `ranges()` exactly like the topic stats'
`keyHashRangeArrays`. Every `add`/`remove` returns an `Impact`: the ranges that moved, which a
4.0 broker turns into draining hashes. The 3.0.x variants live in `core.legacy_selectors`.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from core.assignments import I64, Assignments, Consumer, Impact, RangeMove, sorted_unique
from core.errors import ModelError
from core.hashing import (
    CONSISTENT_HASH_MAX,
    RANGE_SIZE,
    PulsarLine,
    SelectorKind,
    murmur3_31,
    sticky_key_hash,
)
from core.model import HashRange

__all__ = [
    "AutoSplitSelector",
    "ConsistentHashingSelector",
    "Consumer",
    "Impact",
    "RangeMove",
    "Selector",
    "StickySelector",
    "make_selector",
]

DEFAULT_POINTS = 100
"""`subscriptionKeySharedConsistentHashingReplicaPoints` default."""


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


class AutoSplitSelector(Selector):
    """`HashRangeAutoSplitStickyKeyConsumerSelector` (consistent hashing turned off)."""

    kind: SelectorKind = "auto-split"

    def __init__(self, *, range_size: int = RANGE_SIZE, pulsar: PulsarLine = "4.0") -> None:
        super().__init__()
        if range_size < 2 or range_size & (range_size - 1):
            raise ModelError("range size must be a power of 2 of at least 2")
        self.range_size = range_size
        self.pulsar = pulsar
        self._ends: list[int] = []  # sorted range ends
        self._owner: dict[int, Consumer] = {}
        self._end_of: dict[Consumer, int] = {}

    def add(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        if not self._ends:
            self._put(self.range_size, consumer)
        else:
            end = self._biggest_range_end()
            at = bisect.bisect_left(self._ends, end)
            lower = self._ends[at - 1] if at else 0
            if end - lower <= 1:
                raise ModelError(
                    "No more range can assigned to new consumer, assigned consumers "
                    f"{len(self._ends)}"
                )
            self._put(end - ((end - lower) >> 1), consumer)
        self._consumers.append(consumer)
        return self._impact("add", consumer, before)

    def remove(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        end = self._end_of.pop(consumer, None)
        if end is not None:
            if end == self.range_size and len(self._ends) > 1:
                lower = self._ends[-2]
                heir = self._owner.pop(lower)
                self._ends.remove(lower)
                self._owner[end] = heir
                self._end_of[heir] = end
            else:
                self._ends.remove(end)
                del self._owner[end]
        if consumer in self._consumers:
            self._consumers.remove(consumer)
        return self._impact("remove", consumer, before)

    def select(self, key_hash: int) -> Consumer | None:
        if not self._ends:
            return None
        slot = key_hash % self.range_size if self.pulsar == "3.0" else key_hash
        return self._owner[self._ends[bisect.bisect_left(self._ends, slot)]]

    def assignments(self) -> Assignments:
        rows, start = [], 0
        for end in self._ends:
            rows.append((start, end, self._owner[end]))
            start = end + 1
        return Assignments.from_rows(rows)

    def _put(self, end: int, consumer: Consumer) -> None:
        bisect.insort(self._ends, end)
        self._owner[end] = consumer
        self._end_of[consumer] = end

    def _biggest_range_end(self) -> int:
        biggest, target, previous = 0, self.range_size, 0
        for end in self._ends:
            if end - previous > biggest:  # strictly larger: ties go to the lowest range
                biggest, target = end - previous, end
            previous = end
        return target


class StickySelector(Selector):
    """`HashRangeExclusiveStickyKeyConsumerSelector`: consumers bring their own ranges."""

    kind: SelectorKind = "sticky"

    def __init__(self, *, pulsar: PulsarLine = "4.0") -> None:
        super().__init__()
        self.pulsar = pulsar
        self._starts: list[int] = []
        self._at: dict[int, tuple[HashRange, Consumer]] = {}

    def add(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        validate_sticky_ranges(consumer.sticky_ranges)
        holder = self._conflicting(consumer.sticky_ranges)
        if holder is not None:
            raise ModelError(f"Range conflict with consumer {describe(holder)}")
        for start, end in consumer.sticky_ranges:
            if start not in self._at:
                bisect.insort(self._starts, start)
            self._at[start] = ((start, end), consumer)
        self._consumers.append(consumer)
        return self._impact("add", consumer, before)

    def remove(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        for start in [s for s, (_, c) in self._at.items() if c is consumer]:
            del self._at[start]
            self._starts.remove(start)
        if consumer in self._consumers:
            self._consumers.remove(consumer)
        return self._impact("remove", consumer, before)

    def select(self, key_hash: int) -> Consumer | None:
        slot = key_hash % RANGE_SIZE
        at = bisect.bisect_right(self._starts, slot) - 1
        if at < 0:
            return None
        (start, end), consumer = self._at[self._starts[at]]
        return consumer if start <= slot <= end else None

    def assignments(self) -> Assignments:
        return Assignments.from_rows(self._at[s][0] + (self._at[s][1],) for s in self._starts)

    def _conflicting(self, ranges: tuple[HashRange, ...]) -> Consumer | None:
        # the broker looks at the floor and the ceiling entry of each range's start
        for start, end in ranges:
            at = bisect.bisect_right(self._starts, start) - 1
            for index in (at, bisect.bisect_left(self._starts, start)):
                if 0 <= index < len(self._starts):
                    (s, e), holder = self._at[self._starts[index]]
                    if max(start, s) <= min(end, e):
                        return holder
        return None


def validate_sticky_ranges(ranges: tuple[HashRange, ...]) -> None:
    """The broker's own checks on a STICKY consumer's ranges, with its wording."""
    if not ranges:
        raise ModelError("Ranges for KeyShared policy must not be empty.")
    ordered = sorted(ranges, key=lambda r: r[0])
    for i, (start, end) in enumerate(ordered):
        if start > end:
            raise ModelError(f"Fixed hash range start > end for range: [{start},{end}]")
        if i < len(ordered) - 1:
            nxt = ordered[i + 1]
            if max(start, nxt[0]) <= min(end, nxt[1]):
                raise ModelError(
                    f"Consumer's own ranges conflict: [{start},{end}] overlaps with "
                    f"[{nxt[0]},{nxt[1]}]"
                )


def describe(consumer: Consumer) -> str:
    """How the broker's `Consumer.toString()` names a consumer, as far as the model knows."""
    return f"Consumer{{consumerName={consumer.name}}}"


class ConsistentHashingSelector(Selector):
    """4.0 `ConsistentHashingStickyKeyConsumerSelector` with `ConsumerNameIndexTracker`.

    Each consumer gets `points` ring points at `h31(name + "\\0" + nameIndex + "\\0" + i)
    % 65535 + 1`; a point already taken stays with its first owner and the newcomer queues
    behind it (FIFO takeover when the owner leaves).
    """

    kind: SelectorKind = "consistent"

    def __init__(self, *, points: int = DEFAULT_POINTS, name_encoding: str = "utf-8") -> None:
        super().__init__()
        if points < 1:
            raise ModelError("the number of replica points must be at least 1")
        self.points = points
        # the broker hashes `String.getBytes()`: the JVM's default charset (UTF-8 on Java 18+;
        # on Java 17 the locale's, e.g. US-ASCII with '?' for other characters under LANG=C)
        self.name_encoding = name_encoding
        # point -> (selected, *colliding); tuples, so a clone can share them
        self._ring: dict[int, tuple[Consumer, ...]] = {}
        self._indexes: dict[str, set[int]] = {}
        self._index_of: dict[Consumer, int] = {}
        self._table: list[Consumer] = []  # append-only: owner ids stay valid in old states
        self._id_of: dict[Consumer, int] = {}
        self._pts: I64 = np.zeros(0, np.int64)
        self._own: I64 = np.zeros(0, np.int64)
        self._cache: Assignments | None = None

    def clone(self) -> ConsistentHashingSelector:
        other = copy.copy(self)
        other._consumers = list(self._consumers)
        other._ring = dict(self._ring)
        other._indexes = {name: set(used) for name, used in self._indexes.items()}
        other._index_of = dict(self._index_of)
        other._table = list(self._table)
        other._id_of = dict(self._id_of)
        return other  # the point/owner arrays are never mutated in place: shared safely

    def collisions(self) -> dict[int, tuple[Consumer, ...]]:
        """Ring points claimed more than once: (owner, *queued in FIFO order)."""
        return {point: entry for point, entry in self._ring.items() if len(entry) > 1}

    def name_index(self, consumer: Consumer) -> int:
        """The consumer's `ConsumerNameIndexTracker` index (-1 when not connected)."""
        return self._index_of.get(consumer, -1)

    def point_hashes(self, consumer: Consumer, name_index: int) -> list[int]:
        prefix = f"{consumer.name}\0{name_index}\0"
        return [
            murmur3_31(f"{prefix}{i}".encode(self.name_encoding, "replace")) % CONSISTENT_HASH_MAX
            + 1
            for i in range(self.points)
        ]

    def add(self, consumer: Consumer) -> Impact:
        before = self._state()
        used = self._indexes.setdefault(consumer.name, set())
        index = next(i for i in range(len(used) + 1) if i not in used)
        used.add(index)
        self._index_of[consumer] = index
        cid = self._id_of.setdefault(consumer, len(self._table))
        if cid == len(self._table):
            self._table.append(consumer)
        fresh = []
        for point in self.point_hashes(consumer, index):
            entry = self._ring.get(point)
            if entry is None:
                self._ring[point] = (consumer,)
                fresh.append(point)
            else:
                self._ring[point] = (*entry, consumer)
        if fresh:
            new = sorted_unique(np.asarray(fresh, np.int64))
            at = np.searchsorted(self._pts, new)
            self._pts = np.insert(self._pts, at, new)
            self._own = np.insert(self._own, at, cid)
        self._consumers.append(consumer)
        return self._lazy_impact("add", consumer, before)

    def remove(self, consumer: Consumer) -> Impact:
        before = self._state()
        index = self._index_of.pop(consumer, None)
        if index is not None:
            self._indexes[consumer.name].discard(index)
            if not self._indexes[consumer.name]:
                del self._indexes[consumer.name]
            self._drop_points(consumer, self.point_hashes(consumer, index))
        if consumer in self._consumers:
            self._consumers.remove(consumer)
        return self._lazy_impact("remove", consumer, before)

    def _drop_points(self, consumer: Consumer, points: list[int]) -> None:
        # the broker pops the selected consumer (the next colliding one takes over, FIFO)
        # and drops it from the colliding list: together, the entry without this consumer
        changed: dict[int, Consumer | None] = {}
        for point in points:
            entry = self._ring.get(point)
            if entry is None:
                continue  # a second point of this consumer at the same hash: already done
            rest = tuple(c for c in entry if c is not consumer)
            if rest:
                self._ring[point] = rest
            else:
                del self._ring[point]
            if entry[0] is consumer:
                changed[point] = rest[0] if rest else None
        if not changed:
            return
        keys = np.asarray(sorted(changed), np.int64)
        at = np.searchsorted(self._pts, keys)
        heirs = [changed[int(k)] for k in keys]
        own = self._own.copy()
        for pos, heir in zip(at.tolist(), heirs, strict=True):
            if heir is not None:
                own[pos] = self._id_of[heir]
        gone = at[[h is None for h in heirs]]
        self._pts = np.delete(self._pts, gone)
        self._own = np.delete(own, gone)

    def select(self, key_hash: int) -> Consumer | None:
        if not len(self._pts):
            return None
        at = int(np.searchsorted(self._pts, key_hash))
        return self._table[int(self._own[at % len(self._pts)])]

    def assignments(self) -> Assignments:
        if self._cache is None:
            self._cache = ring_assignments(self._pts, self._own, self._table)
        return self._cache

    def _state(self) -> Callable[[], Assignments]:
        """The current snapshot, computed only if asked for (the arrays are never mutated)."""
        cached, pts, own, table = self._cache, self._pts, self._own, self._table
        if cached is not None:
            return lambda: cached
        return lambda: ring_assignments(pts, own, table)

    def _lazy_impact(
        self, operation: str, consumer: Consumer, before: Callable[[], Assignments]
    ) -> Impact:
        self._cache = None
        return Impact(operation, consumer, before, self._state())


def ring_assignments(
    points: I64,
    owners: I64,
    table: list[Consumer],
    *,
    low: int = 1,
    high: int = CONSISTENT_HASH_MAX,
) -> Assignments:
    """The 4.0 snapshot of a ring: point p owns (previous point, p], the first point also owns
    the tail after the last point; consecutive ranges of one consumer are joined."""
    if not len(points):
        return Assignments(points, points, owners, table)
    starts = np.concatenate([[low], points[:-1] + 1])
    ends, own = points, owners
    if int(points[-1]) != high:
        starts = np.append(starts, points[-1] + 1)
        ends = np.append(points, high)
        own = np.append(owners, owners[0])
    keep = np.ones(len(own), bool)
    keep[1:] = own[1:] != own[:-1]
    first = np.flatnonzero(keep)
    last = np.append(first[1:] - 1, len(own) - 1)
    return Assignments(starts[first], ends[last], own[first], table)


ConsistentVariant = Literal["4.0", "3.0.7", "3.0.3", "3.0.0"]


def make_selector(
    kind: SelectorKind,
    *,
    points: int = DEFAULT_POINTS,
    pulsar: PulsarLine = "4.0",
    variant: ConsistentVariant | None = None,
    name_encoding: str = "utf-8",
) -> Selector:
    """A fresh selector; `variant` picks a 3.0.x consistent-hashing implementation."""
    if kind == "auto-split":
        return AutoSplitSelector(pulsar=pulsar)
    if kind == "sticky":
        return StickySelector(pulsar=pulsar)
    chosen = variant or ("4.0" if pulsar == "4.0" else "3.0.7")
    if chosen == "4.0":
        return ConsistentHashingSelector(points=points, name_encoding=name_encoding)
    from core.legacy_selectors import LegacyConsistentSelector

    return LegacyConsistentSelector(chosen, points=points, name_encoding=name_encoding)


def moved_hashes(moves: tuple[RangeMove, ...], hashes: list[int]) -> dict[int, RangeMove]:
    """For each hash inside a move, the move that carried it."""
    starts = [m.start for m in moves]
    found = {}
    for h in hashes:
        at = bisect.bisect_right(starts, h) - 1
        if at >= 0 and moves[at].start <= h <= moves[at].end:
            found[h] = moves[at]
    return found
