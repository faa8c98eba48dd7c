"""Failover active-consumer model: ordering, partition index, modulo, the ring, what-ifs."""

from __future__ import annotations

import pytest

from pulsar_lens.core.failover import (
    RING_REPLICAS,
    FailoverConsumer,
    build_ring,
    compare_churn,
    compare_modes,
    compute_partitioned,
    compute_topics,
    java_default_bytes,
    java_order_key,
    leading_group_size,
    order_consumers,
    partition_index,
    partition_names,
    ring_owner,
    select_active_consumer,
)
from pulsar_lens.core.hashing import murmur3_31

C = FailoverConsumer
GOLDEN_CONSUMERS = (C("c1"), C("c2"), C("c3"), C("standby", 1))
GOLDEN_TOPICS = {
    "persistent://public/default/orders": 4,
    "persistent://public/default/audit": 0,
    "persistent://public/default/billing": 0,
    "persistent://public/default/émoji-🙂": 0,
}


def names(assignment: dict[str, FailoverConsumer]) -> dict[str, str]:
    return {topic: consumer.name for topic, consumer in assignment.items()}


def test_order_consumers_priority_then_name() -> None:
    ordered = order_consumers([C("b", 1), C("z", 0), C("a", 1), C("y", 0)])
    assert [c.name for c in ordered] == ["y", "z", "a", "b"]


def test_order_consumers_compares_names_as_java_strings() -> None:
    ordered = order_consumers([C("a9"), C("ｚy"), C("a10"), C("é"), C("\U0001f600x"), C("a")])
    assert [c.name for c in ordered] == ["a", "a10", "a9", "é", "\U0001f600x", "ｚy"]


def test_java_order_key_differs_from_code_points_beyond_the_bmp() -> None:
    assert "\U0001f600" > "\uff5a"
    assert java_order_key("\U0001f600") < java_order_key("\uff5a")


def test_order_consumers_is_stable_for_equal_names() -> None:
    first, second = C("same", 0), C("same", 0)
    assert order_consumers([first, second])[0] is first


def test_leading_group_size_counts_the_best_level() -> None:
    assert leading_group_size(order_consumers([C("a", 3), C("b", 3), C("c", 4)])) == 2
    assert leading_group_size(order_consumers([C("a"), C("b")])) == 2
    assert leading_group_size(()) == 0


@pytest.mark.parametrize(
    ("topic", "index"),
    [
        ("persistent://t/ns/x-partition-3", 3),
        ("persistent://t/ns/x", -1),
        ("persistent://t/ns/x-partition-03", -1),
        ("persistent://t/ns/x-partition-+3", -1),
        ("persistent://t/ns/x-partition--1", -1),
        ("persistent://t/ns/x-partition-", -1),
        ("persistent://t/ns/x-partition-2147483647", 2147483647),
        ("persistent://t/ns/x-partition-2147483648", -1),
        ("persistent://t/ns/a-partition-1-partition-2", 2),
        ("persistent://t/ns/x-partition-1 ", -1),
        ("persistent://t/ns/x-partition-\u0663", 3),  # Java's parseInt reads Arabic-Indic 3
        ("persistent://t/ns/x-partition-\U0001d7d1", -1),  # a digit outside the BMP
    ],
)
def test_partition_index_follows_topic_name_rules(topic: str, index: int) -> None:
    assert partition_index(topic) == index


def test_partition_names_append_suffix() -> None:
    assert partition_names("persistent://t/ns/x", 2) == (
        "persistent://t/ns/x-partition-0",
        "persistent://t/ns/x-partition-1",
    )


def test_select_active_consumer_none_without_consumers() -> None:
    assert select_active_consumer("persistent://t/ns/x", []) is None


def test_select_active_consumer_modulo_over_leading_group() -> None:
    group = [C("b"), C("a"), C("backup", 1)]
    picks = [select_active_consumer(f"persistent://t/ns/x-partition-{i}", group) for i in range(4)]
    assert [p.name for p in picks if p] == ["a", "b", "a", "b"]


def test_build_ring_has_100_points_per_distinct_consumer() -> None:
    ring = build_ring(order_consumers([C("c1"), C("c2")]))
    assert RING_REPLICAS == 100
    assert len(ring.points) == 200
    assert list(ring.points) == sorted(ring.points)


