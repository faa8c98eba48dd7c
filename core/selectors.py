"""Key_Shared consumer selectors of a Pulsar 4.0 broker: consistent hashing, auto split, sticky.

Each selector takes `add`/`remove` of `Consumer` handles (identity, not name, as the broker
does), answers `select(hash)` and reports `ranges()` exactly like the topic stats'
`keyHashRangeArrays`. Every `add`/`remove` returns an `Impact`: the ranges that moved, which a
4.0 broker turns into draining hashes. Auto split and sticky live in `core.range_selectors`,
the 3.0.x consistent-hashing variants in `pulsar_lens.core.legacy_selectors`; all are exported here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Literal

import numpy as np

from pulsar_lens.core.assignments import (
    I64,
    Assignments,
    Consumer,
    Impact,
    RangeMove,
    Selector,
    sorted_unique,
)
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import (
    CONSISTENT_HASH_MAX,
    DEFAULT_POINTS,
    PulsarLine,
    SelectorKind,
    murmur3_31,
)
from pulsar_lens.core.range_selectors import (
    AutoSplitSelector,
    StickySelector,
    describe,
    validate_sticky_ranges,
)

__all__ = [
    "DEFAULT_POINTS",
    "AutoSplitSelector",
    "ConsistentHashingSelector",
    "Consumer",
    "Impact",
    "RangeMove",
    "Selector",
    "StickySelector",
    "describe",
    "make_selector",
    "ring_assignments",
    "validate_sticky_ranges",
]


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
            raise ModelError(
                "the number of replica points must be at least 1",
                model="consistent-hashing",
                field="points",
                value=str(points),
            )
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
    from pulsar_lens.core.legacy_selectors import LegacyConsistentSelector

    return LegacyConsistentSelector(chosen, points=points, name_encoding=name_encoding)
