"""`coverage_runs` (from the ranges' ends) against counting every hash in an array, as
sticky-ranges did: the same maximal runs, for any ranges, out-of-space and empty ones too."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.core.keyshared.ranges import STICKY_TOP, coverage_runs

ends = st.integers(min_value=-5, max_value=STICKY_TOP + 5)
small = st.integers(min_value=-2, max_value=40)


def dense_runs(ranges: list[tuple[int, int]], high: int) -> list[tuple[int, int, int]]:
    """Every hash counted, then cut where the count changes."""
    delta = np.zeros(high + 2, np.int64)
    for start, end in ranges:
        lo, hi = max(start, 0), min(end, high)
        if lo <= hi:
            delta[lo] += 1
            delta[hi + 1] -= 1
    counts = np.cumsum(delta)[: high + 1]
    cuts = np.flatnonzero(np.diff(counts)) + 1
    starts = np.concatenate([[0], cuts])
    last = np.append(cuts - 1, len(counts) - 1)
    return [(int(s), int(e), int(counts[s])) for s, e in zip(starts, last, strict=True)]


@given(st.lists(st.tuples(ends, ends), max_size=12))
@example([])
@example([(0, STICKY_TOP)])
@example([(0, 10), (11, STICKY_TOP)])
@example([(5, 3), (STICKY_TOP + 1, STICKY_TOP + 3), (-4, -1)])
@example([(0, 10), (0, 10), (10, 10)])
def test_coverage_runs_equal_every_hash_counted(ranges: list[tuple[int, int]]) -> None:
    assert coverage_runs(ranges) == dense_runs(ranges, STICKY_TOP)


@given(st.lists(st.tuples(small, small), max_size=8), st.integers(min_value=0, max_value=30))
def test_coverage_runs_in_a_small_space_cover_it_exactly(
    ranges: list[tuple[int, int]], high: int
) -> None:
    found = coverage_runs(ranges, high=high)
    assert found == dense_runs(ranges, high)
    assert found[0][0] == 0 and found[-1][1] == high
    assert all(a[1] + 1 == b[0] and a[2] != b[2] for a, b in pairwise(found))