def test_build_ring_collision_goes_to_later_index() -> None:
    # "a" + "10" == "a1" + "0": ten points shared, each owned by "a1" (index 1)
    ring = build_ring(order_consumers([C("a"), C("a1")]))
    shared = {murmur3_31(f"a1{j}".encode()) for j in range(10)}
    assert len(ring.points) == 190
    assert {ring.owners[ring.points.index(p)] for p in shared} == {1}


def test_ring_owner_takes_ceiling_point_and_wraps() -> None:
    ring = build_ring(order_consumers([C("c1"), C("c2")]))
    assert ring_owner(ring, ring.points[5]) == ring.owners[5]
    assert ring_owner(ring, ring.points[5] + 1) == ring.owners[6]
    assert ring_owner(ring, ring.points[-1] + 1) == ring.owners[0]
    assert ring_owner(ring, 0) == ring.owners[0]


def test_java_default_bytes_replaces_lone_surrogates() -> None:
    assert java_default_bytes("a\ud800b") == b"a?b"
    assert java_default_bytes("é") == "é".encode()


def test_compute_topics_golden_modulo_from_pulsar_4_0_7() -> None:
    # recorded from activeConsumerName on a Pulsar 4.0.7 standalone (default settings)
    assert names(compute_topics(GOLDEN_TOPICS, GOLDEN_CONSUMERS)) == {
        "persistent://public/default/orders-partition-0": "c1",
        "persistent://public/default/orders-partition-1": "c2",
        "persistent://public/default/orders-partition-2": "c3",
        "persistent://public/default/orders-partition-3": "c1",
        "persistent://public/default/audit": "c3",
        "persistent://public/default/billing": "c2",
        "persistent://public/default/émoji-🙂": "c3",
    }


def test_compute_topics_golden_consistent_from_pulsar_4_0_7() -> None:
    # recorded with activeConsumerFailoverConsistentHashing=true
    assert names(compute_topics(GOLDEN_TOPICS, GOLDEN_CONSUMERS, consistent_hashing=True)) == {
        "persistent://public/default/orders-partition-0": "c2",
        "persistent://public/default/orders-partition-1": "c2",
        "persistent://public/default/orders-partition-2": "c3",
        "persistent://public/default/orders-partition-3": "c1",
        "persistent://public/default/audit": "c3",
        "persistent://public/default/billing": "c2",
        "persistent://public/default/émoji-🙂": "c3",
    }


def test_compute_partitioned_empty_without_consumers() -> None:
    assert compute_partitioned("persistent://t/ns/x", 3, []) == {}


def test_compare_modes_lists_partitions_that_differ() -> None:
    result = compare_modes("persistent://public/default/orders", 4, GOLDEN_CONSUMERS)
    assert result.moved == ("persistent://public/default/orders-partition-0",)
    assert result.modulo["persistent://public/default/orders-partition-0"].name == "c1"
    assert result.consistent["persistent://public/default/orders-partition-0"].name == "c2"


def test_compare_churn_ring_moves_only_the_leavers_partitions() -> None:
    before = [C(f"consumer-{i}") for i in range(5)]
    after = before[:2] + before[3:]  # consumer-2 leaves
    topic = "persistent://public/default/churn"
    result = compare_churn(topic, 64, before, after)
    owned = compute_partitioned(topic, 64, before, consistent_hashing=True)
    leavers = tuple(p for p, c in owned.items() if c.name == "consumer-2")
    assert result.moved_consistent == leavers
    assert len(result.moved_modulo) > len(result.moved_consistent)


def test_ring_in_ascii_jvm_hashes_non_ascii_as_question_marks() -> None:
    # Java 17 under a POSIX locale: String.getBytes() writes '?' for every non-ASCII character
    ascii_ring = build_ring(order_consumers([C("é1"), C("x")]), charset="ANSI_X3.4-1968")
    plain_ring = build_ring(order_consumers([C("?1"), C("x")]))
    assert set(ascii_ring.points) == set(plain_ring.points)
    assert set(build_ring(order_consumers([C("é1"), C("x")])).points) != set(plain_ring.points)


def test_ascii_jvm_sends_every_topic_to_the_later_of_two_non_ascii_names() -> None:
    pair = [C("é"), C("ü")]
    topics = {f"persistent://t/ns/charset-{i}": 0 for i in range(50)}
    ascii_pick = compute_topics(topics, pair, charset="ascii")
    assert {c.name for c in ascii_pick.values()} == {"ü"}
    assert {c.name for c in compute_topics(topics, pair).values()} == {"é", "ü"}
