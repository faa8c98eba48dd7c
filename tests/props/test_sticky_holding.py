"""`StickySelector.holding` (a selector in an observed state, built without the impacts of
the joins) against joining the same consumers one `add` at a time: the same ranges, owners
and selections, or the same refusal, for valid, invalid, overlapping and duplicate ranges, on
both lines."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.core.assignments import Consumer
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import RANGE_SIZE
from pulsar_lens.core.range_selectors import StickySelector

points = st.integers(min_value=0, max_value=RANGE_SIZE - 1) | st.integers(0, 40)


@st.composite
def members(draw: st.DrawFn) -> list[list[tuple[int, int]]]:
    """Up to 5 consumers sharing disjoint ranges cut from sorted points (joins that fit),
    and now and then a range that is reversed, out of the space, or overlaps another."""
    cuts = sorted(set(draw(st.lists(points, min_size=2, max_size=16))))
    pieces = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    count = draw(st.integers(min_value=0, max_value=min(5, len(pieces) + 1)))
    asked: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for i, piece in enumerate(pieces if count else ()):  # each gets one first, if enough
        asked[i if i < count else draw(st.integers(0, count - 1))].append(piece)
    if count and draw(st.integers(0, 3)) == 0:  # one bad range somewhere
        bad = draw(st.tuples(st.integers(-3, RANGE_SIZE + 3), st.integers(-3, RANGE_SIZE + 3)))
        asked[draw(st.integers(0, count - 1))].append(bad)
    return asked


lines = st.sampled_from(["4.0", "3.0"])
probes = [0, 1, 20, 39, 40, RANGE_SIZE // 2, RANGE_SIZE - 1]


def one_by_one(consumers: list[Consumer], pulsar: str) -> StickySelector | str:
    selector = StickySelector(pulsar=pulsar)  # type: ignore[arg-type]
    try:
        for consumer in consumers:
            selector.add(consumer)
    except ModelError as exc:
        return str(exc)
    return selector


@given(members(), lines)
@example([[(0, 10)], [(11, 20), (30, 39)], [(21, 29)]], "3.0")
@example([[(0, 10)], [(5, 20)]], "4.0")
@example([[(5, 3)]], "4.0")
@example([[(0, 10), (0, 10)]], "4.0")
def test_holding_equals_joining_one_by_one(asked: list[list[tuple[int, int]]], pulsar: str) -> None:
    consumers = [Consumer(f"c{i}", tuple(r)) for i, r in enumerate(asked)]
    expected = one_by_one(consumers, pulsar)
    try:
        held: StickySelector | str = StickySelector.holding(consumers, pulsar=pulsar)  # type: ignore[arg-type]
    except ModelError as exc:
        held = str(exc)
    if isinstance(expected, str) or isinstance(held, str):
        assert held == expected
        return
    assert held.ranges() == expected.ranges()
    assert held.assignments().rows() == expected.assignments().rows()
    assert [held.select(h) for h in probes] == [expected.select(h) for h in probes]
    assert held.consumers == expected.consumers
