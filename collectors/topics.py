"""Topic, subscription and consumer stats: the per-broker bulk answer and per-topic stats.

`GET /admin/v2/broker-stats/topics` (one call per broker) lists every topic the broker has
loaded with its subscriptions and consumers, but in 4.0 it lacks Key_Shared hash ranges,
draining hashes, `keySharedMode` and `activeConsumerName`, and is refreshed only every
`statsUpdateFrequencyInSecs`. Per-topic `.../stats` fills those in for the few topics that
need them (see `needs_topic_stats`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from collectors.admin import AdminClient
from collectors.fields import (
    as_bool,
    as_dict,
    as_epoch_ms,
    as_float,
    as_int,
    as_iso_time,
    as_json_text,
    as_list,
    as_str,
    as_text,
    parse_hash_ranges,
    shown,
    warn,
)
from core.errors import AdminApiError
from core.model import ConsumerRecord, DrainingHashRecord, SubscriptionRecord, TopicRecord
from core.names import NameRefused, shown_name
from core.topicname import TopicName, parse_topic_name

SINGLE_ACTIVE_TYPES = frozenset({"Exclusive", "Failover"})


@dataclass(frozen=True, slots=True)
class TopicStats:
    """One topic's stats object as a broker reported it."""

    topic: str
    broker: str | None
    bundle: str | None
    stats: Mapping[str, Any]


def collect_broker_topic_stats(client: AdminClient, web_url: str, *, timeout: float) -> Any:
    """GET /admin/v2/broker-stats/topics, sent to the broker at `web_url`.

    Answer: {namespace: {bundle: {"persistent"|"non-persistent": {topic: stats}}}}.
    """
    path = "/admin/v2/broker-stats/topics"
    payload = client.get_json(path, base_url=web_url, timeout=timeout)
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise AdminApiError("GET", path, None, repr(payload), "expected a JSON object")
    return payload


def parse_broker_topic_stats(payload: Mapping[str, Any], broker: str) -> list[TopicStats]:
    """Flatten the nested broker-stats/topics answer of `broker` into one entry per topic."""
    found: list[TopicStats] = []
    for bundles in as_dict(payload).values():
        for bundle, domains in as_dict(bundles).items():
            for topics in as_dict(domains).values():
                for topic, stats in as_dict(topics).items():
                    if isinstance(stats, Mapping) and "://" in topic:
                        found.append(TopicStats(topic, broker, as_text(bundle, "bundle"), stats))
    return found


def collect_topic_stats(
    client: AdminClient,
    topic: str,
    *,
    web_url: str | None,
    timeout: float,
    earliest_in_backlog: bool = False,
) -> Any:
    """GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/stats (one topic or partition).

    `earliest_in_backlog` adds `?getEarliestTimeInBacklog=true`: the broker then reads the
    first unacked entry of each subscription (a ledger read) to fill
    `earliestMsgPublishTimeInBacklog`, which is 0 otherwise. NameRefused (before any
    request) for a name no path can carry (e.g. a local name `..`).
    """
    try:
        path = f"{parse_topic_name(topic).admin_path}/stats"
    except NameRefused as exc:
        raise NameRefused(f"topic {shown_name(topic)}: {exc}") from None
    params = {"getEarliestTimeInBacklog": "true"} if earliest_in_backlog else None
    payload = client.get_json(path, params=params, base_url=web_url, timeout=timeout)
    if not isinstance(payload, dict):
        raise AdminApiError("GET", path, None, repr(payload), "expected a JSON object")
    return payload


def max_backlog(stats: Mapping[str, Any]) -> int:
    """The largest subscription backlog (messages) in a bulk topic entry."""
    return max(
        (
            as_int(as_dict(sub), "msgBacklog") or 0
            for sub in as_dict(stats.get("subscriptions")).values()
        ),
        default=0,
    )


