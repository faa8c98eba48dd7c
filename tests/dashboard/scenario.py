"""A small, realistic store for dashboard tests: a few polls of one cluster, written for real.

The Key_Shared ranges and draining hashes are the broker output quoted in the Pulsar 4.0 docs
(consumers c1, c2 with 9 ring points; c1 still holds hashes of keys "9", "4", "8", "7", "3").
Bundle 0x40000000_0x80000000 moves from broker-a to broker-b between the first two polls, and
a Failover subscription on a 3-partition topic changes its active consumer once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    EndpointError,
    EventRecord,
    KeySampleRecord,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
    records_to_table,
)
from pulsar_lens.core.store import Store

NS = "public/default"
ORDERS = f"persistent://{NS}/orders"
PAYMENTS = f"persistent://{NS}/payments"
EVENTS = f"persistent://{NS}/events"
AUDIT = f"persistent://{NS}/audit"
BROKERS = ("broker-a:8080", "broker-b:8080")
C1_RANGES = ((2960, 5968), (22258, 43033), (49261, 54464), (55155, 61273))
C2_RANGES = ((1, 2959), (5969, 22257), (43034, 49260), (54465, 55154), (61274, 65535))
DRAINING = (2862, 11707, 15786, 43539, 45436)
BOUNDARIES = (0x00000000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF)


def _bundles(poll: int) -> tuple[BundleRecord, ...]:
    out = []
    for i, (lower, upper) in enumerate(itertools.pairwise(BOUNDARIES)):
        owner = BROKERS[1] if (i == 1 and poll > 0) else BROKERS[0]
        out.append(
            BundleRecord(
                namespace=NS,
                tenant="public",
                bundle=f"0x{lower:08x}_0x{upper:08x}",
                lower=lower,
                upper=upper,
                owner_broker=owner,
                topic_count=2,
            )
        )
    return tuple(out)


def _topics() -> tuple[TopicRecord, ...]:
    plain = [ORDERS, PAYMENTS, AUDIT]
    parts = [f"{EVENTS}-partition-{i}" for i in range(3)]
    out = [TopicRecord(topic=t, tenant="public", namespace=NS, backlog_size=100) for t in plain]
    out += [
        TopicRecord(
            topic=t, tenant="public", namespace=NS, partitioned_topic=EVENTS, partition_index=i
        )
        for i, t in enumerate(parts)
    ]
    return tuple(out)


def _subscriptions(poll: int) -> tuple[SubscriptionRecord, ...]:
    ks = "Key_Shared"
    subs = [
        SubscriptionRecord(
            topic=ORDERS, subscription="orders-ks", type=ks, consumer_count=2, msg_backlog=3
        ),
        SubscriptionRecord(
            topic=PAYMENTS,
            subscription="payments-ks",
            type=ks,
            consumer_count=2,
            msg_backlog=30,
            msg_in_replay=10,
            key_shared_mode="AUTO_SPLIT",
            draining_hashes_count=len(DRAINING),
            draining_hashes_unacked_messages=10,
        ),
        SubscriptionRecord(
            topic=AUDIT, subscription="audit-archiver", type="Shared", msg_backlog=500 + poll
        ),
    ]
    for i in range(3):
        active = ("ev-1", "ev-2", "ev-1")[i] if poll < 2 or i != 2 else "ev-2"
        subs.append(
            SubscriptionRecord(
                topic=f"{EVENTS}-partition-{i}",
                subscription="events-fo",
                type="Failover",
                consumer_count=2,
                active_consumer_name=active,
            )
        )
    return tuple(subs)


def _consumers() -> tuple[ConsumerRecord, ...]:
    out = [
        ConsumerRecord(topic=t, subscription=s, consumer_name="c1", hash_ranges=C1_RANGES)
        for t, s in ((ORDERS, "orders-ks"), (PAYMENTS, "payments-ks"))
    ]
    out += [
        ConsumerRecord(topic=t, subscription=s, consumer_name="c2", hash_ranges=C2_RANGES)
        for t, s in ((ORDERS, "orders-ks"), (PAYMENTS, "payments-ks"))
    ]
    for i in range(3):
        for name in ("ev-1", "ev-2"):
            topic = f"{EVENTS}-partition-{i}"
            out.append(ConsumerRecord(topic=topic, subscription="events-fo", consumer_name=name))
    return tuple(out)


def make_poll(
    at: dt.datetime, poll: int, *, partial: bool = False, failed: tuple[EndpointError, ...] = ()
) -> Snapshot:
    errors = (
        (EndpointError("GET /admin/v2/broker-stats/load-report", 503, "Service Unavailable"),)
        if partial
        else failed
    )
    return Snapshot(
        cluster="standalone",
        collected_at=at,
        brokers=tuple(BrokerRecord(broker_id=b, version="4.0.7") for b in BROKERS),
        bundles=_bundles(poll),
        topics=_topics(),
        subscriptions=_subscriptions(poll),
        consumers=_consumers(),
        draining_hashes=tuple(
            DrainingHashRecord(PAYMENTS, "payments-ks", "c1", h, 2, 5 + poll) for h in DRAINING
        ),
        errors=errors,
        requests=12,
        durations={"topics": 0.05},
    )


def _events(at: dt.datetime, poll: int) -> tuple[EventRecord, ...]:
    if poll != 1:
        return ()
    key = f"{NS}/0x40000000_0x80000000"
    return (
        EventRecord(
            at=at,
            kind="bundle_owner_changed",
            subject=key,
            namespace=NS,
            before=BROKERS[0],
            after=BROKERS[1],
        ),
    )


NAMED_TABLES = ("brokers", "bundles", "topics", "subscriptions", "consumers", "draining_hashes")


def renamed(records: Iterable[Any], rename: Callable[[str], str]) -> tuple[Any, ...]:
    """The records with `rename` applied to each of their text fields."""
    return tuple(
        dataclasses.replace(
            record,
            **{
                f.name: rename(value)
                for f in dataclasses.fields(record)
                if isinstance(value := getattr(record, f.name), str)
            },
        )
        for record in records
    )


def write_scenario(
    root: Path,
    *,
    polls: int = 3,
    interval: float = 10.0,
    last_age: float = 1.0,
    partial: bool = False,
    failed: tuple[EndpointError, ...] = (),
    rename: Callable[[str], str] | None = None,
) -> Store:
    """Write `polls` polls, `interval` s apart, the newest `last_age` s ago (with the errors
    `failed`, or a partial one's); return the store.

    `rename` changes every name (each text field of every record) as it is written."""
    store = Store(root)
    now = dt.datetime.now(dt.UTC)
    for poll in range(polls):
        at = now - dt.timedelta(seconds=last_age + (polls - 1 - poll) * interval)
        newest = poll == polls - 1
        snapshot = make_poll(at, poll, partial=partial and newest, failed=failed if newest else ())
        events = _events(at, poll)
        if rename is not None:
            tables = {t: renamed(getattr(snapshot, t), rename) for t in (*NAMED_TABLES, "errors")}
            snapshot = dataclasses.replace(snapshot, **tables)
            events = renamed(events, rename)
        store.write(snapshot, events=events)
    return store


HOT_KEYS = {"9": 30, "4": 6, "0": 3, "1": 3, "2": 3}
"""Sampled keys of the payments topic and how often each was seen: "9" is hot."""


def write_key_samples(store: Store, topic: str = PAYMENTS) -> None:
    """Key samples for `topic` with the newest snapshot, as `collect --sample-keys` writes."""
    index = store.snapshots()
    newest = index.iloc[-1]
    samples = [
        KeySampleRecord(topic=topic, key=key, sticky_hash=sticky_key_hash(key.encode()))
        for key, count in HOT_KEYS.items()
        for _ in range(count)
    ]
    table = records_to_table(
        "key_samples",
        samples,
        snapshot_id=str(newest["snapshot_id"]),
        collected_at=newest["collected_at"].to_pydatetime(),
        cluster=str(newest["cluster"]),
    )
    store.write_table("key_samples", table)
