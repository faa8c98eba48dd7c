"""The failover active consumer (`core.failover`) of many topics over many consumer sets at once.

`active_consumer_picker` decides one topic for one set: it sorts the set and builds its ring of
100 murmur3 points per consumer (PIP-392) in Python, a hash call per point. A cluster-wide
analysis asks it for every Failover partition, each subscription with its own consumers: tens of
thousands of sets and millions of ring points. Here every distinct consumer name is hashed once,
for all its points together (`murmur3_31_array` over Arrow buffers), every ring is one segment
of one sorted array, and each topic finds its point by a single `searchsorted`; the answers are
those of the picker (`tests/core/test_failover_sets.py` compares them). As there, all consumers
are taken as one priority level: the stats show none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core.failover import (
    RING_REPLICAS,
    java_default_bytes,
    java_order_key,
    partition_index,
)
from pulsar_lens.core.hashing import murmur3_31_array
from pulsar_lens.core.pulsarvalues import JVM_CHARSET

Ints = npt.NDArray[np.int64]
_SUFFIXES = pa.array([str(j).encode() for j in range(RING_REPLICAS)], pa.binary())


@dataclass(frozen=True)
class ConsumerSets:
    """Distinct consumer sets, each in the broker's order: set s is
    `ordered[offsets[s]:offsets[s + 1]]`."""

    ordered: list[str]
    offsets: Ints

    @property
    def sizes(self) -> Ints:
        return np.diff(self.offsets)


def consumer_sets(sets: Iterable[Iterable[str]]) -> ConsumerSets:
    """The sets (each without duplicates) in the order `core.failover.order_consumers` gives one
    priority level: Java `String.compareTo` of the names."""
    ordered: list[str] = []
    offsets = [0]
    for names in sets:
        ordered.extend(sorted(set(names), key=java_order_key))
        offsets.append(len(ordered))
    return ConsumerSets(ordered, np.asarray(offsets, np.int64))


def active_positions(
    sets: ConsumerSets,
    set_of: Sequence[int] | Ints,
    topics: Sequence[str],
    *,
    consistent_hashing: bool = False,
    charset: str = JVM_CHARSET,
) -> Ints:
    """For each topic i with the consumers of set `set_of[i]` (-1: none), the position in
    `sets.ordered` of its active consumer, -1 when it has none: what `active_consumer_picker`
    returns, `partitionIndex % n` for a partition unless `consistent_hashing`, else the ring."""
    modulo, ring = rule_positions(sets, set_of, topics, charset=charset)
    return ring if consistent_hashing else modulo


def rule_positions(
    sets: ConsumerSets,
    set_of: Sequence[int] | Ints,
    topics: Sequence[str],
    *,
    charset: str = JVM_CHARSET,
    indexes: Sequence[int] | None = None,
) -> tuple[Ints, Ints]:
    """`active_positions` without and with consistent hashing, the rings built once: the
    modulo rule takes the ring's choice for a topic that is not a partition. `indexes`: each
    topic's `partition_index`, when the caller has them already."""
    chosen = np.asarray(set_of, np.int64)
    ring = np.full(len(chosen), -1, np.int64)
    has = chosen >= 0
    if not has.any():
        return ring, ring.copy()
    rows = np.flatnonzero(has)
    named = [topics[i] for i in rows.tolist()]
    ring[rows] = ring_positions(sets, chosen[rows], named, charset=charset)
    given = indexes if indexes is not None else [partition_index(t) for t in topics]
    index = np.asarray(given, np.int64)
    modulo = ring.copy()
    partition = has & (index >= 0)
    picked = chosen[partition]
    modulo[partition] = sets.offsets[picked] + index[partition] % sets.sizes[picked]
    return modulo, ring


def ring_positions(
    sets: ConsumerSets, set_of: Ints, topics: Sequence[str], *, charset: str = JVM_CHARSET
) -> Ints:
    """Position in `sets.ordered` of each topic's owner on its set's ring (every `set_of` >= 0):
    the first point at or above murmur3 of the full topic name, wrapping to the first."""
    used = np.unique(set_of)
    points, owners = _rings(sets, used, charset)
    ring_of = np.searchsorted(used, set_of)
    hashes = murmur3_31_array(pa.array(topics, pa.string())).astype(np.int64)
    position = np.searchsorted(points, (ring_of << 32) | hashes, side="left")
    start = np.searchsorted(points, ring_of << 32, side="left")
    end = np.searchsorted(points, (ring_of + 1) << 32, side="left")
    position = np.where(position == end, start, position)
    return sets.offsets[set_of] + owners[position]


def _rings(sets: ConsumerSets, used: Ints, charset: str) -> tuple[Ints, Ints]:
    """The rings of sets `used`, one sorted array: `(ring << 32) | point` and the owner of each
    point (its index in the set's order; of two consumers on one point, the later one)."""
    sizes = sets.sizes[used]
    members = np.repeat(sets.offsets[used], sizes) + _ranks(sizes)
    names = [sets.ordered[i] for i in members.tolist()]
    distinct, name_of = np.unique(np.array(names, dtype=object), return_inverse=True)
    hashes = point_hashes(distinct.tolist(), charset=charset)
    ring = np.repeat(np.repeat(np.arange(len(used), dtype=np.int64), sizes), RING_REPLICAS)
    keys = (ring << 32) | hashes[name_of].ravel().astype(np.int64)
    owners = np.repeat(_ranks(sizes), RING_REPLICAS)
    order = np.argsort(keys, kind="stable")  # a point's later owner stays last
    keys, owners = keys[order], owners[order]
    last = np.append(keys[1:] != keys[:-1], True)
    return keys[last], owners[last]


def point_hashes(names: Sequence[str], *, charset: str = JVM_CHARSET) -> npt.NDArray[np.uint32]:
    """`murmur3_31` of `name + j` in the JVM's charset for j in 0..99, one row per name: the
    ring points of `core.failover.build_ring`."""
    encoded = pa.array([java_default_bytes(n, charset) for n in names], pa.binary())
    count = len(encoded)
    keys = pc.binary_join_element_wise(
        encoded.take(np.repeat(np.arange(count), RING_REPLICAS)),
        _SUFFIXES.take(np.tile(np.arange(RING_REPLICAS), count)),
        b"",
    )
    return murmur3_31_array(keys).reshape(count, RING_REPLICAS)


def _ranks(sizes: Ints) -> Ints:
    """0..n-1 for each n of `sizes`, end to end."""
    total = int(sizes.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