def needs_topic_stats(stats: Mapping[str, Any]) -> bool:
    """Does the bulk answer lack something only per-topic stats have for this topic?

    Key_Shared subscriptions with consumers (hash ranges, draining hashes, mode) and Failover
    subscriptions with two or more consumers (which one is active) do; for Exclusive and
    single-consumer Failover the active consumer is the only one.
    """
    for sub in as_dict(stats.get("subscriptions")).values():
        sub = as_dict(sub)
        consumers = len(as_list(sub.get("consumers")))
        kind = as_str(sub, "type")
        if (kind == "Key_Shared" and consumers > 0) or (kind == "Failover" and consumers > 1):
            return True
    return False


def parse_topic(
    name: TopicName, stats: Mapping[str, Any] | None, *, bundle: str | None, owner: str | None
) -> TopicRecord:
    """A TopicRecord from a topic stats object (bulk or per-topic shape; None when unloaded)."""
    stats = stats if stats is not None else {}
    producers = as_int(stats, "producerCount")
    if producers is None and isinstance(stats.get("publishers"), list):
        producers = len(stats["publishers"])
    subscriptions = stats.get("subscriptions")
    publishers = stats.get("publishers")
    since = [
        as_iso_time(pub, "connectedSince")
        for pub in (publishers if isinstance(publishers, list) else [])
        if isinstance(pub, Mapping)
    ]
    known = [t for t in since if t is not None]
    return TopicRecord(
        topic=name.topic,
        tenant=name.tenant,
        namespace=name.namespace,
        persistent=name.persistent,
        partitioned_topic=name.partitioned_topic,
        partition_index=name.partition_index,
        bundle=bundle,
        owner_broker=owner,
        msg_rate_in=as_float(stats, "msgRateIn"),
        msg_rate_out=as_float(stats, "msgRateOut"),
        msg_throughput_in=as_float(stats, "msgThroughputIn"),
        msg_throughput_out=as_float(stats, "msgThroughputOut"),
        storage_size=as_int(stats, "storageSize"),
        backlog_size=as_int(stats, "backlogSize"),
        producer_count=producers,
        subscription_count=len(subscriptions) if isinstance(subscriptions, Mapping) else None,
        oldest_publisher_since=min(known) if known else None,
    )


def parse_consumer(topic: str, subscription: str, consumer: Mapping[str, Any]) -> ConsumerRecord:
    """One consumer of a subscription (4.0 and 3.0 field sets)."""
    return ConsumerRecord(
        topic=topic,
        subscription=subscription,
        consumer_name=as_str(consumer, "consumerName") or "",
        address=as_str(consumer, "address"),
        connected_since=as_iso_time(consumer, "connectedSince"),
        client_version=as_str(consumer, "clientVersion"),
        unacked_messages=as_int(consumer, "unackedMessages"),
        blocked_on_unacked=as_bool(consumer, "blockedConsumerOnUnackedMsgs"),
        available_permits=as_int(consumer, "availablePermits"),
        msg_rate_out=as_float(consumer, "msgRateOut"),
        msg_ack_rate=as_float(consumer, "messageAckRate"),
        hash_ranges=parse_hash_ranges(consumer),
        draining_hashes_count=as_int(consumer, "drainingHashesCount"),
        draining_hashes_cleared_total=as_int(consumer, "drainingHashesClearedTotal"),
        draining_hashes_unacked_messages=as_int(consumer, "drainingHashesUnackedMessages"),
        read_position_when_joining=as_str(
            consumer, "readPositionWhenJoining", "lastSentPositionWhenJoining"
        ),
        last_acked_at=as_epoch_ms(consumer, "lastAckedTimestamp"),
        last_consumed_at=as_epoch_ms(consumer, "lastConsumedTimestamp"),
    )


def parse_draining_hashes(
    topic: str, subscription: str, consumer: Mapping[str, Any]
) -> list[DrainingHashRecord]:
    """The PIP-379 draining hashes of one consumer (`drainingHashes`, 4.0 only)."""
    name = as_str(consumer, "consumerName") or ""
    rows = []
    for item in as_list(consumer.get("drainingHashes")):
        item = as_dict(item)
        hash_value = as_int(item, "hash")
        if hash_value is None:
            continue
        rows.append(
            DrainingHashRecord(
                topic=topic,
                subscription=subscription,
                consumer_name=name,
                hash=hash_value,
                unack_msgs=as_int(item, "unackMsgs", "unackedMessages") or 0,
                blocked_attempts=as_int(item, "blockedAttempts") or 0,
            )
        )
    return rows


