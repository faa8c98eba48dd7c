"""Snapshot tables: one frozen record type per entity, their Arrow schemas, and `Snapshot`
(what each column means, read from the comments beside the fields: `core.tabledocs`).

A poll yields one `Snapshot`; each table holds one row per entity for that poll. Column names
are snake_case; Pulsar's camelCase stops at the collectors' `parse_*` functions. Every stored
row also carries `snapshot_id`, `collected_at` and `cluster` (added by `records_to_table`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from operator import attrgetter, itemgetter
from typing import Any

import pyarrow as pa

from pulsar_lens.core.secrets import clean
from pulsar_lens.core.tablenames import POLLED_TABLES as POLLED_TABLES
from pulsar_lens.core.tablenames import TABLES as TABLES
from pulsar_lens.core.tablenames import TIMED_TABLES as TIMED_TABLES

HashRange = tuple[int, int]
"""An inclusive hash range `(start, end)` as Pulsar reports it."""


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    broker_id: str  # "host:webPort", as GET /admin/v2/brokers/{cluster} lists it
    web_service_url: str | None = None  # the broker's admin/web URL as it advertises it
    pulsar_service_url: str | None = None  # the broker's binary-protocol URL
    version: str | None = None  # Pulsar version the broker reports
    is_leader: bool = False  # whether this broker is the load-manager leader
    cpu_usage_pct: float | None = None  # CPU usage from the broker's load report, percent
    memory_usage_pct: float | None = None  # JVM memory usage from the load report, percent
    msg_rate_in: float | None = None  # messages/s published to the broker's topics (load report)
    msg_rate_out: float | None = None  # messages/s dispatched by the broker (load report)
    num_topics: int | None = None  # topics the broker serves (load report)
    num_bundles: int | None = None  # bundles the broker owns (load report)
    num_consumers: int | None = None  # consumers connected to the broker (load report)
    num_producers: int | None = None  # producers connected to the broker (load report)
    lb_bundles_unloaded: int | None = None  # bundles its shedder unloaded since it started
    lb_bundles_split: int | None = None  # bundles its load manager split since it started


LOAD_MANAGER_COUNTERS = {"unloaded": "lb_bundles_unloaded", "split": "lb_bundles_split"}
"""What a broker's load manager counts (its `brk_lb_*_total` metrics) -> the BrokerRecord field."""


@dataclass(frozen=True, slots=True)
class BundleRecord:
    namespace: str  # "tenant/ns"
    tenant: str  # the namespace's tenant
    bundle: str  # "0x00000000_0x40000000"
    lower: int  # inclusive start of the CRC32 range
    upper: int  # exclusive end (inclusive for the last bundle, 0xffffffff)
    owner_broker: str | None = None  # broker_id of the owner, None when unowned or unknown
    topic_count: int = 0  # topics of this snapshot that hash into the bundle
    msg_rate_in: float | None = None  # sum of msg_rate_in over those topics
    msg_rate_out: float | None = None  # sum of msg_rate_out over those topics


