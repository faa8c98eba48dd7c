"""`diff` compares consumers and subscriptions column-wise and looks only at the keys that
differ; its events are exactly those of the key-by-key comparison it replaced
(tests/collectors/reference_events.py), in the same order: on random pairs of polls with
consumers that join, leave, share a name (with the same or other ranges, in either order),
hash ranges empty or not, subscriptions listed twice, active consumers that move on every
subscription type, and topics left out by a failed stats call or a broker's failed bulk
answer."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

import pytest

from pulsar_lens.collectors.events import carry_forward, diff, diff_basis
from pulsar_lens.core.model import (
    ConsumerRecord,
    EndpointError,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
    content_table,
)
from pulsar_lens.core.tablerows import TableRows
from tests.collectors import reference_events as reference

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
BROKERS = ("b1:8080", "b2:8080")
TOPICS = tuple(f"persistent://t/ns/{name}" for name in ("a", "b", "é 名", "d"))
SUBSCRIPTIONS = ("s", "s ü", "k")
NAMES = ("c1", "c2", "😀", "")
RANGES = ((), ((0, 100),), ((101, 65535),), ((0, 10), (20, 30)), ((0, 100),))
TYPES = ("Exclusive", "Failover", "Shared", "Key_Shared", None)


def poll(rng: random.Random, at: dt.datetime, base: Snapshot | None) -> Snapshot:
    topics = tuple(
        TopicRecord(t, "t", "t/ns", owner_broker=rng.choice(BROKERS))
        for t in rng.sample(TOPICS, rng.randint(0, len(TOPICS)))
    )
    consumers = list(base.consumers) if base else []
    if base:  # some leave, some change ranges, a few are listed again
        consumers = [c for c in consumers if rng.random() > 0.2]
        consumers = [
            ConsumerRecord(c.topic, c.subscription, c.consumer_name, hash_ranges=rng.choice(RANGES))
            if rng.random() < 0.2
            else c
            for c in consumers
        ]
        if rng.random() < 0.3:
            rng.shuffle(consumers)
    for _ in range(rng.randint(0, 8)):
        consumers.append(
            ConsumerRecord(
                rng.choice(TOPICS),
                rng.choice(SUBSCRIPTIONS),
                rng.choice(NAMES),
                hash_ranges=rng.choice(RANGES),
            )
        )
    subscriptions = [
        SubscriptionRecord(t, s, rng.choice(TYPES), active_consumer_name=rng.choice((*NAMES, None)))
        for t in TOPICS
        for s in SUBSCRIPTIONS
        if rng.random() < 0.7
    ]
    subscriptions += rng.sample(subscriptions, min(len(subscriptions), rng.randint(0, 2)))
    errors = []
    if rng.random() < 0.2:
        local = rng.choice(TOPICS).rsplit("/", 1)[1]
        errors.append(EndpointError(f"GET /admin/v2/persistent/t/ns/{local}/stats", None, "x"))
    if rng.random() < 0.1:
        errors.append(
            EndpointError(f"GET http://{BROKERS[0]}/admin/v2/broker-stats/topics", 500, "x")
        )
    return Snapshot(
        "c",
        at,
        topics=topics,
        subscriptions=tuple(subscriptions),
        consumers=tuple(consumers),
        errors=tuple(errors),
    )


def as_tables(snapshot: Snapshot) -> Snapshot:
    """The same snapshot, its topics, subscriptions and consumers held as Arrow (as a poll
    makes them), sliced so that a column's chunks start past a row 0."""
    held: dict[str, TableRows] = {}
    for name in ("topics", "subscriptions", "consumers"):
        records = snapshot.records(name)
        table = content_table(name, (*records[:1], *records))
        held[name] = TableRows(name, table.slice(1))
    return dataclasses.replace(snapshot, **held)


@pytest.mark.parametrize("seed", range(400))
def test_the_columnwise_diff_equals_the_key_by_key_one(seed: int) -> None:
    rng = random.Random(seed)
    before = poll(rng, T0, None)
    after = poll(rng, T0 + dt.timedelta(seconds=30), before if rng.random() < 0.8 else None)
    expected = reference.diff(before, after)
    assert diff(before, after) == expected
    # read from the tables of either poll or both, as the poll after a restart diffs a
    # snapshot read back from the store against one polled
    assert diff(as_tables(before), as_tables(after)) == expected
    assert diff(before, as_tables(after)) == expected
    # what the collector keeps of the earlier poll: the columns the diff reads, no more
    assert diff(carry_forward(None, as_tables(before)), as_tables(after)) == expected


def test_what_is_kept_for_the_next_diff_holds_only_the_columns_it_reads() -> None:
    full = as_tables(poll(random.Random(7), T0, None))
    held = diff_basis(full)
    assert held.consumers.table.column_names == [  # type: ignore[attr-defined]
        "topic",
        "subscription",
        "consumer_name",
        "hash_ranges",
    ]
    assert held.topics.table.column_names == ["topic", "owner_broker"]  # type: ignore[attr-defined]
    assert len(held.subscriptions) == len(full.subscriptions)
    with pytest.raises(TypeError, match="only the columns"):  # never records with fields missing
        list(held.consumers)
    with pytest.raises(TypeError, match="read them with columns_of"):
        held.content_tables()
    records = poll(random.Random(7), T0, None)  # rows held as records are small: kept whole
    assert diff_basis(records) == records


def test_reordered_consumers_sharing_a_name_are_no_change() -> None:
    a = ConsumerRecord(TOPICS[0], "k", "c1", hash_ranges=((0, 100),))
    b = ConsumerRecord(TOPICS[0], "k", "c1", hash_ranges=((101, 200),))
    before = Snapshot("c", T0, consumers=(a, b))
    after = Snapshot("c", T0 + dt.timedelta(seconds=30), consumers=(b, a))
    assert diff(before, after) == reference.diff(before, after) == []


@pytest.mark.parametrize(("old", "new"), [(2, 1), (1, 2), (2, 0), (0, 2), (2, 2)])
def test_a_name_listed_again_with_the_same_ranges_is_compared_by_count(old: int, new: int) -> None:
    """Rows the same in both polls but for how many there are: Arrow's lookup of each row in
    the other poll finds them all, so the keys given more than once are compared anyway."""
    same = ConsumerRecord(TOPICS[0], "k", "c1", hash_ranges=((0, 100),))
    other = ConsumerRecord(TOPICS[1], "k", "c2")
    before = Snapshot("c", T0, consumers=(other, *[same] * old))
    after = Snapshot("c", T0 + dt.timedelta(seconds=30), consumers=(*[same] * new, other))
    expected = reference.diff(before, after)
    kinds = [e.kind for e in expected]
    assert (kinds.count("consumer_left"), kinds.count("consumer_joined")) == (
        max(0, old - new),
        max(0, new - old),
    )
    assert diff(as_tables(before), as_tables(after)) == expected
    assert diff(carry_forward(None, as_tables(before)), as_tables(after)) == expected
