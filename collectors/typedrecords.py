"""Records built from a broker's bulk answer as `collectors.typedstats` read it, and the
readers that take either form of a topic's stats (a `BulkTopic`, or the dict every other
answer is read into, which `collectors.topics` parses).

A `BulkTopic`'s values are already what the tolerant helpers of `collectors.fields` would
return (typed, bounded, no null), so a record takes them as they are; what those helpers
still decide (a timestamp's conversion, the rare hash ranges and draining hashes) goes
through the same functions, inside the same `within` names, so the warnings and refusals
are the same too.

A broker's part (`collectors.bulkparts`) takes the rows as tuples of the records' fields
(`topic_row`, `subscription_rows`) and never makes the records: a frozen record costs some
3 µs to make, and a part of 33,000 topics has 150,000 of them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.fields import as_json_text, iso_time, parse_hash_ranges
from pulsar_lens.collectors.notes import refuse, within
from pulsar_lens.collectors.topics import (
    SINGLE_ACTIVE_TYPES,
    SubscriptionRows,
    TopicStats,
    max_backlog,
    needs_topic_stats,
    parse_broker_topic_stats,
    parse_draining_hashes,
    parse_subscriptions,
    parse_topic,
    topic_refusal,
)
from pulsar_lens.collectors.typedstats import (
    BulkConsumer,
    BulkSubscription,
    BulkTopic,
    TypedBulk,
)
from pulsar_lens.core.model import (
    ConsumerRecord,
    DrainingHashRecord,
    HashRange,
    SubscriptionRecord,
    TopicRecord,
    row_of,
)
from pulsar_lens.core.topicname import TopicName, parse_topic_name

Stats = Mapping[str, Any] | BulkTopic
Row = tuple[Any, ...]
"""A record's fields in their order, without the record (`core.model.rows_content_table`)."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_CONNECTED = "connectedSince"
_CONSUMER_NAME = [f.name for f in fields(ConsumerRecord)].index("consumer_name")


def parse_bulk(payload: Any, broker: str) -> list[TopicStats]:
    """`parse_broker_topic_stats` of an answer in either form."""
    if type(payload) is TypedBulk:
        return _typed_topics(payload, broker)
    return parse_broker_topic_stats(payload, broker)


def _typed_topics(bulk: TypedBulk, broker: str) -> list[TopicStats]:
    found: list[TopicStats] = []
    with collection_paused():
        for namespace, bundles in bulk.levels.items():
            with within(broker, namespace):
                for bundle, domains in bundles.items():
                    with within(bundle):
                        for domain, topics in domains.items():
                            with within(domain):
                                found.extend(
                                    TopicStats(topic, broker, bundle, stats)
                                    for topic, stats in topics.items()
                                    if _listed(topic, namespace, domain)
                                )
    return found


def _listed(topic: str, namespace: str, domain: str) -> bool:
    """`topics._listed_topic` of a topic whose stats are an object."""
    why = topic_refusal(topic)
    if why is None:
        name = parse_topic_name(topic)
        if name.namespace != namespace or name.domain != domain:
            why = "is listed under another namespace or domain than its name says"
    if why is not None:
        refuse("topic", f"{why}; left out", topic)
    return why is None


def topic_of(
    name: TopicName, stats: Stats | None, *, bundle: str | None, owner: str | None
) -> TopicRecord:
    """`parse_topic` of either form."""
    if not isinstance(stats, BulkTopic):
        return parse_topic(name, stats, bundle=bundle, owner=owner)
    return TopicRecord(*_topic_row(name, stats, bundle, owner))


def topic_row(
    name: TopicName, stats: Stats | None, *, bundle: str | None, owner: str | None
) -> Row:
    """`topic_of` as the tuple of its fields (`core.model.rows_content_table`)."""
    if not isinstance(stats, BulkTopic):
        return row_of(parse_topic(name, stats, bundle=bundle, owner=owner))
    return _topic_row(name, stats, bundle, owner)


def _topic_row(name: TopicName, stats: BulkTopic, bundle: str | None, owner: str | None) -> Row:
    publishers = stats.publishers
    producers = stats.producerCount
    if producers is None and publishers is not None:
        producers = len(publishers)
    since = [iso_time(p.connectedSince, _CONNECTED) for p in publishers] if publishers else []
    known = [t for t in since if t is not None]
    subscriptions = stats.subscriptions
    return (
        name.topic,
        name.tenant,
        name.namespace,
        name.persistent,
        name.partitioned_topic,
        name.partition_index,
        bundle,
        owner,
        stats.msgRateIn,
        stats.msgRateOut,
        stats.msgThroughputIn,
        stats.msgThroughputOut,
        stats.storageSize,
        stats.backlogSize,
        producers,
        len(subscriptions) if subscriptions is not None else None,
        min(known) if known else None,
    )


@dataclass(frozen=True, slots=True)
class SubscriptionRowTuples:
    """`SubscriptionRows` with each row the tuple of its record's fields."""

    subscriptions: tuple[Row, ...]
    consumers: tuple[Row, ...]
    draining_hashes: tuple[Row, ...]


def subscriptions_of(topic: str, stats: Stats) -> SubscriptionRows:
    """`parse_subscriptions` of either form."""
    if not isinstance(stats, BulkTopic):
        return parse_subscriptions(topic, stats)
    rows = _subscription_rows(topic, stats)
    return SubscriptionRows(
        tuple(SubscriptionRecord(*row) for row in rows.subscriptions),
        tuple(ConsumerRecord(*row) for row in rows.consumers),
        tuple(DrainingHashRecord(*row) for row in rows.draining_hashes),
    )


