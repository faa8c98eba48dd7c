"""The failover active consumer of many topics over many consumer sets at once
(`core.failover_sets`) is the one `active_consumer_picker` picks for each, topic by topic:
both rules, both JVM charsets, names that sort differently in Java than in Python (UTF-16
order) or hash differently in US-ASCII, names sharing points, and topics whose
`-partition-` suffix is not a partition index."""

from __future__ import annotations

import random

import pytest

from pulsar_lens.core.failover import FailoverConsumer, active_consumer_picker
from pulsar_lens.core.failover_sets import (
    active_positions,
    consumer_sets,
    point_hashes,
    rule_positions,
)

ALPHABET = ("a", "b", "Z", "é", "😀", "\uffff", "\ue000", " ", "x-partition-5", "ü", "0")
SUFFIXES = ("", "-partition-01", "-partition-٣", "-partition-+1", "-partition-2147483648")


def random_sets(rng: random.Random, count: int) -> list[set[str]]:
    return [
        {
            "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) + str(rng.randint(0, 3))
            for _ in range(rng.randint(1, 5))
        }
        for _ in range(count)
    ]


def random_topics(rng: random.Random, count: int) -> list[str]:
    return [
        "persistent://t/n/"
        + rng.choice(("a", "é b", "x", "日本"))
        + (f"-partition-{rng.randint(0, 30)}" if rng.random() < 0.5 else rng.choice(SUFFIXES))
        for _ in range(count)
    ]


@pytest.mark.parametrize("charset", ["utf-8", "ascii"])
@pytest.mark.parametrize("consistent", [False, True], ids=["modulo", "ring"])
def test_failover_sets_pick_as_the_picker_does(charset: str, consistent: bool) -> None:
    rng = random.Random(f"{charset}{consistent}")
    sets = random_sets(rng, 120)
    topics = random_topics(rng, 1500)
    set_of = [rng.randint(-1, len(sets) - 1) for _ in topics]
    ordered = consumer_sets(sets)
    got = active_positions(ordered, set_of, topics, consistent_hashing=consistent, charset=charset)
    for position, topic, chosen in zip(got.tolist(), topics, set_of, strict=True):
        group = [FailoverConsumer(n) for n in sets[chosen]] if chosen >= 0 else []
        pick = active_consumer_picker(group, consistent_hashing=consistent, charset=charset)
        expected = pick(topic)
        assert (ordered.ordered[position] if position >= 0 else None) == (
            expected.name if expected else None
        ), (topic, sets[chosen] if chosen >= 0 else None)


def test_failover_sets_a_shared_point_goes_to_the_later_consumer() -> None:
    """Two names whose points coincide in US-ASCII ('é' and 'ü' both become '?'): the ring
    keeps the later one in the broker's order, as `build_ring` overwrites it."""
    names = {"é1", "ü1"}
    assert (point_hashes(["é1"], charset="ascii") == point_hashes(["ü1"], charset="ascii")).all()
    topics = random_topics(random.Random(5), 200)
    ordered = consumer_sets([names])
    got = active_positions(
        ordered, [0] * len(topics), topics, consistent_hashing=True, charset="ascii"
    )
    pick = active_consumer_picker(
        [FailoverConsumer(n) for n in names], consistent_hashing=True, charset="ascii"
    )
    assert [ordered.ordered[p] for p in got.tolist()] == [pick(t).name for t in topics]  # type: ignore[union-attr]
    assert {ordered.ordered[p] for p in got.tolist()} == {ordered.ordered[-1]}


def test_failover_sets_no_set_no_consumer() -> None:
    ordered = consumer_sets([])
    assert active_positions(ordered, [-1, -1], ["a", "b-partition-0"]).tolist() == [-1, -1]


def test_failover_sets_both_rules_at_once_equal_each_rule() -> None:
    rng = random.Random(9)
    sets, topics = random_sets(rng, 40), random_topics(rng, 400)
    set_of = [rng.randint(-1, len(sets) - 1) for _ in topics]
    ordered = consumer_sets(sets)
    modulo, ring = rule_positions(ordered, set_of, topics)
    assert modulo.tolist() == active_positions(ordered, set_of, topics).tolist()
    assert (
        ring.tolist() == active_positions(ordered, set_of, topics, consistent_hashing=True).tolist()
    )