@dataclass(frozen=True, slots=True)
class TopicRecord:
    topic: str  # full name, e.g. persistent://public/default/orders-partition-3
    tenant: str  # the topic's tenant
    namespace: str  # "tenant/ns"
    persistent: bool = True  # persistent:// (True) or non-persistent:// (False)
    partitioned_topic: str | None = None  # parent name for a partition, else None
    partition_index: int = -1  # N of a -partition-N name, else -1
    bundle: str | None = None  # the bundle the topic hashes into, e.g. 0x00000000_0x40000000
    owner_broker: str | None = None  # broker_id of the bundle's owner
    msg_rate_in: float | None = None  # messages/s published (topic stats msgRateIn)
    msg_rate_out: float | None = None  # messages/s dispatched to all subscriptions (msgRateOut)
    msg_throughput_in: float | None = None  # bytes/s published (msgThroughputIn)
    msg_throughput_out: float | None = None  # bytes/s dispatched (msgThroughputOut)
    storage_size: int | None = None  # bytes stored for the topic (storageSize)
    # bytes not yet acknowledged by the slowest subscription (backlogSize)
    backlog_size: int | None = None
    producer_count: int | None = None  # connected producers
    subscription_count: int | None = None  # subscriptions on the topic
    # the oldest connectedSince among its publishers: newer than the previous poll when
    # every producer reconnected since (an unload), None without publishers
    oldest_publisher_since: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    topic: str  # full topic name
    subscription: str  # subscription name
    type: str | None = None  # Exclusive, Shared, Failover, Key_Shared
    msg_backlog: int | None = None  # messages not yet acknowledged (msgBacklog)
    backlog_size: int | None = None  # bytes of that backlog (backlogSize)
    # messages delivered and not yet acknowledged (unackedMessages)
    unacked_messages: int | None = None
    msg_in_replay: int | None = None  # messages waiting for redelivery (msgInReplay)
    msg_rate_out: float | None = None  # messages/s dispatched (msgRateOut)
    msg_ack_rate: float | None = None  # acknowledgements/s (messageAckRate)
    msg_rate_redeliver: float | None = None  # messages/s redelivered (msgRateRedeliver)
    blocked_on_unacked: bool | None = None  # dispatch blocked by maxUnackedMessagesPerSubscription
    key_shared_mode: str | None = None  # AUTO_SPLIT, STICKY
    allow_out_of_order_delivery: bool | None = None  # Key_Shared allowOutOfOrderDelivery
    # hashes still draining to a previous owner (PIP-379, 4.0+)
    draining_hashes_count: int | None = None
    # draining hashes cleared since the subscription started
    draining_hashes_cleared_total: int | None = None
    draining_hashes_unacked_messages: int | None = None  # unacked messages held by draining hashes
    # the active consumer of a Failover/Exclusive subscription
    active_consumer_name: str | None = None
    consumer_count: int = 0  # connected consumers
    is_durable: bool | None = None  # durable (True) or non-durable (reader) subscription
    # when a message was last dispatched (lastConsumedTimestamp)
    last_consumed_at: dt.datetime | None = None
    # when a message was last acknowledged (lastAckedTimestamp)
    last_acked_at: dt.datetime | None = None
    # publish time of the oldest backlog message
    earliest_msg_publish_time_in_backlog: dt.datetime | None = None
    # classic (3.x) dispatcher: consumer -> position when it joined, JSON object text
    consumers_after_mark_delete_position: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str  # full topic name
    subscription: str  # subscription name
    consumer_name: str  # the consumer's name as the client set it
    address: str | None = None  # the client's address
    connected_since: dt.datetime | None = None  # when the consumer connected
    client_version: str | None = None  # the client library and version
    unacked_messages: int | None = None  # messages delivered to it and not yet acknowledged
    # dispatch to it blocked by maxUnackedMessagesPerConsumer
    blocked_on_unacked: bool | None = None
    available_permits: int | None = None  # flow-control permits the client granted
    msg_rate_out: float | None = None  # messages/s dispatched to it
    msg_ack_rate: float | None = None  # acknowledgements/s from it
    # Key_Shared hash ranges it owns (keyHashRanges), inclusive
    hash_ranges: tuple[HashRange, ...] = ()
    draining_hashes_count: int | None = None  # hashes draining from it (PIP-379)
    draining_hashes_cleared_total: int | None = None  # draining hashes cleared since it connected
    # unacked messages held by its draining hashes
    draining_hashes_unacked_messages: int | None = None
    read_position_when_joining: str | None = None  # classic Key_Shared: position when it joined
    last_acked_at: dt.datetime | None = None  # when it last acknowledged
    last_consumed_at: dt.datetime | None = None  # when a message was last dispatched to it


@dataclass(frozen=True, slots=True)
class DrainingHashRecord:
    topic: str  # full topic name
    subscription: str  # subscription name
    consumer_name: str  # the consumer the hash still drains to
    hash: int  # the sticky-key hash, as the broker reports it
    unack_msgs: int  # unacked messages with that hash
    blocked_attempts: int  # dispatch attempts blocked on this hash


