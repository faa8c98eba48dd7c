"""Key_Shared selectors that hand out ranges rather than ring points: auto split and sticky.

`AutoSplitSelector` is the broker's `HashRangeAutoSplitStickyKeyConsumerSelector` (used when
`subscriptionKeySharedUseConsistentHashing=false`); `StickySelector` is
`HashRangeExclusiveStickyKeyConsumerSelector` (KeySharedMode.STICKY), with the broker's own
validation and wording.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Sequence

from pulsar_lens.core.assignments import Assignments, Consumer, Impact, RangeMove, Selector
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import RANGE_SIZE, PulsarLine, SelectorKind
from pulsar_lens.core.model import HashRange


class AutoSplitSelector(Selector):
    """`HashRangeAutoSplitStickyKeyConsumerSelector` (consistent hashing turned off)."""

    kind: SelectorKind = "auto-split"

    def __init__(self, *, range_size: int = RANGE_SIZE, pulsar: PulsarLine = "4.0") -> None:
        super().__init__()
        if range_size < 2 or range_size & (range_size - 1):
            raise ModelError(
                "range size must be a power of 2 of at least 2",
                model="auto-split",
                field="range_size",
                value=str(range_size),
            )
        self.range_size = range_size
        self.pulsar = pulsar
        self._ends: list[int] = []  # sorted range ends
        self._owner: dict[int, Consumer] = {}
        self._end_of: dict[Consumer, int] = {}
        # (-size, end) of every range, stale entries skipped when popped: the biggest range
        # (the lowest on ties, as the broker's scan picks it) in log n, so n joins are n log n
        self._sizes: list[tuple[int, int]] = []

    @classmethod
    def from_range_ends(
        cls,
        owners: Sequence[tuple[Consumer, int]],
        *,
        range_size: int = RANGE_SIZE,
        pulsar: PulsarLine = "4.0",
    ) -> AutoSplitSelector:
        """A selector in an observed state: each consumer owns the range ending at its end
        (as the broker's stats show it), listed in join order. What-ifs start from here."""
        selector = cls(range_size=range_size, pulsar=pulsar)
        ends = [end for _, end in owners]
        if len(set(ends)) != len(ends) or (ends and range_size not in ends):
            raise ModelError(
                f"auto split range ends must be distinct and include {range_size}, got {ends}",
                model="auto-split",
                field="range ends",
                value=str(ends),
            )
        for consumer, end in owners:
            selector._put(end, consumer)
            selector._consumers.append(consumer)
        return selector

    def add(self, consumer: Consumer) -> Impact:
        if not self._ends:
            self._put(self.range_size, consumer)
            move = RangeMove(0, self.range_size, None, consumer)
        else:
            end = self._biggest_range_end()
            at = bisect.bisect_left(self._ends, end)
            lower = self._ends[at - 1] if at else 0
            if end - lower <= 1:
                raise ModelError(
                    "No more range can assigned to new consumer, assigned consumers "
                    f"{len(self._ends)}",
                    model="auto-split",
                    field="consumers",
                    value=str(len(self._ends)),
                )
            split = end - ((end - lower) >> 1)
            move = RangeMove(lower + 1 if at else 0, split, self._owner[end], consumer)
            self._put(split, consumer)
        self._consumers.append(consumer)
        return Impact.of_moves("add", consumer, (move,))

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
            self._sizes = [(-self._size(e), e) for e in self._ends]  # removals are rare
            heapq.heapify(self._sizes)
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
        at = bisect.bisect_left(self._ends, end)
        self._ends.insert(at, end)
        self._owner[end] = consumer
        self._end_of[consumer] = end
        for changed in self._ends[at : at + 2]:  # this range and the one it was cut from
            heapq.heappush(self._sizes, (-self._size(changed), changed))

    def _size(self, end: int) -> int:
        """`end - previous end` (from 0 for the first range), the broker's measure."""
        at = bisect.bisect_left(self._ends, end)
        return end - (self._ends[at - 1] if at else 0)

    def _biggest_range_end(self) -> int:
        """The end of the biggest range; the lowest of equal ones (as the broker scans)."""
        while self._sizes:
            negative, end = self._sizes[0]
            if end in self._owner and self._size(end) == -negative:
                return end
            heapq.heappop(self._sizes)  # a range since cut or removed
        return self.range_size


def scan_split_ends(joins: int, *, range_size: int = RANGE_SIZE) -> list[int]:
    """Range ends after `joins` consumers join an auto-split selector, found the broker's way:
    a scan of every range for the biggest at each join (O(n) per join). The oracle the
    selector's heap is tested against, and the baseline of its benchmark."""
    ends: list[int] = []
    for _ in range(joins):
        if not ends:
            ends.append(range_size)
            continue
        biggest, target, previous = 0, range_size, 0
        for end in ends:
            if end - previous > biggest:
                biggest, target = end - previous, end
            previous = end
        at = ends.index(target)
        lower = ends[at - 1] if at else 0
        if target - lower <= 1:
            break
        bisect.insort(ends, target - ((target - lower) >> 1))
    return ends


class StickySelector(Selector):
    """`HashRangeExclusiveStickyKeyConsumerSelector`: consumers bring their own ranges.

    On 3.0 (`pulsar="3.0"`, read from 3.0.7's class and driven in tests/jvm) the broker
    delivers a hash to the consumer of its floor and ceiling range ends when both are the same
    consumer's: a gap between two ranges of one consumer (no other consumer's range between
    them) is that consumer's too. 4.0 delivers only hashes inside a range. `ranges()` lists
    the ranges asked for on both lines (what the stats report); `assignments()` and `select()`
    say who receives each hash.
    """

    kind: SelectorKind = "sticky"

    def __init__(self, *, pulsar: PulsarLine = "4.0") -> None:
        super().__init__()
        self.pulsar = pulsar
        self._starts: list[int] = []
        self._at: dict[int, tuple[HashRange, Consumer]] = {}

    @classmethod
    def holding(
        cls, consumers: Sequence[Consumer], *, pulsar: PulsarLine = "4.0"
    ) -> StickySelector:
        """A selector in an observed state: `consumers` joined in this order, each with the
        ranges it asked for; `ModelError` as `add` raises it when ranges are invalid or
        conflict. What-ifs start from here; no join's impact is computed on the way (two
        `assignments()` and the moves a join, half the time of a rebuild from stats)."""
        selector = cls(pulsar=pulsar)
        for consumer in consumers:
            selector._place(consumer)
        return selector

    def add(self, consumer: Consumer) -> Impact:
        before = self.assignments()
        self._place(consumer)
        return self._impact("add", consumer, before)

    def _place(self, consumer: Consumer) -> None:
        """`consumer` and its ranges joined, or `ModelError` (nothing changed then)."""
        validate_sticky_ranges(consumer.sticky_ranges)
        holder = self._conflicting(consumer.sticky_ranges)
        if holder is not None:
            raise ModelError(
                f"Range conflict with consumer {describe(holder)}",
                model="sticky",
                field="ranges",
                value=describe(holder),
            )
        for start, end in consumer.sticky_ranges:
            if start not in self._at:
                bisect.insort(self._starts, start)
            self._at[start] = ((start, end), consumer)
        self._consumers.append(consumer)

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
        if start <= slot <= end:
            return consumer
        following = at + 1
        if self.pulsar == "3.0" and following < len(self._starts):  # floor and ceiling ends
            return consumer if self._at[self._starts[following]][1] is consumer else None
        return None

    def assignments(self) -> Assignments:
        rows = [self._at[s][0] + (self._at[s][1],) for s in self._starts]
        if self.pulsar == "3.0":
            gaps = [
                (end + 1, nxt - 1, consumer)
                for (_, end, consumer), (nxt, _, other) in itertools.pairwise(rows)
                if other is consumer and end + 1 < nxt
            ]
            rows = sorted(rows + gaps, key=lambda row: row[0])
        return Assignments.from_rows(rows)

    def ranges(self) -> dict[Consumer, tuple[HashRange, ...]]:
        """The ranges each consumer asked for, as the stats list them (on 3.0 it also
        receives the gaps between its own ranges: `assignments()`)."""
        asked = Assignments.from_rows(self._at[s][0] + (self._at[s][1],) for s in self._starts)
        return dict(asked.by_consumer(self._consumers).items())

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
        raise ModelError(
            "Ranges for KeyShared policy must not be empty.", model="sticky", field="ranges"
        )
    ordered = sorted(ranges, key=lambda r: r[0])
    for i, (start, end) in enumerate(ordered):
        if start > end:
            raise ModelError(
                f"Fixed hash range start > end for range: [{start},{end}]",
                model="sticky",
                field="ranges",
                value=f"[{start},{end}]",
            )
        if i < len(ordered) - 1:
            nxt = ordered[i + 1]
            if max(start, nxt[0]) <= min(end, nxt[1]):
                raise ModelError(
                    f"Consumer's own ranges conflict: [{start},{end}] overlaps with "
                    f"[{nxt[0]},{nxt[1]}]",
                    model="sticky",
                    field="ranges",
                    value=f"[{start},{end}]",
                )


def describe(consumer: Consumer) -> str:
    """How the broker's `Consumer.toString()` names a consumer, as far as the model knows."""
    return f"Consumer{{consumerName={consumer.name}}}"
