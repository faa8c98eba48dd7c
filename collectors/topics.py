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

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.fields import (
    MAX_HASH_ITEMS,
    MAX_TEXT,
    as_bool,
    as_dict,
    as_epoch_ms,
    as_float,
    as_int,
    as_iso_time,
    as_items,
    as_json_text,
    as_list,
    as_object,
    as_str,
    as_text,
    check_keys,
    json_kind,
    parse_hash_ranges,
)
from pulsar_lens.collectors.notes import refuse, within
from pulsar_lens.collectors.typedstats import BulkTopic
from pulsar_lens.core.errors import AdminApiError
from pulsar_lens.core.model import (
    ConsumerRecord,
    DrainingHashRecord,
    HashRange,
    SubscriptionRecord,
    TopicRecord,
)
from pulsar_lens.core.names import NameRefused, shown_name
from pulsar_lens.core.topicname import TopicName, TopicNameError, parse_topic_name

SINGLE_ACTIVE_TYPES = frozenset({"Exclusive", "Failover"})


@dataclass(frozen=True, slots=True)
class TopicStats:
    """One topic's stats object as a broker reported it (its bulk answer's as a Struct when
    read into one, see `collectors.typedstats`)."""

    topic: str
    broker: str | None
    bundle: str | None
    stats: Mapping[str, Any] | BulkTopic


def parse_broker_topic_stats(payload: Mapping[str, Any], broker: str) -> list[TopicStats]:
    """Flatten the nested broker-stats/topics answer of `broker` into one entry per topic.

    What cannot be one is refused, naming it: a level that is not an object, a topic whose
    name the broker would refuse or that claims a namespace or domain it is not listed under,
    stats that are not an object."""
    found: list[TopicStats] = []
    with collection_paused():  # no garbage is made: see `collection_paused`
        for namespace, bundles in _levels(payload, "answer", "namespace"):
            with within(broker, namespace):
                for bundle, domains in _levels(bundles, "namespace", "bundle"):
                    with within(bundle):
                        found.extend(_bundle_topics(domains, namespace, as_text(bundle), broker))
    return found


def _bundle_topics(domains: Any, namespace: str, bundle: str, broker: str) -> list[TopicStats]:
    found = []
    for domain, topics in _levels(domains, "bundle", "domain"):
        with within(domain):
            for topic, stats in _levels(topics, "domain", "topic"):
                if _listed_topic(topic, stats, namespace, domain):
                    found.append(TopicStats(topic, broker, bundle, stats))
    return found


def _levels(value: Any, what: str, inner: str) -> Iterator[tuple[str, Any]]:
    """The entries of one level of the bulk nesting (refused when it is not an object)."""
    if not isinstance(value, Mapping):
        refuse(f"broker-stats/topics {what}", f"is {json_kind(value)}, not an object; left out")
        return
    check_keys(value, f"broker-stats/topics {inner}")
    yield from value.items()


def _listed_topic(topic: str, stats: Any, namespace: str, domain: str) -> bool:
    why = topic_refusal(topic)
    if why is None:
        name = parse_topic_name(topic)
        if name.namespace != namespace or name.domain != domain:
            why = "is listed under another namespace or domain than its name says"
        elif not isinstance(stats, Mapping):
            why = f"has stats that are {json_kind(stats)}, not an object"
    if why is not None:
        refuse("topic", f"{why}; left out", topic)
    return why is None