@dataclass(frozen=True, slots=True)
class EventRecord:
    at: dt.datetime  # when the change was observed (the later poll)
    kind: str  # bundle_owner_changed, consumer_joined, consumer_left, hash_ranges_changed, ...
    subject: str  # what changed: a bundle key, a "topic/subscription/consumer" path, ...
    namespace: str | None = None  # namespace concerned, when there is one
    topic: str | None = None  # topic concerned, when there is one
    subscription: str | None = None  # subscription concerned, when there is one
    consumer_name: str | None = None  # consumer concerned, when there is one
    before: str | None = None  # value before the change, as text
    after: str | None = None  # value after the change, as text


SLOW_PUBLISH_MS = 50.0
"""A probe publish slower than this (milliseconds) is part of an outage, by default: well above
a healthy cluster's publish latency, well below the client's first reconnect retry (100 ms)."""


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One probe message: published by a probe's producer and read back by its consumer.

    A row is written once its fate is known: received, or given up on after the probe's
    receive timeout (received == 0: lost, unless the run stopped first). `collected_at` is
    when the batch was written; `snapshot_id` names the batch."""

    probe: str  # the probe run that sent it; sequence numbers restart with each run
    topic: str  # the probe topic, persistent://tenant/ns/...
    namespace: str  # "tenant/ns" of the watched bundle
    bundle: str  # the watched bundle, e.g. 0x00000000_0x40000000
    seq: int  # sequence number within the run, from 0, one per message sent
    sent_at: dt.datetime  # when the producer was asked to send it
    acked_at: dt.datetime | None = None  # when the broker acknowledged the publish
    received_at: dt.datetime | None = None  # when the consumer first received it
    publish_ms: float | None = None  # sent -> acked, milliseconds
    e2e_ms: float | None = None  # sent -> first received, milliseconds
    received: int = 0  # times the consumer received it; more than 1 are duplicates
    error: str | None = None  # why publishing failed, when it did


@dataclass(frozen=True, slots=True)
class KeySampleRecord:
    topic: str  # topic the key was read from
    key: str  # the message key (or ordering key) sampled
    sticky_hash: int  # as a 4.0 consistent-hashing broker routes the key (1..65535)
    publish_time: dt.datetime | None = None  # publish time of the sampled message


@dataclass(frozen=True, slots=True)
class EndpointError:
    """One failed admin call of a poll; the rest of the poll went on."""

    endpoint: str  # "GET /admin/v2/...", or the endpoint family of a failure that is no call
    status: int | None
    message: str  # what went wrong; a failed call's says it after `endpoint`, not repeating it

    def __post_init__(self) -> None:
        # stored and shown as they are: whatever they quote from the network is cleaned here
        object.__setattr__(self, "endpoint", clean(self.endpoint, limit=500))
        object.__setattr__(self, "message", clean(self.message, limit=1000))


def parse_errors(errors_json: object) -> tuple[EndpointError, ...]:
    """The endpoint errors an index row lists in `errors_json`; ValueError (or TypeError,
    AttributeError) when the cell is not such a list."""
    if not errors_json:
        return ()
    items = json.loads(str(errors_json))
    if not isinstance(items, list):
        raise ValueError(f"errors_json is not a list: {str(errors_json)[:80]}")
    return tuple(
        EndpointError(
            endpoint=str(item.get("endpoint", "")),
            status=None if item.get("status") is None else int(item["status"]),
            message=str(item.get("message", "")),
        )
        for item in items
    )


RECORD_TYPES: Mapping[str, type] = {
    "brokers": BrokerRecord,
    "bundles": BundleRecord,
    "topics": TopicRecord,
    "subscriptions": SubscriptionRecord,
    "consumers": ConsumerRecord,
    "draining_hashes": DrainingHashRecord,
    "events": EventRecord,
    "probes": ProbeRecord,
    "key_samples": KeySampleRecord,
}

UTC_TS = pa.timestamp("us", tz="UTC")
HASH_RANGE_TYPE = pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32())]))
COMMON_FIELDS = (
    pa.field("snapshot_id", pa.string(), nullable=False),
    pa.field("collected_at", UTC_TS, nullable=False),
    pa.field("cluster", pa.string(), nullable=False),
)


def arrow_type(hint: Any) -> pa.DataType:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return arrow_type(inner)
    if hint is str:
        return pa.string()
    if hint is bool:
        return pa.bool_()
    if hint is int:
        return pa.int64()
    if hint is float:
        return pa.float64()
    if hint is dt.datetime:
        return UTC_TS
    if typing.get_origin(hint) is tuple:
        return HASH_RANGE_TYPE
    raise TypeError(f"no Arrow type for {hint!r}")


def _schema_for(record_type: type) -> pa.Schema:
    hints = typing.get_type_hints(record_type)
    fields = [pa.field(f.name, arrow_type(hints[f.name])) for f in dataclasses.fields(record_type)]
    return pa.schema([*COMMON_FIELDS, *fields])


SCHEMAS: Mapping[str, pa.Schema] = {name: _schema_for(t) for name, t in RECORD_TYPES.items()}
CONTENT_SCHEMAS: Mapping[str, pa.Schema] = {
    name: pa.schema(list(schema)[len(COMMON_FIELDS) :]) for name, schema in SCHEMAS.items()
}
"""The record fields of each table: what a `content_table` holds."""
_ROW_GETTERS: Mapping[type, Any] = {
    record_type: attrgetter(*(f.name for f in dataclasses.fields(record_type)))
    for record_type in RECORD_TYPES.values()
}


def _cell(value: Any) -> Any:
    if isinstance(value, tuple):
        return [{"start": s, "end": e} for s, e in value]
    return value


def _hash_ranges(values: list[Any]) -> pa.Array | list[Any]:
    """A column of hash-range tuples, built from flat start and end arrays (a tenth of the
    time of a dict per range); anything but tuples of pairs goes through `_cell`."""
    pairs = list(chain.from_iterable(values)) if set(map(type, values)) == {tuple} else None
    if pairs is None or not set(map(type, pairs)) <= {tuple, list} or set(map(len, pairs)) - {2}:
        return [_cell(v) for v in values]
    item = HASH_RANGE_TYPE.value_type
    bounds = [pa.array(list(map(itemgetter(i), pairs)), item[i].type) for i in (0, 1)]
    offsets = pa.array(list(accumulate(map(len, values), initial=0)), pa.int32())
    struct = pa.StructArray.from_arrays(bounds, fields=list(item))
    return pa.ListArray.from_arrays(offsets, struct, type=HASH_RANGE_TYPE)


def content_table(name: str, records: Sequence[Any]) -> pa.Table:
    """The Arrow table `name` of these records: their fields only, without the common columns.

    Refuses (ValueError) a naive datetime, whose instant is ambiguous: Arrow would read it as
    UTC without a word."""
    held = getattr(records, "held_table", None)  # rows built as Arrow (core.tablerows)
    table = held(name) if held is not None else None
    if table is not None:
        return table
    # column by column: one C-level pass per field (attrgetter), no call per cell
    fields = CONTENT_SCHEMAS[name].names
    return _columns_table(name, [list(map(attrgetter(f), records)) for f in fields])


def row_of(record: Any) -> tuple[Any, ...]:
    """A record's fields as a tuple, in their order: a row of `rows_content_table`."""
    row: tuple[Any, ...] = _ROW_GETTERS[type(record)](record)
    return row


