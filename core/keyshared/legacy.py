"""3.0.7's consistent hashing rebuilt from what a 3.0 broker's stats show.

A 3.0.7 broker (`core.legacy_selectors`, variant 3.0.7) lists one range per ring point,
`[previous point + 1, point]` from 0, plus the wrap-around tail up to 2147483646 for the first
point's consumer, in 31 bits: so every range end but the tail's is a ring point of its
consumer, `h31(name\\0index\\0i)` for some `i < points`. As for 4.0 (`core.keyshared.rebuild`)
the two settings the stats do not show are inferred from those ends:

* **name indexes** of consumers sharing a name: each namesake gets the index whose ring points
  explain most of its range ends (0 for a name held once);
* **replica points**: the largest `i` explaining a range end, plus one, is a lower bound L;
  the default 100 (when >= L), then L .. L+32 are tried, and the first ring that lists
  exactly the broker's ranges is kept; otherwise the closest, flagged as drifting.

A ring point taken by a later consumer (3.0.7's collisions go to the newcomer) is no range
end of its first owner, so the lower bound can only be too low, never too high.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pulsar_lens.core.assignments import Consumer
from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.core.keyshared.fit import (
    EXTRA_INDEXES,
    MAX_POINTS,
    greedy_indexes,
    point_candidates,
)
from pulsar_lens.core.keyshared.ranges import Member, differing_by_owner
from pulsar_lens.core.legacy_selectors import RING_TOP, LegacyConsistentSelector, LegacyVariant
from pulsar_lens.core.model import HashRange

VARIANT: LegacyVariant = "3.0.7"


@dataclass(frozen=True)
class LegacyFit:
    """The replayed ring of one subscription, its handles (one per member) and how it fits."""

    selector: LegacyConsistentSelector
    handles: list[Consumer]
    points: int
    note: str
    indexes: tuple[int, ...]
    drift: int
    reason: str


def point_numbers(name: str, index: int, charset: str, limit: int = MAX_POINTS) -> dict[int, int]:
    """Ring point -> its number `i` (< `limit`) for a consumer `name` holding `index`."""
    selector = LegacyConsistentSelector(VARIANT, name_encoding=charset)
    probe = Consumer(name)
    out: dict[int, int] = {}
    for i in range(limit - 1, -1, -1):  # the lowest number wins a (rare) repeated point
        out[murmur3_31(selector.point_key(probe, i, index))] = i
    return out


def _ends(member: Member) -> list[int]:
    return [end for _, end in member.ranges if end != RING_TOP]


def name_indexes_3_0(members: Sequence[Member], charset: str = "utf-8") -> tuple[int, ...]:
    """Each member's name index, as its range ends tell it."""
    chosen = [0] * len(members)
    by_name: dict[str, list[int]] = {}
    for position, member in enumerate(members):
        by_name.setdefault(member.name, []).append(position)
    for name, positions in by_name.items():
        if len(positions) == 1:
            continue
        candidates = len(positions) + EXTRA_INDEXES
        tables = [point_numbers(name, j, charset) for j in range(candidates)]
        scored = sorted(
            (-sum(end in tables[j] for end in _ends(members[p])), p, j)
            for p in positions
            for j in range(candidates)
        )
        for position, j in greedy_indexes(scored, positions, candidates).items():
            chosen[position] = j
    return tuple(chosen)


def lower_bound(members: Sequence[Member], indexes: Sequence[int], charset: str) -> tuple[int, int]:
    """The least replica points explaining the range ends, and how many ends no ring point
    (within MAX_POINTS) of their consumer explains."""
    lower = unexplained = 0
    for member, index in zip(members, indexes, strict=True):
        table = point_numbers(member.name, index, charset)
        for end in _ends(member):
            if end in table:
                lower = max(lower, table[end] + 1)
            else:
                unexplained += 1
    return lower, unexplained


def replay_3_0(
    members: Sequence[Member],
    indexes: Sequence[int],
    points: int,
    handles: Sequence[Consumer] | None = None,
    charset: str = "utf-8",
) -> tuple[LegacyConsistentSelector, list[Consumer]]:
    """A 3.0.7 ring with the members joined in order, each holding its given name index."""
    selector = LegacyConsistentSelector(VARIANT, points=points, name_encoding=charset)
    own = list(handles) if handles is not None else [Consumer(m.name) for m in members]
    for handle, index in zip(own, indexes, strict=True):
        selector.add_at_index(handle, index)
    return selector, own


def listed(
    selector: LegacyConsistentSelector, handles: Sequence[Consumer]
) -> list[list[HashRange]]:
    """Each handle's ranges as the 3.0.7 stats list them, sorted."""
    ranges = selector.listed_ranges()
    return [sorted(ranges.get(h, ())) for h in handles]


def fit_3_0(members: Sequence[Member], *, points: int = 0, charset: str = "utf-8") -> LegacyFit:
    """The 3.0.7 ring that lists the members' ranges: name indexes, replica points (`points`,
    or inferred when 0) and the hashes where it still differs from the broker."""
    indexes = name_indexes_3_0(members, charset)
    if points:
        tried, note = [points], "given"
    else:
        tried, note = point_candidates(*lower_bound(members, indexes, charset))
    observed = [sorted(m.ranges) for m in members]
    best: LegacyFit | None = None
    for candidate in tried:
        selector, handles = replay_3_0(members, indexes, candidate, charset=charset)
        modelled = listed(selector, handles)
        drift = 0 if modelled == observed else max(1, differing_by_owner(observed, modelled)[0])
        fit = LegacyFit(selector, handles, candidate, note, indexes, drift, "")
        if best is None or drift < best.drift:
            best = fit
        if not drift:
            return fit
    assert best is not None
    reason = (
        f"no 3.0.7 ring with {tried[0]}..{tried[-1]} replica points lists the broker's ranges"
        if len(tried) > 1
        else f"the 3.0.7 ring with {tried[0]} replica points lists other ranges"
    )
    return LegacyFit(best.selector, best.handles, best.points, note, indexes, best.drift, reason)