def parse_subscription(topic: str, name: str, sub: Mapping[str, Any]) -> SubscriptionRecord:
    """One subscription; the active consumer is inferred only when there is a single one."""
    consumers = [as_dict(c) for c in as_list(sub.get("consumers"))]
    kind = as_str(sub, "type")
    if kind == "None":  # 4.0.7 says "None" for a subscription that has no dispatcher yet
        kind = None
    active = as_str(sub, "activeConsumerName")
    if active is None and kind in SINGLE_ACTIVE_TYPES and len(consumers) == 1:
        active = as_str(consumers[0], "consumerName")
    return SubscriptionRecord(
        topic=topic,
        subscription=name,
        type=kind,
        msg_backlog=as_int(sub, "msgBacklog"),
        backlog_size=as_int(sub, "backlogSize"),
        unacked_messages=as_int(sub, "unackedMessages"),
        msg_in_replay=as_int(sub, "msgInReplay"),
        msg_rate_out=as_float(sub, "msgRateOut"),
        msg_ack_rate=as_float(sub, "messageAckRate"),
        msg_rate_redeliver=as_float(sub, "msgRateRedeliver"),
        blocked_on_unacked=as_bool(sub, "blockedSubscriptionOnUnackedMsgs"),
        key_shared_mode=as_str(sub, "keySharedMode"),
        allow_out_of_order_delivery=as_bool(sub, "allowOutOfOrderDelivery"),
        draining_hashes_count=as_int(sub, "drainingHashesCount"),
        draining_hashes_cleared_total=as_int(sub, "drainingHashesClearedTotal"),
        draining_hashes_unacked_messages=as_int(sub, "drainingHashesUnackedMessages"),
        active_consumer_name=active,
        consumer_count=len(consumers),
        is_durable=as_bool(sub, "isDurable", "durable"),
        last_consumed_at=as_epoch_ms(sub, "lastConsumedTimestamp"),
        last_acked_at=as_epoch_ms(sub, "lastAckedTimestamp"),
        earliest_msg_publish_time_in_backlog=as_epoch_ms(sub, "earliestMsgPublishTimeInBacklog"),
        consumers_after_mark_delete_position=as_json_text(
            sub.get("consumersAfterMarkDeletePosition")
        ),
    )


@dataclass(frozen=True, slots=True)
class SubscriptionRows:
    subscriptions: tuple[SubscriptionRecord, ...]
    consumers: tuple[ConsumerRecord, ...]
    draining_hashes: tuple[DrainingHashRecord, ...]


def parse_subscriptions(topic: str, stats: Mapping[str, Any]) -> SubscriptionRows:
    """Subscriptions, consumers and draining hashes of one topic stats object."""
    subs, consumers, draining = [], [], []
    for name, sub in sorted(as_dict(stats.get("subscriptions")).items()):
        if not isinstance(sub, Mapping):
            warn(f"subscription {shown(name)} is {shown(sub)}, not an object; left out")
            continue
        name = as_text(name, "subscription")
        subs.append(parse_subscription(topic, name, sub))
        for consumer in as_list(sub.get("consumers")):
            if not isinstance(consumer, Mapping):
                warn(f"a consumer of {shown(name)} is {shown(consumer)}, not an object; left out")
                continue
            consumers.append(parse_consumer(topic, name, consumer))
            draining.extend(parse_draining_hashes(topic, name, consumer))
    return SubscriptionRows(tuple(subs), tuple(consumers), tuple(draining))


def iter_partitions(parent: str, count: int) -> Iterator[str]:
    for index in range(count):
        yield f"{parent}-partition-{index}"
