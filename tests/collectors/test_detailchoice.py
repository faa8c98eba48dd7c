"""The per-topic calls a poll chooses over the part indexes' columns are those the topic by
topic choice made (tests/collectors/reference_details.py), poll after poll of a rotation."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_lens.collectors.bulkparts import INDEX_SCHEMA
from pulsar_lens.collectors.detailchoice import (
    DetailRotation,
    candidates_of,
    most_backlogged,
    needing,
)
from tests.collectors import reference_details as reference

# few names, so brokers report the same topic and backlogs tie; names past ASCII sort by
# code point in Python and by UTF-8 bytes in Arrow, which agree
NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f", "é", "ü", "z", "日本", "\U0001f600", "a:b"])
ROW = st.tuples(NAMES, st.booleans(), st.sampled_from([-3, 0, 0, 1, 5, 5, 7, 2**62]))


def index_of(rows: list[tuple[str, bool, int]]) -> pa.Table:
    return pa.table(
        {
            "topic": [f"persistent://t/n/{name}" for name, _, _ in rows],
            "namespace": ["t/n"] * len(rows),
            "bundle": [None] * len(rows),
            "needs_details": [needs for _, needs, _ in rows],
            "backlog": [backlog for _, _, backlog in rows],
        },
        schema=INDEX_SCHEMA,
    )


INDEXES = st.dictionaries(
    st.sampled_from(["b1:8080", "b2:8080", "b3:8080"]),
    st.none() | st.lists(ROW, max_size=12).map(index_of),
    max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(
    polls=st.lists(
        st.tuples(INDEXES, st.integers(0, 6), st.integers(-1, 8)), min_size=1, max_size=6
    )
)
def test_the_columnwise_choice_is_the_topic_by_topic_one(
    polls: list[tuple[dict[str, pa.Table | None], int, int]],
) -> None:
    rotation, old_rotation = DetailRotation(), reference.DetailRotation()
    for indexes, limit, budget in polls:
        candidates = candidates_of(indexes)
        old_candidates = reference.candidates(indexes)
        assert candidates.to_pylist() == [
            dict(zip(("broker", "topic", "needs_details", "backlog"), c, strict=True))
            for c in old_candidates
        ]
        lagging = most_backlogged(candidates, limit)
        assert lagging == reference.most_backlogged(old_candidates, limit)
        needs = needing(candidates, sorted(lagging))
        old_needs = reference.needing(old_candidates, lagging)
        assert sorted(needs.topics.to_pylist()) == sorted(old_needs)
        chosen = rotation.pick(needs.topics, budget, first=sorted(lagging))
        assert chosen == old_rotation.pick(sorted(old_needs), budget, first=sorted(lagging))
        assert needs.broker_of(chosen) == {t: old_needs[t] for t in chosen}
        assert rotation._last == old_rotation._last


def test_the_largest_backlogs_are_found_among_many_ties() -> None:
    rows = [(f"t{i:04d}", False, 10 if i % 3 else 20) for i in range(3000)]
    candidates = candidates_of({"b": index_of([(n, d, b) for n, d, b in rows])})
    # the 1,000 topics of backlog 20 tie: the first 20 of them by name
    assert most_backlogged(candidates, 20) == {
        f"persistent://t/n/t{i:04d}" for i in range(0, 60, 3)
    }


def test_a_rotation_covers_every_topic_before_it_asks_one_again() -> None:
    rotation = DetailRotation()
    topics = [f"t{i}" for i in range(10)]
    seen = [rotation.pick(topics, 4) for _ in range(3)]
    assert seen[0] + seen[1] + seen[2][:2] == sorted(topics)
    assert seen[2][2:] == ["t0", "t1"]  # then those detailed longest ago, by name
    assert rotation.pick(topics, 3, first=["t9", "gone"]) == ["t9", "t2", "t3"]


def test_a_rotation_forgets_the_topics_long_gone_as_the_old_one_did() -> None:
    rotation, old = DetailRotation(), reference.DetailRotation()
    for topics, budget in (([f"t{i}" for i in range(10)], 10), (["t0"], 1)):
        assert rotation.pick(topics, budget) == old.pick(topics, budget)
    assert rotation._last == old._last == {"t0": 2}  # ten remembered, more than four times one
