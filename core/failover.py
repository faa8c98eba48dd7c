"""Failover subscriptions: which consumer the 4.0 broker makes active on each topic/partition.

Mirrors `AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer`: consumers sorted
by priority level then name (Java `String.compareTo`), the leading priority group, then
`partitionIndex % size` for partitions, or a 100-point murmur3 ring (PIP-392) for non-partitioned
topics and, with `activeConsumerFailoverConsistentHashing=true`, for partitions too.
"""

from __future__ import annotations

import bisect
import codecs
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.core.parts import charset_setting
from pulsar_lens.core.pulsarvalues import JVM_CHARSET as JVM_CHARSET

RING_REPLICAS = 100
"""`CONSUMER_CONSISTENT_HASH_REPLICAS`: ring points per consumer (fixed, not configurable)."""

PARTITION_SUFFIX = "-partition-"
_JAVA_INT_MAX = 2**31 - 1
_SIGNED_DIGITS = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, slots=True)
class FailoverConsumer:
    """A consumer of a Failover subscription as the broker sees it."""

    name: str
    priority_level: int = 0  # 0 is the highest priority


@dataclass(frozen=True, slots=True)
class FailoverRing:
    """The consistent-hash ring: ascending points and, per point, an index into the order."""

    points: tuple[int, ...]
    owners: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ModeComparison:
    """Active consumers per partition with modulo and with consistent hashing."""

    modulo: Mapping[str, FailoverConsumer]
    consistent: Mapping[str, FailoverConsumer]
    moved: tuple[str, ...]  # partitions whose active consumer differs between the modes


@dataclass(frozen=True, slots=True)
class ChurnComparison:
    """Partitions whose active consumer changes when the consumer set changes, per mode."""

    moved_modulo: tuple[str, ...]
    moved_consistent: tuple[str, ...]


def java_order_key(name: str) -> bytes:
    """A sort key equal to Java `String.compareTo` order (UTF-16 code units, then length)."""
    return name.encode("utf-16-be", errors="surrogatepass")


OTHER_CHARSET = {"utf-8": "US-ASCII", "ascii": "UTF-8"}
"""The charsets the analyses model (Python's names), each with the one to check against."""


def jvm_charset(given: str, setting: str = "") -> str:
    """The charset asked for, else `setting` (PULSAR_LENS_JVM_CHARSET), else UTF-8 (as Java
    18+ brokers and our local broker use), by Python's name; refused unless UTF-8 or US-ASCII.
    It reads no environment: an analysis's output depends on its params alone."""
    name = (given.strip() or setting.strip() or "UTF-8").strip()
    try:
        canonical = codecs.lookup(name).name.replace("_", "-")
    except LookupError:
        canonical = ""
    if canonical not in OTHER_CHARSET:
        raise ValueError(f"jvm_charset {name!r}: the model knows UTF-8 and US-ASCII")
    return canonical


def _charset_param(value: str) -> str:
    """A `JvmCharset` param as validated: an empty one takes the PULSAR_LENS_JVM_CHARSET
    setting of the process validating it (`core.parts.use_charset_setting`), so the charset
    is in the params, and the params are in the result's key (and go, resolved, to a plugin
    worker)."""
    return jvm_charset(value, charset_setting())


JvmCharset = Annotated[str, AfterValidator(_charset_param)]
"""A Params field for the broker JVM's charset; declare it with `validate_default=True`
(`jvm_charset: JvmCharset = Field("", validate_default=True)`), so that the default too
becomes the setting's charset, by name (`utf-8` or `ascii`)."""


def java_default_bytes(text: str, charset: str = JVM_CHARSET) -> bytes:
    """`String.getBytes()` in the JVM's default charset: what it cannot encode becomes '?'."""
    return text.encode(charset, errors="replace")


def order_consumers(consumers: Iterable[FailoverConsumer]) -> tuple[FailoverConsumer, ...]:
    """The broker's order: priority level ascending, then name; stable for equal keys."""
    return tuple(sorted(consumers, key=lambda c: (c.priority_level, java_order_key(c.name))))


def leading_group_size(ordered: Sequence[FailoverConsumer]) -> int:
    """How many consumers share the highest (numerically lowest) priority level."""
    if not ordered:
        return 0
    top = ordered[0].priority_level
    return next((i for i, c in enumerate(ordered) if c.priority_level != top), len(ordered))


def partition_index(topic: str) -> int:
    """`TopicName.getPartitionIndex`: N for a `...-partition-N` name, else -1.

    The suffix after the last "-partition-" must be a canonical non-negative Java int
    (no leading zeros or plus sign, at most 2**31-1); anything else yields -1.
    """
    if PARTITION_SUFFIX not in topic:
        return -1
    suffix = topic.rsplit(PARTITION_SUFFIX, 1)[1]
    # Java parses UTF-16 units: a digit outside the BMP is two non-digit surrogates there
    if not _SIGNED_DIGITS.fullmatch(suffix) or any(ord(ch) > 0xFFFF for ch in suffix):
        return -1
    if len(suffix) > len(str(_JAVA_INT_MAX)):  # not canonical, and int() refuses 4,300 digits
        return -1
    value = int(suffix)
    if value < 0 or value > _JAVA_INT_MAX or len(suffix) != len(str(value)):
        return -1
    return value