def topic_refusal(topic: str) -> str | None:
    """Why a topic name read from an answer is no topic the collector can keep (None when it
    is one): the broker would refuse it, it is not valid text (bytes that were not UTF-8),
    it is longer than any admin request can carry, or it has a `.` or `..` segment, which
    no metadata store keeps and no request path can name."""
    if len(topic) > MAX_TEXT:
        return f"is longer than {MAX_TEXT:,} characters"
    try:
        name = parse_topic_name(topic)
    except TopicNameError:
        if any("\ud800" <= c <= "\udfff" for c in topic):
            return "is not valid UTF-8 text"
        return "is a name the broker would refuse"
    # the local name is one segment to the store and in a request path (its `/` encoded)
    parts = (*name.namespace.split("/"), name.local)
    if any(part in (".", "..") for part in parts):
        return "has a . or .. segment"
    return None


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
    check_keys(stats, "topic stats")
    publishers = as_items(stats, "publishers", "topic publishers")
    producers = as_int(stats, "producerCount")
    if producers is None and isinstance(stats.get("publishers"), list):
        producers = len(publishers)
    subscriptions = stats.get("subscriptions")
    since = [as_iso_time(pub, "connectedSince") for pub in publishers if isinstance(pub, Mapping)]
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
    name = as_str(consumer, "consumerName") or ""
    ranges: tuple[HashRange, ...] = ()
    if "keyHashRangeArrays" in consumer or "keyHashRanges" in consumer:  # else none to read
        with within(name):
            ranges = parse_hash_ranges(consumer)
    return ConsumerRecord(
        topic=topic,
        subscription=subscription,
        consumer_name=name,
        address=as_str(consumer, "address"),
        connected_since=as_iso_time(consumer, "connectedSince"),
        client_version=as_str(consumer, "clientVersion"),
        unacked_messages=as_int(consumer, "unackedMessages"),
        blocked_on_unacked=as_bool(consumer, "blockedConsumerOnUnackedMsgs"),
        available_permits=as_int(consumer, "availablePermits"),
        msg_rate_out=as_float(consumer, "msgRateOut"),
        msg_ack_rate=as_float(consumer, "messageAckRate"),
        hash_ranges=ranges,
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
    topic: str, subscription: str, consumer: Mapping[str, Any], *, name: str | None = None
) -> list[DrainingHashRecord]:
    """The PIP-379 draining hashes of one consumer (`drainingHashes`, 4.0 only), at most
    MAX_HASH_ITEMS; `name` is the consumer's as parsed already (else read again)."""
    if name is None:
        name = as_str(consumer, "consumerName") or ""
    rows = []
    what = "consumer drainingHashes"
    for item in as_items(consumer, "drainingHashes", what, limit=MAX_HASH_ITEMS):
        hash_value = as_int(item, "hash") if isinstance(item, Mapping) else None
        if hash_value is None:
            refuse(f"{what} item", "is not an object with a whole-number hash; left out", item)
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
    """Subscriptions, consumers and draining hashes of one topic stats object; what is not
    one (a subscription that is not an object or has a name no request could carry, a
    consumer that is not an object) is refused, and the rest kept."""
    subs, consumers, draining = [], [], []
    by_name = as_object(stats, "subscriptions", "topic subscriptions")
    check_keys(by_name, "topic subscriptions")
    for name, sub in sorted(by_name.items()):
        if not isinstance(sub, Mapping):
            refuse("subscription", f"is {json_kind(sub)}, not an object; left out", name)
            continue
        if len(name) > MAX_TEXT:
            refuse("subscription", f"has a name longer than {MAX_TEXT:,} characters", name)
            continue
        name = as_text(name, "subscription")
        with within(name):
            check_keys(sub, "subscription")
            subs.append(parse_subscription(topic, name, sub))
            for consumer in as_items(sub, "consumers", "subscription consumers"):
                if not isinstance(consumer, Mapping):
                    refuse("consumer", f"is {json_kind(consumer)}, not an object; left out")
                    continue
                check_keys(consumer, "consumer")
                record = parse_consumer(topic, name, consumer)
                if "drainingHashes" in consumer:  # else there is nothing to read or refuse
                    with within(record.consumer_name):
                        draining.extend(
                            parse_draining_hashes(topic, name, consumer, name=record.consumer_name)
                        )
                consumers.append(record)
    return SubscriptionRows(tuple(subs), tuple(consumers), tuple(draining))


def iter_partitions(parent: str, count: int) -> Iterator[str]:
    for index in range(count):
        yield f"{parent}-partition-{index}"
