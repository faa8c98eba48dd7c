"""The Key_Shared selectors against Pulsar's own test vectors and their own invariants."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.core.assignments import diff_assignments, merge_ranges
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.legacy_selectors import LegacyConsistentSelector
from pulsar_lens.core.selectors import (
    AutoSplitSelector,
    ConsistentHashingSelector,
    Consumer,
    Selector,
    StickySelector,
    make_selector,
    ring_assignments,
)

GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "data" / "hashes.json").read_text()
)


def by_name(selector: Selector) -> dict[str, list[list[int]]]:
    return {c.name: [list(r) for r in rs] for c, rs in selector.ranges().items()}


def joined(selector: Selector, names: list[str]) -> list[Consumer]:
    handles = [Consumer(n) for n in names]
    for handle in handles:
        selector.add(handle)
    return handles


@pytest.mark.parametrize(
    "vector", ["consistent_4_0_three_points", "consistent_4_0_docs_nine_points"]
)
def test_consistent_ranges_match_pulsar_vectors(vector: str) -> None:
    case = GOLDEN[vector]
    selector = ConsistentHashingSelector(points=case["points"])
    joined(selector, case["consumers"])
    assert by_name(selector) == case["ranges"]


def test_consistent_join_impact_yields_the_docs_draining_hashes() -> None:
    case = GOLDEN["consistent_4_0_docs_nine_points"]
    selector = ConsistentHashingSelector(points=9)
    (c1,) = joined(selector, ["c1"])
    impact = selector.add(Consumer("c2"))
    pending = [sticky_key_hash(k.encode()) for k in case["pending_keys_of_c1"]]
    assert impact.draining({c1: pending}) == {c1: case["draining_hashes_of_c1"]}


def test_consistent_ranges_partition_the_hash_space_and_agree_with_select() -> None:
    selector = ConsistentHashingSelector(points=20)
    joined(selector, ["a", "b", "a", "c", "b"])
    rows = selector.assignments().rows()
    assert rows[0][0] == 1 and rows[-1][1] == 65535
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in itertools.pairwise(rows))
    rng = random.Random(1)
    for start, end, owner in rows:
        for h in {start, end, rng.randint(start, end)}:
            assert selector.select(h) is owner


def test_consistent_name_index_is_the_lowest_free_among_same_names() -> None:
    selector = ConsistentHashingSelector(points=5)
    first, second, third = joined(selector, ["dup", "dup", "dup"])
    assert [selector.name_index(c) for c in (first, second, third)] == [0, 1, 2]
    selector.remove(second)
    assert selector.name_index(second) == -1
    (fourth,) = joined(selector, ["dup"])
    assert selector.name_index(fourth) == 1
    assert selector.name_index(Consumer("other")) == -1


def test_consistent_rejoin_with_the_freed_index_restores_the_ranges() -> None:
    selector = ConsistentHashingSelector(points=30)
    handles = joined(selector, ["x", "x", "y"])
    before = sorted((c.name, r) for c, r in selector.ranges().items())
    selector.remove(handles[0])
    joined(selector, ["x"])
    assert sorted((c.name, r) for c, r in selector.ranges().items()) == before


def _colliding_point(selector: ConsistentHashingSelector, handles: list[Consumer]) -> int:
    seen: dict[int, Consumer] = {}
    for handle in handles:
        for point in selector.point_hashes(handle, selector.name_index(handle)):
            if point in seen and seen[point] is not handle:
                return point
            seen.setdefault(point, handle)
    raise AssertionError("no collision among these consumers")


def test_consistent_collision_first_comer_keeps_the_point_then_fifo_takeover() -> None:
    selector = ConsistentHashingSelector(points=100)
    handles = joined(selector, [f"consumer-{i}" for i in range(40)])
    point = _colliding_point(selector, handles)
    owners = [h for h in handles if point in selector.point_hashes(h, 0)]
    assert selector.select(point) is owners[0]
    impact = selector.remove(owners[0])
    assert selector.select(point) is owners[1]
    assert any(m.after is owners[1] and m.start <= point <= m.end for m in impact.moves)


def test_consistent_join_moves_hashes_only_to_the_newcomer() -> None:
    selector = ConsistentHashingSelector(points=50)
    joined(selector, ["a", "b", "c"])
    newcomer = Consumer("d")
    impact = selector.add(newcomer)
    assert impact.moves and all(m.after is newcomer for m in impact.moves)
    assert merge_ranges((m.start, m.end) for m in impact.moves) == list(selector.ranges()[newcomer])


def test_consistent_leave_moves_hashes_only_away_from_the_leaver() -> None:
    selector = ConsistentHashingSelector(points=50)
    a, b, c = joined(selector, ["a", "b", "c"])
    owned = selector.ranges()[b]
    impact = selector.remove(b)
    assert all(m.before is b and m.after in (a, c) for m in impact.moves)
    assert impact.removed(b) == owned
    assert b not in selector.ranges()


def test_consistent_incremental_state_equals_a_fresh_build() -> None:
    incremental = ConsistentHashingSelector(points=40)
    handles = joined(incremental, [f"n{i % 7}" for i in range(20)])
    for handle in handles[::3]:
        incremental.remove(handle)
    fresh = ConsistentHashingSelector(points=40)
    survivors = [h for i, h in enumerate(handles) if i % 3]
    for handle in survivors:
        fresh.add(handle)
    # same name indexes only if the removed ones were re-filled; compare hash -> name instead
    rng = random.Random(2)
    probes = [rng.randint(1, 65535) for _ in range(2000)]
    incremental_names = [incremental.select(h).name for h in probes]  # type: ignore[union-attr]
    assert len(set(incremental_names)) == 7
    assert (
        incremental.assignments().rows()
        == ring_assignments(incremental._pts, incremental._own, incremental._table).rows()
    )


def test_consistent_last_leave_empties_everything() -> None:
    selector = ConsistentHashingSelector(points=5)
    (only,) = joined(selector, ["only"])
    impact = selector.remove(only)
    assert selector.select(100) is None and selector.ranges() == {}
    assert impact.removed(only) == ((1, 65535),)


def test_consistent_names_hash_with_the_jvm_charset() -> None:
    utf8 = ConsistentHashingSelector(points=3)
    ascii_jvm = ConsistentHashingSelector(points=3, name_encoding="ascii")
    question = ConsistentHashingSelector(points=3)
    joined(utf8, ["Zoë", "other"])
    joined(ascii_jvm, ["Zoë", "other"])
    joined(question, ["Zo?", "other"])
    assert by_name(ascii_jvm)["Zoë"] == by_name(question)["Zo?"] != by_name(utf8)["Zoë"]


def test_auto_split_matches_pulsar_vector() -> None:
    case = GOLDEN["auto_split_range_64"]
    selector = AutoSplitSelector(range_size=case["range_size"])
    joined(selector, case["consumers"])
    assert by_name(selector) == case["ranges"]


def test_auto_split_removing_the_top_holder_moves_the_next_lower_up() -> None:
    selector = AutoSplitSelector()
    c1, c2, _c3 = joined(selector, ["c1", "c2", "c3"])
    assert by_name(selector) == {"c1": [[32769, 65536]], "c2": [[16385, 32768]], "c3": [[0, 16384]]}
    impact = selector.remove(c1)
    assert by_name(selector) == {"c2": [[16385, 65536]], "c3": [[0, 16384]]}
    assert impact.removed(c1) == ((32769, 65536),) and impact.added(c2) == ((32769, 65536),)


def test_auto_split_removing_a_lower_range_merges_it_upwards() -> None:
    selector = AutoSplitSelector()
    _c1, _c2, c3 = joined(selector, ["c1", "c2", "c3"])
    selector.remove(c3)
    assert by_name(selector) == {"c1": [[32769, 65536]], "c2": [[0, 32768]]}


def test_auto_split_same_names_get_distinct_ranges() -> None:
    selector = AutoSplitSelector(range_size=64)
    handles = joined(selector, ["My-consumer"] * 3)
    assert len({selector.ranges()[h] for h in handles}) == 3


def test_auto_split_refuses_when_no_range_can_be_split() -> None:
    selector = AutoSplitSelector(range_size=2)
    joined(selector, ["a", "b"])
    with pytest.raises(
        ModelError, match="No more range can assigned to new consumer, assigned consumers 2"
    ):
        selector.add(Consumer("c"))


def test_auto_split_selects_by_ceiling() -> None:
    selector = AutoSplitSelector()
    c1, c2 = joined(selector, ["c1", "c2"])
    assert selector.select(1) is c2 and selector.select(32768) is c2
    assert selector.select(32769) is c1 and selector.select(65535) is c1


def test_sticky_select_follows_pulsar_vector() -> None:
    case = GOLDEN["sticky_exclusive"]["select"]
    selector = StickySelector()
    c1 = Consumer("c1", tuple(map(tuple, case["c1"])))  # type: ignore[arg-type]
    c2 = Consumer("c2", tuple(map(tuple, case["c2"])))  # type: ignore[arg-type]
    selector.add(c1)
    assert all(selector.select(h) is c1 for h in case["after_c1"]["c1"])
    assert all(selector.select(h) is None for h in case["after_c1"]["none"])
    selector.add(c2)
    assert all(selector.select(h) is c2 for h in case["after_c2"]["c2"])
    selector.remove(c1)
    assert all(selector.select(h) is None for h in case["after_removing_c1"]["none"])
    selector.remove(c2)
    assert all(selector.select(h) is None for h in case["after_removing_c2"]["none"])


def test_sticky_ranges_are_reported_as_given() -> None:
    case = GOLDEN["sticky_exclusive"]["ranges_unchanged"]
    selector = StickySelector()
    for name, ranges in case.items():
        selector.add(Consumer(name, tuple(map(tuple, ranges))))  # type: ignore[arg-type]
    assert by_name(selector) == case


def test_sticky_touching_ranges_of_one_consumer_are_reported_merged() -> None:
    selector = StickySelector()
    selector.add(Consumer("a", ((10, 19), (0, 9), (30, 40))))
    assert by_name(selector) == {"a": [[0, 19], [30, 40]]}


def _sticky_with_2_5() -> StickySelector:
    selector = StickySelector()
    selector.add(Consumer("holder", ((2, 5),)))
    return selector


@pytest.mark.parametrize("bad", GOLDEN["sticky_exclusive"]["single_range_rejected"])
def test_sticky_rejects_each_pulsar_conflict_vector(bad: list[int]) -> None:
    selector = _sticky_with_2_5()
    with pytest.raises(ModelError):
        selector.add(Consumer("new", ((bad[0], bad[1]),)))
    assert len(selector.consumers) == 1


@pytest.mark.parametrize("bad", GOLDEN["sticky_exclusive"]["multiple_ranges_rejected"])
def test_sticky_rejects_each_multi_range_conflict_vector(bad: list[list[int]]) -> None:
    selector = _sticky_with_2_5()
    with pytest.raises(ModelError) as refused:
        selector.add(Consumer("new", tuple((a, b) for a, b in bad)))
    assert str(refused.value) == "Range conflict with consumer Consumer{consumerName=holder}"


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ((), "Ranges for KeyShared policy must not be empty."),
        (((8, 6),), "Fixed hash range start > end for range: [8,6]"),
        (((10, 20), (0, 10)), "Consumer's own ranges conflict: [0,10] overlaps with [10,20]"),
    ],
)
def test_sticky_validation_uses_the_broker_wording(
    ranges: tuple[tuple[int, int], ...], message: str
) -> None:
    with pytest.raises(ModelError) as refused:
        StickySelector().add(Consumer("x", ranges))
    assert str(refused.value) == message


def test_sticky_hash_zero_is_never_selected_on_4_0() -> None:
    selector = StickySelector()
    selector.add(Consumer("zero", ((0, 0),)))
    key = next(
        f"k{i}".encode()
        for i in range(10**6)
        if sticky_key_hash(f"k{i}".encode(), selector="auto-split", pulsar="3.0") == 0
    )
    assert selector.key_hash(key) == 1 and selector.select_key(key) is None


def test_legacy_3_0_3_listing_matches_pulsar_vector_without_wrap_tail() -> None:
    case = GOLDEN["consistent_3_0_3_three_points"]
    selector = LegacyConsistentSelector("3.0.3", points=case["points"])
    joined(selector, case["consumers"])
    assert by_name(selector) == case["ranges"]
    last = max(end for ranges in case["ranges"].values() for _, end in ranges)
    assert case["wrap_tail"]["range"] == [last + 1, 2147483646]
    assert selector.select(last + 1).name == case["wrap_tail"]["consumer"]  # type: ignore[union-attr]


def test_legacy_3_0_0_listing_matches_pulsar_vector() -> None:
    case = GOLDEN["consistent_3_0_0_three_points"]
    selector = LegacyConsistentSelector("3.0.0", points=case["points"])
    joined(selector, case["consumers"])
    assert by_name(selector) == case["ranges"]


def test_legacy_3_0_7_lists_the_wrap_tail_and_uses_the_name_index() -> None:
    plain = LegacyConsistentSelector("3.0.3", points=3)
    indexed = LegacyConsistentSelector("3.0.7", points=3)
    joined(plain, ["consumer1", "consumer2", "consumer3"])
    joined(indexed, ["consumer1", "consumer2", "consumer3"])
    ranges = by_name(indexed)
    assert ranges != by_name(plain)
    tails = [r for rs in ranges.values() for r in rs if r[1] == 2147483646]
    assert len(tails) == 1


def test_legacy_3_0_7_later_consumer_takes_a_colliding_point() -> None:
    selector = LegacyConsistentSelector("3.0.7", points=1)
    first, second = Consumer("same"), Consumer("same")
    selector.add(first)
    selector.remove(first)
    selector.add(first)
    selector.add(second)  # index 1: its own point, no collision
    assert {c.name for c in selector.ranges()} == {"same"}
    assert len([c for c, r in selector.ranges().items() if r]) == 2


def test_make_selector_picks_each_variant() -> None:
    assert isinstance(make_selector("consistent"), ConsistentHashingSelector)
    assert isinstance(make_selector("auto-split"), AutoSplitSelector)
    assert isinstance(make_selector("sticky"), StickySelector)
    legacy = make_selector("consistent", pulsar="3.0")
    assert isinstance(legacy, LegacyConsistentSelector) and legacy.variant == "3.0.7"
    old = make_selector("consistent", pulsar="3.0", variant="3.0.0")
    assert isinstance(old, LegacyConsistentSelector) and old.variant == "3.0.0"


def test_auto_split_from_range_ends_reproduces_the_observed_state() -> None:
    joined = AutoSplitSelector()
    consumers = [Consumer(f"c{i}") for i in range(5)]
    for consumer in consumers:
        joined.add(consumer)
    ranges = joined.ranges()
    seeded = AutoSplitSelector.from_range_ends([(c, ranges[c][0][1]) for c in consumers])
    assert seeded.ranges() == ranges
    newcomer = Consumer("c5")
    seeded.add(newcomer)
    joined.add(newcomer)
    assert seeded.ranges() == joined.ranges()


def test_auto_split_from_range_ends_rejects_a_state_the_broker_cannot_have() -> None:
    a, b = Consumer("a"), Consumer("b")
    with pytest.raises(ModelError, match="distinct and include 65536"):
        AutoSplitSelector.from_range_ends([(a, 100), (b, 100)])
    with pytest.raises(ModelError, match="distinct and include 65536"):
        AutoSplitSelector.from_range_ends([(a, 100)])


@pytest.mark.parametrize("kind", ["consistent", "auto-split"])
def test_diff_assignments_of_unchanged_state_moves_nothing(kind: str) -> None:
    selector = make_selector(kind)  # type: ignore[arg-type]
    for name in ("a", "b", "c"):
        selector.add(Consumer(name))
    state = selector.assignments()
    assert diff_assignments(state, state) == ()


def test_auto_split_joins_match_the_brokers_scan_and_stay_n_log_n() -> None:
    from pulsar_lens.core.range_selectors import AutoSplitSelector, scan_split_ends

    for joins in (1, 2, 3, 7, 100, 1000, 3000):
        selector = AutoSplitSelector()
        for i in range(joins):
            selector.add(Consumer(f"c{i}"))
        assert selector._ends == scan_split_ends(joins), joins
    big = AutoSplitSelector()
    for i in range(15_000):  # quadratic before: over a minute; see benchmarks/hashing.py
        big.add(Consumer(f"c{i}"))
    assert len(big.ranges()) == 15_000


def test_auto_split_impacts_are_the_moves_of_the_snapshots() -> None:
    from pulsar_lens.core.range_selectors import AutoSplitSelector

    rng = random.Random(7)
    selector = AutoSplitSelector()
    present: list[Consumer] = []
    for step in range(400):
        before = selector.assignments()
        if present and rng.random() < 0.3:
            leaving = present.pop(rng.randrange(len(present)))
            impact = selector.remove(leaving)
        else:
            joining = Consumer(f"c{step}")
            present.append(joining)
            impact = selector.add(joining)
        assert impact.moves == diff_assignments(before, selector.assignments()), step
