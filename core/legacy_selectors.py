"""Consistent-hashing Key_Shared selectors of Pulsar 3.0.x, for clusters not yet on 4.0.

Ring points and hashes are the full 31-bit murmur3 value (no 16-bit reduction).

- 3.0.0 (releases 3.0.0-3.0.2): point key `name + i`; colliding consumers share a point in a
  list sorted by name and `select` picks `list[hash % size]`; ranges listed per point from 0,
  without the wrap-around tail.
- 3.0.3 (3.0.3-3.0.6): as 3.0.0 with the key `name + "\0" + i`.
- 3.0.7 (3.0.7 and later 3.0.x): key `name + "\0" + nameIndex + "\0" + i`; the later
  consumer takes a colliding point; ranges listed per point from 0 plus the wrap-around tail
  `[last + 1, 2147483646]` for the first point's consumer.

3.0.0/3.0.2 and 3.0.7 were read from the released broker jars; 3.0.3-3.0.6 follow the
change log (the separator arrived in 3.0.3, the name index in 3.0.7).
"""

from __future__ import annotations

import bisect
from typing import Literal

from pulsar_lens.core.assignments import Assignments, Consumer, Impact, Selector
from pulsar_lens.core.hashing import DEFAULT_POINTS, INT31_MASK, murmur3_31
from pulsar_lens.core.model import HashRange

LegacyVariant = Literal["3.0.7", "3.0.3", "3.0.0"]

RELEASES: dict[str, str] = {
    "3.0.0": "3.0.0-3.0.2",
    "3.0.3": "3.0.3-3.0.6",
    "3.0.7": "3.0.7 and later 3.0.x",
}

RING_TOP = INT31_MASK - 1
"""3.0.7 lists the wrap-around tail up to Integer.MAX_VALUE - 1."""


def _java_order(name: str) -> bytes:
    """Java `String.compareTo` order (UTF-16 code units)."""
    return name.encode("utf-16-be", "surrogatepass")


class LegacyConsistentSelector(Selector):
    """One of the 3.0.x `ConsistentHashingStickyKeyConsumerSelector` implementations."""

    kind = "consistent"
    pulsar = "3.0"

    def __init__(
        self, variant: LegacyVariant, *, points: int = DEFAULT_POINTS, name_encoding: str = "utf-8"
    ) -> None:
        super().__init__()
        self.variant = variant
        self.points = points
        self.name_encoding = name_encoding
        self._ring: dict[int, list[Consumer]] = {}
        self._sorted: list[int] = []
        self._index_of: dict[Consumer, int] = {}  # 3.0.7 ConsumerNameIndexTracker
        self._refs: dict[Consumer, int] = {}
        self._used: dict[str, set[int]] = {}

    def point_key(self, consumer: Consumer, i: int, name_index: int = 0) -> bytes:
        if self.variant == "3.0.0":
            key = f"{consumer.name}{i}"
        elif self.variant == "3.0.3":
            key = f"{consumer.name}\0{i}"
        else:
            key = f"{consumer.name}\0{name_index}\0{i}"
        return key.encode(self.name_encoding, "replace")

    def add(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        if self.variant == "3.0.7":
            self._add_replacing(consumer)
        else:
            for i in range(self.points):
                entry = self._entry(murmur3_31(self.point_key(consumer, i)))
                if consumer not in entry:
                    entry.append(consumer)
                    entry.sort(key=lambda c: _java_order(c.name))
        self._consumers.append(consumer)
        return self._impact("add", consumer, before)

    def add_at_index(self, consumer: Consumer, name_index: int) -> Impact:
        """3.0.7: join holding `name_index` (as the tracker gives a namesake that joined when
        lower indexes were held), without the namesakes that held them ever joining."""
        if self.variant != "3.0.7":
            raise ValueError("only 3.0.7 gives consumers a name index")
        used = self._used.setdefault(consumer.name, set())
        if name_index in used:
            raise ValueError(f"name index {name_index} of {consumer.name!r} is held")
        used.add(name_index)
        self._index_of[consumer] = name_index
        return self.add(consumer)

    def _add_replacing(self, consumer: Consumer) -> None:
        for i in range(self.points):
            index = self._acquire(consumer)
            point = murmur3_31(self.point_key(consumer, i, index))
            previous = self._ring.get(point)
            self._entry(point)[:] = [consumer]
            if previous:
                self._release(previous[0])

    def remove(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        if self.variant == "3.0.7":
            index = self._index_of.get(consumer, -1)
            if index > -1:
                for i in range(self.points):
                    point = murmur3_31(self.point_key(consumer, i, index))
                    if self._ring.get(point, [None])[0] is consumer:
                        self._drop(point)
                        self._release(consumer)
        else:
            for i in range(self.points):
                point = murmur3_31(self.point_key(consumer, i))
                entry = self._ring.get(point)
                if entry is not None:
                    entry[:] = [c for c in entry if c is not consumer]
                    if not entry:
                        self._drop(point)
        if consumer in self._consumers:
            self._consumers.remove(consumer)
        return self._impact("remove", consumer, before)

    def select(self, key_hash: int) -> Consumer | None:
        if not self._sorted:
            return None
        at = bisect.bisect_left(self._sorted, key_hash)
        entry = self._ring[self._sorted[at % len(self._sorted)]]
        return entry[key_hash % len(entry)]

    def listed_ranges(self) -> dict[Consumer, list[HashRange]]:
        """`getConsumerKeyHashRanges()` of that release: unmerged, one range per point."""
        result: dict[Consumer, list[HashRange]] = {}
        start = 0
        for point in self._sorted:
            for consumer in self._ring[point]:
                result.setdefault(consumer, []).append((start, point))
            start = point + 1
        if self.variant == "3.0.7" and self._sorted and self._sorted[-1] != RING_TOP:
            first = self._ring[self._sorted[0]][0]
            result[first].append((self._sorted[-1] + 1, RING_TOP))
        return result

    def ranges(self) -> dict[Consumer, tuple[HashRange, ...]]:
        listed = self.listed_ranges()
        return {c: tuple(listed.get(c, ())) for c in self._consumers}

    def assignments(self) -> Assignments:
        """Each point's range with its first listed consumer (the owner on 3.0.7; on 3.0.0 to
        3.0.6 colliding consumers really share the range by `hash % size`)."""
        rows, start = [], 0
        for point in self._sorted:
            rows.append((start, point, self._ring[point][0]))
            start = point + 1
        if self._sorted and self._sorted[-1] < INT31_MASK:
            rows.append((self._sorted[-1] + 1, INT31_MASK, self._ring[self._sorted[0]][0]))
        return Assignments.from_rows(rows)

    def _entry(self, point: int) -> list[Consumer]:
        entry = self._ring.get(point)
        if entry is None:
            entry = self._ring[point] = []
            bisect.insort(self._sorted, point)
        return entry

    def _drop(self, point: int) -> None:
        del self._ring[point]
        self._sorted.remove(point)

    def _acquire(self, consumer: Consumer) -> int:
        if consumer not in self._index_of:
            used = self._used.setdefault(consumer.name, set())
            index = next(i for i in range(len(used) + 1) if i not in used)
            used.add(index)
            self._index_of[consumer] = index
        self._refs[consumer] = self._refs.get(consumer, 0) + 1
        return self._index_of[consumer]

    def _release(self, consumer: Consumer) -> None:
        self._refs[consumer] -= 1
        if self._refs[consumer] == 0:
            del self._refs[consumer]
            index = self._index_of.pop(consumer)
            self._used[consumer.name].discard(index)
            if not self._used[consumer.name]:
                del self._used[consumer.name]