def partition_names(topic: str, partitions: int) -> tuple[str, ...]:
    """The partition topics of a partitioned topic, in index order."""
    return tuple(f"{topic}{PARTITION_SUFFIX}{i}" for i in range(partitions))


def build_ring(ordered: Sequence[FailoverConsumer], *, charset: str = JVM_CHARSET) -> FailoverRing:
    """Ring of `name + j` points (full 31-bit murmur3); a later index overwrites a collision."""
    ring: dict[int, int] = {}
    for index, consumer in enumerate(ordered):
        for j in range(RING_REPLICAS):
            ring[murmur3_31(java_default_bytes(f"{consumer.name}{j}", charset))] = index
    points = tuple(sorted(ring))
    return FailoverRing(points=points, owners=tuple(ring[p] for p in points))


def ring_owner(ring: FailoverRing, hash_value: int) -> int:
    """Index owning a hash: that of the first point >= the hash, wrapping to the first point."""
    position = bisect.bisect_left(ring.points, hash_value)
    return ring.owners[position % len(ring.points)]


def ring_index(ring: FailoverRing, topic: str) -> int:
    """Index owning a topic: the ring position is murmur3 of the full topic name (UTF-8)."""
    return ring_owner(ring, murmur3_31(topic.encode("utf-8")))


def active_consumer_picker(
    consumers: Iterable[FailoverConsumer],
    *,
    consistent_hashing: bool = False,
    charset: str = JVM_CHARSET,
) -> Callable[[str], FailoverConsumer | None]:
    """A function topic -> active consumer for one consumer set; sorts and rings only once."""
    ordered = order_consumers(consumers)
    size = leading_group_size(ordered)
    rings: list[FailoverRing] = []

    def pick(topic: str) -> FailoverConsumer | None:
        if not ordered:
            return None
        index = partition_index(topic)
        if index >= 0 and not consistent_hashing:
            return ordered[index % size]
        if not rings:
            rings.append(build_ring(ordered[:size], charset=charset))
        return ordered[ring_index(rings[0], topic)]

    return pick


def select_active_consumer(
    topic: str,
    consumers: Iterable[FailoverConsumer],
    *,
    consistent_hashing: bool = False,
    charset: str = JVM_CHARSET,
) -> FailoverConsumer | None:
    """The active consumer of one topic or partition; None when nobody is connected.

    `topic` is the full name (`persistent://tenant/ns/name[-partition-N]`): the ring hashes it.
    `charset` is the broker JVM's default charset (see JVM_CHARSET).
    """
    pick = active_consumer_picker(consumers, consistent_hashing=consistent_hashing, charset=charset)
    return pick(topic)


def compute_partitioned(
    topic: str,
    partitions: int,
    consumers: Iterable[FailoverConsumer],
    *,
    consistent_hashing: bool = False,
    charset: str = JVM_CHARSET,
) -> dict[str, FailoverConsumer]:
    """Active consumer per partition of a partitioned topic (empty when no consumer)."""
    return compute_topics(
        {topic: partitions}, consumers, consistent_hashing=consistent_hashing, charset=charset
    )


def compute_topics(
    topics: Mapping[str, int],
    consumers: Iterable[FailoverConsumer],
    *,
    consistent_hashing: bool = False,
    charset: str = JVM_CHARSET,
) -> dict[str, FailoverConsumer]:
    """A multi-topic subscription: every topic and partition is decided on its own.

    `topics` maps a full topic name to its partition count, 0 for a non-partitioned topic.
    """
    pick = active_consumer_picker(consumers, consistent_hashing=consistent_hashing, charset=charset)
    result: dict[str, FailoverConsumer] = {}
    for topic, partitions in topics.items():
        for name in partition_names(topic, partitions) if partitions > 0 else (topic,):
            chosen = pick(name)
            if chosen is not None:
                result[name] = chosen
    return result


def compare_modes(
    topic: str, partitions: int, consumers: Iterable[FailoverConsumer]
) -> ModeComparison:
    """What switching `activeConsumerFailoverConsistentHashing` on would move."""
    group = tuple(consumers)
    modulo = compute_partitioned(topic, partitions, group)
    consistent = compute_partitioned(topic, partitions, group, consistent_hashing=True)
    moved = tuple(p for p in modulo if modulo[p].name != consistent[p].name)
    return ModeComparison(modulo=modulo, consistent=consistent, moved=moved)


def compare_churn(
    topic: str,
    partitions: int,
    before: Iterable[FailoverConsumer],
    after: Iterable[FailoverConsumer],
) -> ChurnComparison:
    """Partitions that change active consumer when `before` becomes `after`, in each mode."""
    old, new = tuple(before), tuple(after)

    def moved(consistent: bool) -> tuple[str, ...]:
        a = compute_partitioned(topic, partitions, old, consistent_hashing=consistent)
        b = compute_partitioned(topic, partitions, new, consistent_hashing=consistent)
        names = partition_names(topic, partitions)
        return tuple(n for n in names if _name(a.get(n)) != _name(b.get(n)))

    return ChurnComparison(moved_modulo=moved(False), moved_consistent=moved(True))


def _name(consumer: FailoverConsumer | None) -> str | None:
    return None if consumer is None else consumer.name
