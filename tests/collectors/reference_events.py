"""The collector's `diff` as it was before consumers and subscriptions were compared
column-wise (`collectors/events.py`): every key of both polls sorted and compared one by one,
consumers grouped into lists of records. Kept only as the reference the new path must equal
event for event (tests/collectors/test_events_columnwise.py); not product code."""

from __future__ import annotations

from collections import Counter

from pulsar_lens.collectors.events import (
    _bundle_events,
    _fmt_ranges,
    _load_manager_events,
    _skipped_topics,
    _unsure,
)
from pulsar_lens.core.model import ConsumerRecord, EventRecord, Snapshot, SubscriptionRecord


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


def diff(previous: Snapshot, current: Snapshot) -> list[EventRecord]:
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