def rows_content_table(name: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    """`content_table` of rows given as tuples of a record's fields, in their order: what a
    record holds, without making one (a frozen record costs some 3 µs to make, a tuple 0.05)."""
    schema = CONTENT_SCHEMAS[name]
    width = len(schema)
    if any(len(row) != width for row in rows):
        raise ValueError(f"a row of {name} holds its {width} fields")
    if not rows:
        return _columns_table(name, [[]] * width)
    for i, f in enumerate(schema):
        if f.type == UTC_TS:
            _refuse_naive(name, f.name, [row[i] for row in rows])
    # the rows read as one struct column: Arrow takes each tuple's fields in place, where a
    # column at a time would first turn the rows around (a third of this function's time)
    structs = pa.array(rows, type=pa.struct(schema))
    return pa.Table.from_struct_array(structs).replace_schema_metadata(schema.metadata)


def _columns_table(name: str, columns: Sequence[list[Any]]) -> pa.Table:
    """The content table `name` of its columns' Python values, in the schema's order."""
    schema = CONTENT_SCHEMAS[name]
    arrays: dict[str, list[Any] | pa.Array] = {}
    for f, values in zip(schema, columns, strict=True):
        if f.type == HASH_RANGE_TYPE:
            arrays[f.name] = _hash_ranges(values)
        else:
            if f.type == UTC_TS:
                _refuse_naive(name, f.name, values)
            arrays[f.name] = values
    return pa.table(arrays, schema=schema)


def _refuse_naive(name: str, column: str, values: list[Any]) -> None:
    """ValueError when a value of a timestamp column is a naive datetime."""
    if None in set(map(attrgetter("tzinfo"), filter(None, values))):
        raise ValueError(f"{name}.{column}: a naive datetime has no time zone; use UTC")


def with_common_columns(
    table: pa.Table, *, snapshot_id: str, collected_at: dt.datetime, cluster: str
) -> pa.Table:
    """`table` (a `content_table`) with the common columns in front, as the store keeps it."""
    count = table.num_rows
    common = [
        pa.repeat(pa.scalar(snapshot_id, pa.string()), count),
        pa.repeat(pa.scalar(collected_at, UTC_TS), count),
        pa.repeat(pa.scalar(cluster, pa.string()), count),
    ]
    return pa.Table.from_arrays(
        [*common, *table.columns], schema=pa.schema([*COMMON_FIELDS, *table.schema])
    )


def records_to_table(
    name: str,
    records: Sequence[Any],
    *,
    snapshot_id: str,
    collected_at: dt.datetime,
    cluster: str,
) -> pa.Table:
    """Build the Arrow table `name` from records, adding the common columns."""
    return with_common_columns(
        content_table(name, records),
        snapshot_id=snapshot_id,
        collected_at=collected_at,
        cluster=cluster,
    )


def empty_table(name: str) -> pa.Table:
    return SCHEMAS[name].empty_table()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one poll of one cluster saw.

    `errors` lists the admin calls that failed; a snapshot with errors is partial and the
    dashboard says so. `durations` maps endpoint families to seconds spent, `requests` counts
    the HTTP requests made.
    """

    cluster: str
    collected_at: dt.datetime
    brokers: tuple[BrokerRecord, ...] = ()
    bundles: tuple[BundleRecord, ...] = ()
    # tuples of records, or the same rows held as Arrow (`core.tablerows.TableRows`)
    topics: Sequence[TopicRecord] = ()
    subscriptions: Sequence[SubscriptionRecord] = ()
    consumers: Sequence[ConsumerRecord] = ()
    draining_hashes: Sequence[DrainingHashRecord] = ()
    errors: tuple[EndpointError, ...] = ()
    durations: Mapping[str, float] = field(default_factory=dict)
    requests: int = 0

    @property
    def partial(self) -> bool:
        return bool(self.errors)

    def records(self, name: str) -> Sequence[Any]:
        """The rows of table `name`, as held: a tuple of records or `core.tablerows.TableRows`."""
        if name not in POLLED_TABLES:
            raise KeyError(f"a snapshot has no table {name!r}; it has {', '.join(POLLED_TABLES)}")
        rows: Sequence[Any] = getattr(self, name)
        return rows

    def content_tables(self) -> dict[str, pa.Table]:
        """Every polled table as Arrow, the record fields only: what the store writes (with
        the common columns added) and what the snapshot id digests."""
        return {name: content_table(name, self.records(name)) for name in POLLED_TABLES}