def subscription_rows(topic: str, stats: Stats) -> SubscriptionRowTuples:
    """`subscriptions_of` as the tuples of the records' fields."""
    if not isinstance(stats, BulkTopic):
        found = parse_subscriptions(topic, stats)
        return SubscriptionRowTuples(
            tuple(map(row_of, found.subscriptions)),
            tuple(map(row_of, found.consumers)),
            tuple(map(row_of, found.draining_hashes)),
        )
    return _subscription_rows(topic, stats)


def _subscription_rows(topic: str, stats: BulkTopic) -> SubscriptionRowTuples:
    subs: list[Row] = []
    consumers: list[Row] = []
    draining: list[Row] = []
    by_name = stats.subscriptions or {}
    for name in sorted(by_name):
        sub = by_name[name]
        subs.append(_subscription(topic, name, sub))
        for consumer in sub.consumers or ():
            if (  # nothing in it to refuse: no names to give
                consumer.keyHashRangeArrays is None
                and consumer.keyHashRanges is None
                and consumer.drainingHashes is None
            ):
                consumers.append(_consumer(topic, name, consumer))
                continue
            with within(name):
                row = _consumer(topic, name, consumer)
                if consumer.drainingHashes is not None:
                    with within(row[_CONSUMER_NAME]):
                        draining.extend(
                            map(
                                row_of,
                                parse_draining_hashes(
                                    topic,
                                    name,
                                    {"drainingHashes": consumer.drainingHashes},
                                    name=row[_CONSUMER_NAME],
                                ),
                            )
                        )
                consumers.append(row)
    return SubscriptionRowTuples(tuple(subs), tuple(consumers), tuple(draining))


def _epoch(value: int) -> dt.datetime | None:
    """`fields.as_epoch_ms` of a value typed already (at most the year 9999)."""
    if value <= 0:
        return None
    return _EPOCH + dt.timedelta(milliseconds=value)


def _subscription(topic: str, name: str, sub: BulkSubscription) -> Row:
    """A `SubscriptionRecord`'s fields."""
    consumers = sub.consumers or ()
    kind = sub.type
    if kind == "None":  # as `topics.parse_subscription` reads it
        kind = None
    active, after = sub.activeConsumerName, sub.consumersAfterMarkDeletePosition
    consumed, acked = sub.lastConsumedTimestamp, sub.lastAckedTimestamp
    earliest = sub.earliestMsgPublishTimeInBacklog
    if active is None and kind in SINGLE_ACTIVE_TYPES and len(consumers) == 1:
        active = consumers[0].consumerName
    return (
        topic,
        name,
        kind,
        sub.msgBacklog,
        sub.backlogSize,
        sub.unackedMessages,
        sub.msgInReplay,
        sub.msgRateOut,
        sub.messageAckRate,
        sub.msgRateRedeliver,
        sub.blockedSubscriptionOnUnackedMsgs,
        sub.keySharedMode,
        sub.allowOutOfOrderDelivery,
        sub.drainingHashesCount,
        sub.drainingHashesClearedTotal,
        sub.drainingHashesUnackedMessages,
        active,
        len(consumers),
        sub.isDurable if sub.isDurable is not None else sub.durable,
        _epoch(consumed) if consumed is not None else None,
        _epoch(acked) if acked is not None else None,
        _epoch(earliest) if earliest is not None else None,
        as_json_text(after) if after is not None else None,
    )


def _consumer(topic: str, subscription: str, consumer: BulkConsumer) -> Row:
    """A `ConsumerRecord`'s fields."""
    name = consumer.consumerName or ""
    ranges: tuple[HashRange, ...] = ()
    arrays, texts = consumer.keyHashRangeArrays, consumer.keyHashRanges
    if arrays is not None or texts is not None:  # else none to read
        given = {"keyHashRangeArrays": arrays, "keyHashRanges": texts}
        with within(name):
            ranges = parse_hash_ranges({k: v for k, v in given.items() if v is not None})
    position = consumer.readPositionWhenJoining
    acked, consumed = consumer.lastAckedTimestamp, consumer.lastConsumedTimestamp
    return (
        topic,
        subscription,
        name,
        consumer.address,
        iso_time(consumer.connectedSince, _CONNECTED),
        consumer.clientVersion,
        consumer.unackedMessages,
        consumer.blockedConsumerOnUnackedMsgs,
        consumer.availablePermits,
        consumer.msgRateOut,
        consumer.messageAckRate,
        ranges,
        consumer.drainingHashesCount,
        consumer.drainingHashesClearedTotal,
        consumer.drainingHashesUnackedMessages,
        position if position is not None else consumer.lastSentPositionWhenJoining,
        _epoch(acked) if acked is not None else None,
        _epoch(consumed) if consumed is not None else None,
    )


def backlog_of(stats: Stats) -> int:
    """`max_backlog` of either form."""
    if not isinstance(stats, BulkTopic):
        return max_backlog(stats)
    subs = stats.subscriptions or {}
    return max((sub.msgBacklog or 0 for sub in subs.values()), default=0)


def needs_details(stats: Stats) -> bool:
    """`needs_topic_stats` of either form."""
    if not isinstance(stats, BulkTopic):
        return needs_topic_stats(stats)
    for sub in (stats.subscriptions or {}).values():
        consumers, kind = len(sub.consumers or ()), sub.type
        if (kind == "Key_Shared" and consumers > 0) or (kind == "Failover" and consumers > 1):
            return True
    return False
