"""The broker-stats/topics answer read straight into typed Structs, when that reads it exactly.

The bulk answer (one per broker, about 1.7 kB a topic) is the largest a poll reads. Decoded
to dicts, every field of it becomes Python objects, and every field a record needs is then
read through a tolerant helper (`collectors.fields`). Here msgspec decodes it once into
Structs of the fields Pulsar writes there, the fields the records read typed and bounded as
the column that stores them, so a record is built from plain attributes.

Only a body whose every value the tolerant readers would take as it is goes this way, so the
records, refusals and notes are those of the tolerant path (`decode_json` and
`parse_broker_topic_stats`), which reads every other body:

- msgspec refuses what is not UTF-8, a lone surrogate escape, a value of another type than
  its field's (a bool for a count, a float for an integer, a text for an object), a count
  past int64, a rate not finite and below 1e18, an epoch past the year 9999, a text longer
  than `MAX_TEXT`;
- a colon count proves nothing was dropped: the body's colons (one after each key, the rest
  inside texts) against those of the compact encoding of what was decoded. Escapes are
  counted as `decode_json` counts them: a `\\u003a` is one colon, and a text that merely
  spells it after an escaped backslash is counted too, which can only send the body to the
  tolerant path. The fields no record reads are decoded too, as plain JSON values: a
  `msgspec.Raw` would keep the whole body alive as long as the records are being made. A
  key held twice, a field Pulsar does not write here, or an explicit null (omitted again as
  a default) makes the counts differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from pulsar_lens.collectors.answers import collection_paused, decode_json, written_colons
from pulsar_lens.collectors.fields import (
    FLOAT_LIMIT,
    INT64_MAX,
    INT64_MIN,
    MAX_EPOCH_MS,
    MAX_TEXT,
)

Int = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
Epoch = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=MAX_EPOCH_MS)]
Float = Annotated[float, msgspec.Meta(gt=-FLOAT_LIMIT, lt=FLOAT_LIMIT)]
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
Unread = Any
"""A field no record reads."""
UNREAD = None


class _Stats(msgspec.Struct, gc=False, omit_defaults=True):
    """A level of the answer: no cycles (`gc=False`), defaults omitted when encoded."""


class BulkPublisher(_Stats):
    connectedSince: Text | None = None
    msgRateIn: Unread = UNREAD
    msgThroughputIn: Unread = UNREAD
    averageMsgSize: Unread = UNREAD
    chunkedMessageRate: Unread = UNREAD
    producerId: Unread = UNREAD
    supportsPartialProducer: Unread = UNREAD
    producerName: Unread = UNREAD
    accessMode: Unread = UNREAD
    address: Unread = UNREAD
    clientVersion: Unread = UNREAD
    metadata: Unread = UNREAD


class BulkConsumer(_Stats):
    consumerName: Text | None = None
    address: Text | None = None
    connectedSince: Text | None = None
    clientVersion: Text | None = None
    unackedMessages: Int | None = None
    blockedConsumerOnUnackedMsgs: bool | None = None
    availablePermits: Int | None = None
    msgRateOut: Float | None = None
    messageAckRate: Float | None = None
    # read by the tolerant helpers when present (rare in a bulk answer), so read as JSON
    keyHashRangeArrays: Any = None
    keyHashRanges: Any = None
    drainingHashes: Any = None
    drainingHashesCount: Int | None = None
    drainingHashesClearedTotal: Int | None = None
    drainingHashesUnackedMessages: Int | None = None
    readPositionWhenJoining: Text | None = None
    lastSentPositionWhenJoining: Text | None = None
    lastAckedTimestamp: Epoch | None = None
    lastConsumedTimestamp: Epoch | None = None
    avgMessagesPerEntry: Unread = UNREAD
    metadata: Unread = UNREAD
    msgRateRedeliver: Unread = UNREAD
    msgThroughputOut: Unread = UNREAD
    bytesOutCounter: Unread = UNREAD
    msgOutCounter: Unread = UNREAD
    chunkedMessageRate: Unread = UNREAD


class BulkSubscription(_Stats):
    consumers: list[BulkConsumer] | None = None
    type: Text | None = None
    msgBacklog: Int | None = None
    backlogSize: Int | None = None
    unackedMessages: Int | None = None
    msgInReplay: Int | None = None
    msgRateOut: Float | None = None
    messageAckRate: Float | None = None
    msgRateRedeliver: Float | None = None
    blockedSubscriptionOnUnackedMsgs: bool | None = None
    keySharedMode: Text | None = None
    allowOutOfOrderDelivery: bool | None = None
    drainingHashesCount: Int | None = None
    drainingHashesClearedTotal: Int | None = None
    drainingHashesUnackedMessages: Int | None = None
    activeConsumerName: Text | None = None
    isDurable: bool | None = None
    durable: bool | None = None
    lastConsumedTimestamp: Epoch | None = None
    lastAckedTimestamp: Epoch | None = None
    earliestMsgPublishTimeInBacklog: Epoch | None = None
    consumersAfterMarkDeletePosition: Any = None
    filterAcceptedMsgCount: Unread = UNREAD
    filterProcessedMsgCount: Unread = UNREAD
    filterRejectedMsgCount: Unread = UNREAD
    filterRescheduledMsgCount: Unread = UNREAD
    msgRateExpired: Unread = UNREAD
    msgThroughputOut: Unread = UNREAD
    numberOfEntriesSinceFirstNotAckedMessage: Unread = UNREAD
    totalNonContiguousDeletedMessagesRange: Unread = UNREAD


class BulkTopic(_Stats):
    """One topic's stats as a broker's bulk answer writes them."""

    publishers: list[BulkPublisher] | None = None
    subscriptions: dict[Text, BulkSubscription] | None = None
    producerCount: Int | None = None
    msgRateIn: Float | None = None
    msgRateOut: Float | None = None
    msgThroughputIn: Float | None = None
    msgThroughputOut: Float | None = None
    storageSize: Int | None = None
    backlogSize: Int | None = None
    averageMsgSize: Unread = UNREAD
    bytesInCount: Unread = UNREAD
    bytesOutCount: Unread = UNREAD
    filteredEntriesCount: Unread = UNREAD
    msgInCount: Unread = UNREAD
    msgOutCount: Unread = UNREAD
    pendingAddEntriesCount: Unread = UNREAD
    replication: Unread = UNREAD


Levels = dict[str, dict[str, dict[str, dict[str, BulkTopic]]]]
"""{namespace: {bundle: {"persistent"|"non-persistent": {topic: stats}}}}"""

_DECODER = msgspec.json.Decoder(Levels)
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class TypedBulk:
    """A broker-stats/topics answer read into Structs (see the module docstring)."""

    levels: Levels


def decode_broker_stats(body: bytes) -> Any:
    """The answer as `TypedBulk` when the typed reading is exact, else as `decode_json`
    reads it (its value or its ValueError)."""
    typed = typed_bulk(body)
    return typed if typed is not None else decode_json(body)


def typed_bulk(body: bytes) -> TypedBulk | None:
    """`body` read into Structs, or None when that would not read it as the tolerant path
    does (see the module docstring)."""
    text = body[len(_BOM) :] if body.startswith(_BOM) else body
    try:
        with collection_paused():
            levels = _DECODER.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    return TypedBulk(levels) if _colons(levels) == written_colons(text) else None


def _colons(levels: Levels) -> int:
    """The colons of the compact encoding of `levels`, one topic map encoded at a time."""
    total = 0
    for namespace, bundles in levels.items():
        total += 1 + namespace.count(":")
        for bundle, domains in bundles.items():
            total += 1 + bundle.count(":")
            for domain, topics in domains.items():
                total += 1 + domain.count(":") + msgspec.json.encode(topics).count(b":")
    return total


def is_typed(stats: Mapping[str, Any] | BulkTopic | None) -> bool:
    return type(stats) is BulkTopic
