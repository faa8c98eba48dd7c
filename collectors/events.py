"""diff(previous, current) -> events: what changed between two snapshots of one cluster.

Event kinds (`EventRecord.kind`):
  bundle_owner_changed     a bundle's owner broker changed (before/after: broker ids, None =
                           not owned, e.g. unloaded); subject "tenant/ns/bundle"
  bundle_added             a bundle appeared (a split, or a new namespace); after: its owner
  bundle_removed           a bundle disappeared (split away, namespace deleted); before: owner
  consumer_joined          a consumer connected to a subscription; subject
                           "topic/subscription/consumer"
  consumer_left            a consumer disconnected (or its subscription or topic went away)
  hash_ranges_changed      a Key_Shared consumer's hash ranges changed; before/after are
                           JSON lists of [start, end]
  active_consumer_changed  the active consumer of an Exclusive/Failover subscription changed;
                           subject "topic/subscription"
  load_manager_unloaded    a broker's load manager counted bundles it unloaded (its shedder;
                           only the leader's moves); subject the broker, before/after its count
  load_manager_split       a broker's load manager counted bundles it split; subject the broker

Partial snapshots do not invent events: an entity is compared only when the calls that
describe it succeeded in both snapshots (a broker whose bulk stats failed, a topic whose
stats failed, a namespace whose bundles failed are skipped).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Mapping

from pulsar_lens.core.counters import increase
from pulsar_lens.core.model import (
    LOAD_MANAGER_COUNTERS,
    ConsumerRecord,
    EventRecord,
    HashRange,
    Snapshot,
    SubscriptionRecord,
)
from pulsar_lens.core.unsure import Unsure, unsure_of

EVENT_KINDS: Mapping[str, str] = {
    "bundle_owner_changed": "a bundle's owner broker changed",
    "bundle_added": "a bundle appeared (split or new namespace)",
    "bundle_removed": "a bundle disappeared (split or deleted namespace)",
    "consumer_joined": "a consumer connected to a subscription",
    "consumer_left": "a consumer disconnected from a subscription",
    "hash_ranges_changed": "a Key_Shared consumer's hash ranges changed",
    "active_consumer_changed": "the active consumer of an Exclusive/Failover subscription changed",
    "load_manager_unloaded": "a broker's load manager counted bundles it unloaded",
    "load_manager_split": "a broker's load manager counted bundles it split",
}
LOAD_MANAGER_EVENTS = {f"load_manager_{name}": f for name, f in LOAD_MANAGER_COUNTERS.items()}


def _unsure(snapshot: Snapshot) -> Unsure:
    return unsure_of(error.endpoint for error in snapshot.errors)


def _fmt_ranges(ranges: Iterable[HashRange]) -> str:
    return json.dumps([list(r) for r in ranges], separators=(",", ":"))


def _bundle_events(prev: Snapshot, cur: Snapshot, unsure: Unsure) -> list[EventRecord]:
    def keyed(s: Snapshot) -> dict[str, str | None]:
        return {f"{b.namespace}/{b.bundle}": b.owner_broker for b in s.bundles}

    before, after = keyed(prev), keyed(cur)
    namespaces = {b.namespace for b in prev.bundles} & {b.namespace for b in cur.bundles}
    events = []
    for key in sorted(set(before) | set(after)):
        ns = key.rsplit("/", 1)[0]
        if ns not in namespaces or ns in unsure.namespaces:
            continue
        old, new = before.get(key), after.get(key)
        if key not in before:
            events.append(EventRecord(cur.collected_at, "bundle_added", key, ns, after=new))
        elif key not in after:
            events.append(EventRecord(cur.collected_at, "bundle_removed", key, ns, before=old))
        elif old != new and not ({old, new} & unsure.owner_brokers):
            events.append(
                EventRecord(
                    cur.collected_at, "bundle_owner_changed", key, ns, before=old, after=new
                )
            )
    return events


def _skipped_topics(prev: Snapshot, cur: Snapshot, unsure: Unsure) -> set[str]:
    skipped = set(unsure.topics)
    for snap in (prev, cur):
        skipped |= {t.topic for t in snap.topics if t.owner_broker in unsure.bulk_brokers}
    return skipped


def _consumer_events(prev: Snapshot, cur: Snapshot, skipped: set[str]) -> list[EventRecord]:
    def group(s: Snapshot) -> dict[tuple[str, str, str], list[ConsumerRecord]]:
        found: dict[tuple[str, str, str], list[ConsumerRecord]] = {}
        for c in s.consumers:
            if c.topic not in skipped:
                found.setdefault((c.topic, c.subscription, c.consumer_name), []).append(c)
        return found

    before, after = group(prev), group(cur)
    at, events = cur.collected_at, []
    for key in sorted(set(before) | set(after)):
        topic, sub, name = key
        olds, news = before.get(key, []), after.get(key, [])
        subject = f"{topic}/{sub}/{name}"
        base = {"topic": topic, "subscription": sub, "consumer_name": name}
        for _ in range(len(news) - len(olds)):
            events.append(EventRecord(at, "consumer_joined", subject, **base))
        for _ in range(len(olds) - len(news)):
            events.append(EventRecord(at, "consumer_left", subject, **base))
        old_ranges = Counter(c.hash_ranges for c in olds if c.hash_ranges)
        new_ranges = Counter(c.hash_ranges for c in news if c.hash_ranges)
        if olds and news and old_ranges and new_ranges and old_ranges != new_ranges:
            events.append(
                EventRecord(
                    at,
                    "hash_ranges_changed",
                    subject,
                    before=_fmt_ranges(sorted({r for rs in old_ranges for r in rs})),
                    after=_fmt_ranges(sorted({r for rs in new_ranges for r in rs})),
                    **base,
                )
            )
    return events


def _active_events(prev: Snapshot, cur: Snapshot, skipped: set[str]) -> list[EventRecord]:
    def keyed(s: Snapshot) -> dict[tuple[str, str], SubscriptionRecord]:
        return {(x.topic, x.subscription): x for x in s.subscriptions if x.topic not in skipped}

    before, after = keyed(prev), keyed(cur)
    events = []
    for key in sorted(set(before) & set(after)):
        old, new = before[key].active_consumer_name, after[key].active_consumer_name
        kind = after[key].type or before[key].type
        if old != new and kind in ("Exclusive", "Failover"):
            topic, sub = key
            events.append(
                EventRecord(
                    cur.collected_at,
                    "active_consumer_changed",
                    f"{topic}/{sub}",
                    topic=topic,
                    subscription=sub,
                    before=old,
                    after=new,
                )
            )
    return events


def _load_manager_events(prev: Snapshot, cur: Snapshot) -> list[EventRecord]:
    """Each broker whose load-manager counter grew (a counter that could not be read in
    either poll tells nothing)."""
    before = {b.broker_id: b for b in prev.brokers}
    events = []
    for broker in cur.brokers:
        old = before.get(broker.broker_id)
        if old is None:
            continue
        for kind, column in LOAD_MANAGER_EVENTS.items():
            was, now = getattr(old, column), getattr(broker, column)
            if increase(was, now):
                events.append(
                    EventRecord(
                        cur.collected_at, kind, broker.broker_id, before=str(was), after=str(now)
                    )
                )
    return events


def carry_forward(previous: Snapshot, current: Snapshot) -> Snapshot:
    """`current` as the next diff should start from: what its failed calls left unknown keeps
    its value from `previous`. A bundle listed without an owner because its owner's
    `ownedNamespaces` call failed keeps that owner; a namespace whose bundle list failed keeps
    its bundles. So a move seen once the calls answer again is told from the last known owner
    (broker-1 -> broker-0), not from the gap (- -> broker-0). A broker's load-manager counters
    that could not be read keep their last reading, so what the load manager counted meanwhile
    is an event once they are read again."""
    unsure = _unsure(current)
    if unsure.everything:
        return previous
    current = _carry_counters(previous, current)
    if not unsure.bundles:
        return current
    known = {(b.namespace, b.bundle): b.owner_broker for b in previous.bundles}
    bundles = [
        dataclasses.replace(
            b, owner_broker=unsure.owner(b.owner_broker, known.get((b.namespace, b.bundle)))
        )
        for b in current.bundles
    ]
    unlisted = unsure.namespaces - {b.namespace for b in current.bundles}
    bundles += [b for b in previous.bundles if b.namespace in unlisted]
    # what was carried is known again: its errors would make the next diff skip it
    errors = tuple(e for e in current.errors if not _tells_bundles(e.endpoint))
    return dataclasses.replace(current, bundles=tuple(bundles), errors=errors)


def _carry_counters(previous: Snapshot, current: Snapshot) -> Snapshot:
    before = {b.broker_id: b for b in previous.brokers}
    brokers = []
    for broker in current.brokers:
        old = before.get(broker.broker_id)
        unread = {
            column: getattr(old, column)
            for column in LOAD_MANAGER_COUNTERS.values()
            if old is not None and getattr(broker, column) is None
        }
        brokers.append(dataclasses.replace(broker, **unread) if unread else broker)
    return dataclasses.replace(current, brokers=tuple(brokers))


def _tells_bundles(endpoint: str) -> bool:
    return unsure_of((endpoint,)).bundles


def diff(previous: Snapshot, current: Snapshot) -> list[EventRecord]:
    """The events that turn `previous` into `current`, stamped with current.collected_at."""
    unsure = _unsure(previous).merge(_unsure(current))
    if unsure.everything:
        return []
    skipped = _skipped_topics(previous, current, unsure)
    return [
        *_bundle_events(previous, current, unsure),
        *_consumer_events(previous, current, skipped),
        *_active_events(previous, current, skipped),
        *_load_manager_events(previous, current),
    ]
