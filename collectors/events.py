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
from typing import Any

from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.diffrows import rows_to_compare
from pulsar_lens.core.counters import increase
from pulsar_lens.core.model import (
    LOAD_MANAGER_COUNTERS,
    EventRecord,
    HashRange,
    Snapshot,
)
from pulsar_lens.core.tablerows import columns_of, held_columns
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
    if unsure.bulk_brokers:
        for snap in (prev, cur):
            topics, owners = columns_of(snap.topics, ("topic", "owner_broker"))
            skipped.update(
                t for t, o in zip(topics, owners, strict=True) if o in unsure.bulk_brokers
            )
    return skipped


_CONSUMER_FIELDS = ("topic", "subscription", "consumer_name", "hash_ranges")
_ACTIVE_FIELDS = ("topic", "subscription", "active_consumer_name", "type")
_ABSENT = object()

ConsumerKey = tuple[str, str, str]
Ranges = tuple[HashRange, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Several:
    """The hash ranges of the consumers that share one topic, subscription and name, in the
    poll's order (a name given to several clients)."""

    ranges: tuple[Ranges, ...]


def _consumer_ranges(columns: list[list[Any]]) -> dict[ConsumerKey, Ranges | _Several]:
    """Each consumer's hash ranges by (topic, subscription, name), from the columns of
    `_CONSUMER_FIELDS`: one dict from the key and range columns, and per-key lists only where
    a name repeats."""
    topics, subs, names, ranges = columns
    keys = list(zip(topics, subs, names, strict=True))
    found: dict[ConsumerKey, Ranges | _Several] = dict(zip(keys, ranges, strict=True))
    if len(found) < len(keys):
        shared: dict[ConsumerKey, list[Ranges]] = {}
        for key, held in zip(keys, ranges, strict=True):
            shared.setdefault(key, []).append(held)
        found.update((k, _Several(tuple(v))) for k, v in shared.items() if len(v) > 1)
    return found


def _listed(value: Ranges | _Several | object) -> list[Ranges]:
    if value is _ABSENT:
        return []
    return list(value.ranges) if isinstance(value, _Several) else [value]  # type: ignore[list-item]


def _consumer_events(prev: Snapshot, cur: Snapshot, skipped: set[str]) -> list[EventRecord]:
    """Joins, leaves and hash-range changes. A key whose consumers' ranges are the same in
    both polls (the same count, the same ranges in the same order) has none of them, so only
    the keys that may differ are read (`rows_to_compare`), and only those that do are sorted
    and compared one by one."""
    earlier, later = rows_to_compare(
        prev.consumers,
        cur.consumers,
        _CONSUMER_FIELDS,
        key=3,
        compared=4,
        skipped=skipped,
    )
    before, after = _consumer_ranges(earlier), _consumer_ranges(later)
    changed = {k for k, v in after.items() if before.get(k, _ABSENT) != v}
    changed.update(before.keys() - after.keys())
    at, events = cur.collected_at, []
    for key in sorted(changed):
        topic, sub, name = key
        olds, news = _listed(before.get(key, _ABSENT)), _listed(after.get(key, _ABSENT))
        subject = f"{topic}/{sub}/{name}"
        base = {"topic": topic, "subscription": sub, "consumer_name": name}
        for _ in range(len(news) - len(olds)):
            events.append(EventRecord(at, "consumer_joined", subject, **base))
        for _ in range(len(olds) - len(news)):
            events.append(EventRecord(at, "consumer_left", subject, **base))
        old_ranges = Counter(r for r in olds if r)
        new_ranges = Counter(r for r in news if r)
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
    """Active consumer changes of Exclusive and Failover subscriptions (the type of the later
    poll, or of the earlier one when the later does not say), compared column-wise."""

    def keyed(columns: list[list[Any]]) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        topics, subs, active, kinds = columns
        return dict(
            zip(zip(topics, subs, strict=True), zip(active, kinds, strict=True), strict=True)
        )

    # the active consumer's name compared, not the type: a type that changes alone moves none
    earlier, later = rows_to_compare(
        prev.subscriptions, cur.subscriptions, _ACTIVE_FIELDS, key=2, compared=3, skipped=skipped
    )
    before, after = keyed(earlier), keyed(later)
    moved = [k for k, (name, _) in after.items() if k in before and before[k][0] != name]
    events = []
    for key in sorted(moved):
        (old, old_kind), (new, new_kind) = before[key], after[key]
        if (new_kind or old_kind) in ("Exclusive", "Failover"):
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


DIFF_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "topics": ("topic", "owner_broker"),  # `_skipped_topics`
    "subscriptions": _ACTIVE_FIELDS,
    "consumers": _CONSUMER_FIELDS,
    "draining_hashes": (),
}


def diff_basis(snapshot: Snapshot) -> Snapshot:
    """`snapshot` as `diff` reads it when it is the earlier poll: of each large table held as
    Arrow, only the columns the diff reads. What the collector keeps between two polls; at
    1,000,000 topics the rest is about half a gigabyte."""
    return dataclasses.replace(
        snapshot,
        **{  # type: ignore[arg-type]
            name: held_columns(name, snapshot.records(name), columns)
            for name, columns in DIFF_COLUMNS.items()
        },
    )


def carry_forward(previous: Snapshot | None, current: Snapshot) -> Snapshot:
    """`current` as the next diff should start from (`diff_basis`): what its failed calls left
    unknown keeps its value from `previous`. A bundle listed without an owner because its
    owner's `ownedNamespaces` call failed keeps that owner; a namespace whose bundle list
    failed keeps its bundles. So a move seen once the calls answer again is told from the last
    known owner (broker-1 -> broker-0), not from the gap (- -> broker-0). A broker's
    load-manager counters that could not be read keep their last reading, so what the load
    manager counted meanwhile is an event once they are read again."""
    if previous is None:
        return diff_basis(current)
    unsure = _unsure(current)
    if unsure.everything:
        return previous
    return diff_basis(_carried(previous, current, unsure))


def _carried(previous: Snapshot, current: Snapshot, unsure: Unsure) -> Snapshot:
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
    """The events that turn `previous` into `current`, stamped with current.collected_at.
    Keys of every consumer and subscription of both polls are made and none is garbage, so
    the cyclic collector waits (`collection_paused`)."""
    unsure = _unsure(previous).merge(_unsure(current))
    if unsure.everything:
        return []
    with collection_paused():
        skipped = _skipped_topics(previous, current, unsure)
        return [
            *_bundle_events(previous, current, unsure),
            *_consumer_events(previous, current, skipped),
            *_active_events(previous, current, skipped),
            *_load_manager_events(previous, current),
        ]
