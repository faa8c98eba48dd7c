"""Synthetic snapshots for comparing an analysis with the implementation it replaced: several
sizes, partitioned and plain topics, Failover groups whose consumers come and go, hostile names
(unicode, spaces, emoji, `x-partition-5` and `-partition-01` names that are not partitions),
and the empty cases. Built column-wise (`make_inputs_from_records`), reproducible by seed."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator, Sequence
from typing import Any

from pulsar_lens.api import FailoverConsumer, Inputs, active_consumer_picker
from pulsar_lens.core.model import (
    BrokerRecord,
    ConsumerRecord,
    KeySampleRecord,
    SubscriptionRecord,
)
from pulsar_lens.plugins.testing import at, make_inputs_from_records

TABLES = ("subscriptions", "consumers", "brokers")
TOPIC_NAMES = (
    "orders",
    "é vents",
    "x-partition-5",
    "y-partition-01",
    "z-partition-٣",
    "日本語 topic",
    "emoji 😀",
    "__system",
)
CONSUMER_NAMES = ("w1", "w2", "W3", "é", "😀 c", "\ue000", "\uffff", "a b", "c-partition-1")
SUBSCRIPTION_NAMES = ("fo", "fo ü", "billing", "__compaction")
TYPES = ("Failover", "Failover", "Failover", "Shared", "Exclusive", "Key_Shared", None)


def cases(tables: Sequence[str] = TABLES) -> Iterator[tuple[str, Inputs]]:
    """(name, inputs) of every case: empty tables, then growing random clusters."""
    yield "empty", make_inputs_from_records(tables, [{}])
    yield "no consumers", make_inputs_from_records(tables, [_poll(random.Random(1), 0, 8)[0]])
    for seed, (topics, polls, version) in enumerate(
        ((3, 1, "4.0.7"), (12, 4, None), (40, 6, "3.0.11"), (150, 8, "4.0.7"), (400, 5, None))
    ):
        records = cluster_polls(seed, topics, polls, version)
        yield f"{topics} topics x {polls} polls", make_inputs_from_records(tables, records)


def cluster_polls(
    seed: int, topics: int, polls: int, version: str | None = None
) -> list[dict[str, list[Any]]]:
    """The records of each poll of a random cluster, oldest first."""
    rng = random.Random(seed)
    shape = _shape(rng, topics)
    records = []
    for i in range(polls):
        poll = _poll_of(rng, shape, i)
        if version is not None:
            poll["brokers"] = [BrokerRecord("b1:8080", version=version)]
        records.append(poll)
    return records


def _shape(rng: random.Random, topics: int) -> list[dict[str, Any]]:
    """Per topic (or partition): its subscription, type and the consumers it may have."""
    shape: list[dict[str, Any]] = []
    while len(shape) < topics:
        base = f"persistent://t{rng.randrange(3)}/ns/{rng.choice(TOPIC_NAMES)}-{len(shape)}"
        partitions = rng.choice((0, 0, 1, 3, 10))
        names = [f"{base}-partition-{p}" for p in range(partitions)] or [base]
        sub = rng.choice(SUBSCRIPTION_NAMES)
        kind = rng.choice(TYPES)
        pool = rng.sample(CONSUMER_NAMES, rng.randint(1, 4))
        if rng.random() < 0.5:  # an application of its own: names no other topic shares
            pool = [f"{n}-{len(shape)}" for n in pool]
        rule = rng.choice(("modulo", "ring", "random"))
        trend = rng.choice((*TRENDS, "random", "random", "random"))
        split = rng.random() < 0.2  # each partition its own consumers: one label, two groups
        shape.extend(
            {
                "topic": t,
                "sub": sub,
                "type": kind,
                "pool": [f"{n}/{p}" for n in pool] if split else pool,
                "rule": rule,
                "trend": trend,
            }
            for p, t in enumerate(names)
        )
    return shape[:topics]


def _poll_of(rng: random.Random, shape: list[dict[str, Any]], i: int) -> dict[str, list[Any]]:
    subs: list[Any] = []
    consumers: list[Any] = []
    for row in shape:
        present = [n for n in row["pool"] if rng.random() < 0.85]  # churn: some are away
        if rng.random() < 0.05:
            present.append(rng.choice(CONSUMER_NAMES))  # a stranger joins
        active: str | None = rng.choice(present) if present and rng.random() < 0.9 else None
        if present and row["rule"] != "random":  # as the broker would pick (mostly)
            picked = active_consumer_picker(
                [FailoverConsumer(n) for n in set(present)],
                consistent_hashing=row["rule"] == "ring",
            )(row["topic"])
            active = picked.name if picked and rng.random() < 0.97 else active
        if active is not None and rng.random() < 0.05:
            active = "gone"  # the stats name a consumer no longer listed
        count = len(present) if rng.random() < 0.95 else len(present) + 1
        if rng.random() < 0.03:  # counted, but not listed
            present, active, count = [], None, 1
        subs.append(_sub(row, active, count, i, rng))
        consumers.extend(
            ConsumerRecord(
                row["topic"],
                row["sub"],
                n,
                blocked_on_unacked=_blocked(rng),
                hash_ranges=_ranges(rng, row["type"], k),
                connected_since=rng.choice((None, at(-60), at(-30 - k), at(-90 + 10 * k))),
            )
            for k, n in enumerate(present)
        )
        if rng.random() < 0.02:
            consumers.append(ConsumerRecord(row["topic"], "no-such-subscription", "w1"))
    samples = [
        KeySampleRecord(row["topic"], f"key-{k} ü", 0)
        for row in shape
        if row["type"] == "Key_Shared" and rng.random() < 0.3
        for k in range(rng.randint(1, 20))
    ]
    return {"subscriptions": subs, "consumers": consumers, "key_samples": samples}


TRENDS: dict[str, tuple[Any, ...]] = {
    # backlog at poll i, msg_rate_out, msg_ack_rate: a growing backlog though acknowledging
    # (WARN), dispatch without acknowledgement (STALL), nothing at all (STOP)
    "grow": (lambda i: 10 + 5 * i, 1.0, 1.0),
    "stall": (lambda i: 10 + i, 1.0, 0.0),
    "idle": (lambda i: 10, 0.0, 0.0),
}


def _sub(row: dict[str, Any], active: str | None, count: int, i: int, rng: random.Random) -> Any:
    backlog = rng.choice((None, 0, 0, 5, 50 + i * rng.randint(-5, 20)))
    rates = (rng.choice((None, 0.0, 1.5)), rng.choice((None, 0.0, 2.0)))
    trend = TRENDS.get(row["trend"])
    if trend is not None:
        backlog, rates = trend[0](i), trend[1:]
    return SubscriptionRecord(
        row["topic"],
        row["sub"],
        type=row["type"],
        active_consumer_name=active,
        key_shared_mode=("STICKY" if i % 2 else "AUTO_SPLIT")
        if row["type"] == "Key_Shared"
        else None,
        consumer_count=count,
        msg_backlog=None if backlog is None else max(0, backlog),
        msg_rate_out=rates[0],
        msg_ack_rate=rates[1],
        is_durable=rng.choice((True, True, False, None)) if trend is None else True,
        blocked_on_unacked=rng.choice((None, False, False, True)) if rng.random() < 0.1 else None,
        last_consumed_at=_maybe_time(rng, i) if trend is None else None,
        last_acked_at=_maybe_time(rng, i) if trend is None else None,
        earliest_msg_publish_time_in_backlog=_maybe_time(rng, i - 100),
    )


def _ranges(rng: random.Random, kind: str | None, k: int) -> tuple[tuple[int, int], ...]:
    """A Key_Shared consumer's range (overlapping or leaving gaps); now and then a reader's."""
    if kind == "Key_Shared" or rng.random() < 0.05:
        return ((k * 20000, k * 20000 + rng.choice((15000, 19999, 25000))),)
    return ()


def _blocked(rng: random.Random) -> bool | None:
    return rng.choice((None, False, True)) if rng.random() < 0.05 else False


def _maybe_time(rng: random.Random, i: int) -> dt.datetime | None:
    return None if rng.random() < 0.3 else at(i * 30.0 - rng.choice((0, 5, 40)))


def _poll(rng: random.Random, i: int, topics: int) -> tuple[dict[str, list[Any]], None]:
    """One poll of subscriptions without a single consumer row."""
    poll = _poll_of(rng, _shape(rng, topics), i)
    return {"subscriptions": poll["subscriptions"]}, None
