"""Snapshot tables: one frozen record type per entity, their Arrow schemas, and `Snapshot`.

A poll yields one `Snapshot`; each table holds one row per entity for that poll. Column names
are snake_case; Pulsar's camelCase stops at the collectors' `parse_*` functions. Every stored
row also carries `snapshot_id`, `collected_at` and `cluster` (added by `Snapshot.table`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

HashRange = tuple[int, int]
"""An inclusive hash range `(start, end)` as Pulsar reports it."""


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    broker_id: str  # "host:webPort", as GET /admin/v2/brokers/{cluster} lists it
    web_service_url: str | None = None
    pulsar_service_url: str | None = None
    version: str | None = None
    is_leader: bool = False
    cpu_usage_pct: float | None = None
    memory_usage_pct: float | None = None
    msg_rate_in: float | None = None
    msg_rate_out: float | None = None
    num_topics: int | None = None
    num_bundles: int | None = None
    num_consumers: int | None = None
    num_producers: int | None = None


@dataclass(frozen=True, slots=True)
class BundleRecord:
    namespace: str  # "tenant/ns"
    tenant: str
    bundle: str  # "0x00000000_0x40000000"
    lower: int  # inclusive start of the CRC32 range
    upper: int  # exclusive end (inclusive for the last bundle, 0xffffffff)
    owner_broker: str | None = None
    topic_count: int = 0
    msg_rate_in: float | None = None
    msg_rate_out: float | None = None


@dataclass(frozen=True, slots=True)
class TopicRecord:
    topic: str  # full name, e.g. persistent://public/default/orders-partition-3
    tenant: str
    namespace: str  # "tenant/ns"
    persistent: bool = True
    partitioned_topic: str | None = None  # parent name for a partition, else None
    partition_index: int = -1
    bundle: str | None = None
    owner_broker: str | None = None
    msg_rate_in: float | None = None
    msg_rate_out: float | None = None
    msg_throughput_in: float | None = None
    msg_throughput_out: float | None = None
    storage_size: int | None = None
    backlog_size: int | None = None
    producer_count: int | None = None
    subscription_count: int | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    topic: str
    subscription: str
    type: str | None = None  # Exclusive, Shared, Failover, Key_Shared
    msg_backlog: int | None = None
    backlog_size: int | None = None
    unacked_messages: int | None = None
    msg_in_replay: int | None = None
    msg_rate_out: float | None = None
    msg_ack_rate: float | None = None
    msg_rate_redeliver: float | None = None
    blocked_on_unacked: bool | None = None
    key_shared_mode: str | None = None  # AUTO_SPLIT, STICKY
    allow_out_of_order_delivery: bool | None = None
    draining_hashes_count: int | None = None
    draining_hashes_cleared_total: int | None = None
    draining_hashes_unacked_messages: int | None = None
    active_consumer_name: str | None = None
    consumer_count: int = 0
    is_durable: bool | None = None
    last_consumed_at: dt.datetime | None = None
    last_acked_at: dt.datetime | None = None
    earliest_msg_publish_time_in_backlog: dt.datetime | None = None
    # classic (3.x) dispatcher: consumer -> position when it joined, JSON object text
    consumers_after_mark_delete_position: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    subscription: str
    consumer_name: str
    address: str | None = None
    connected_since: dt.datetime | None = None
    client_version: str | None = None
    unacked_messages: int | None = None
    blocked_on_unacked: bool | None = None
    available_permits: int | None = None
    msg_rate_out: float | None = None
    msg_ack_rate: float | None = None
    hash_ranges: tuple[HashRange, ...] = ()
    draining_hashes_count: int | None = None
    draining_hashes_cleared_total: int | None = None
    draining_hashes_unacked_messages: int | None = None
    read_position_when_joining: str | None = None
    last_acked_at: dt.datetime | None = None
    last_consumed_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class DrainingHashRecord:
    topic: str
    subscription: str
    consumer_name: str
    hash: int
    unack_msgs: int
    blocked_attempts: int


@dataclass(frozen=True, slots=True)
class EventRecord:
    at: dt.datetime
    kind: str  # bundle_owner_changed, consumer_joined, consumer_left, hash_ranges_changed, ...
    subject: str  # what changed: a bundle key, a "topic/subscription/consumer" path, ...
    namespace: str | None = None
    topic: str | None = None
    subscription: str | None = None
    consumer_name: str | None = None
    before: str | None = None
    after: str | None = None


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    topic: str
    sent_at: dt.datetime
    latency_ms: float | None
    ok: bool
    error: str | None = None
    broker: str | None = None


@dataclass(frozen=True, slots=True)
class KeySampleRecord:
    topic: str
    key: str
    sticky_hash: int
    publish_time: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class EndpointError:
    """One failed admin call of a poll; the rest of the poll went on."""

    endpoint: str  # "GET /admin/v2/..."
    status: int | None
    message: str


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
TABLES: tuple[str, ...] = tuple(RECORD_TYPES)
POLLED_TABLES: tuple[str, ...] = (
    "brokers",
    "bundles",
    "topics",
    "subscriptions",
    "consumers",
    "draining_hashes",
)

UTC_TS = pa.timestamp("us", tz="UTC")
HASH_RANGE_TYPE = pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32())]))
COMMON_FIELDS = (
    pa.field("snapshot_id", pa.string(), nullable=False),
    pa.field("collected_at", UTC_TS, nullable=False),
    pa.field("cluster", pa.string(), nullable=False),
)


def _arrow_type(hint: Any) -> pa.DataType:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _arrow_type(inner)
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
    fields = [pa.field(f.name, _arrow_type(hints[f.name])) for f in dataclasses.fields(record_type)]
    return pa.schema([*COMMON_FIELDS, *fields])


SCHEMAS: Mapping[str, pa.Schema] = {name: _schema_for(t) for name, t in RECORD_TYPES.items()}


def _cell(value: Any) -> Any:
    if isinstance(value, tuple):
        return [{"start": s, "end": e} for s, e in value]
    return value


def records_to_table(
    name: str,
    records: Sequence[Any],
    *,
    snapshot_id: str,
    collected_at: dt.datetime,
    cluster: str,
) -> pa.Table:
    """Build the Arrow table `name` from records, adding the common columns."""
    schema = SCHEMAS[name]
    columns: dict[str, list[Any]] = {f.name: [] for f in schema}
    for record in records:
        columns["snapshot_id"].append(snapshot_id)
        columns["collected_at"].append(collected_at)
        columns["cluster"].append(cluster)
        for f in dataclasses.fields(record):
            columns[f.name].append(_cell(getattr(record, f.name)))
    return pa.table(columns, schema=schema)


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
    topics: tuple[TopicRecord, ...] = ()
    subscriptions: tuple[SubscriptionRecord, ...] = ()
    consumers: tuple[ConsumerRecord, ...] = ()
    draining_hashes: tuple[DrainingHashRecord, ...] = ()
    errors: tuple[EndpointError, ...] = ()
    durations: Mapping[str, float] = field(default_factory=dict)
    requests: int = 0

    @property
    def partial(self) -> bool:
        return bool(self.errors)

    def records(self, name: str) -> tuple[Any, ...]:
        if name not in POLLED_TABLES:
            raise KeyError(f"a snapshot has no table {name!r}; it has {', '.join(POLLED_TABLES)}")
        return tuple(getattr(self, name))
