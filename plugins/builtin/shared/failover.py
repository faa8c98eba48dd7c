"""How a failover group is named and scored: `failover-assignment` reads the newest snapshot
with these, `failover-history` the whole store, and their labels and imbalances must agree for
the two pages (and their `/metrics`) to name the same group the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from pulsar_lens.api import partition_index


def parent_of(topic: str) -> str:
    """The partitioned topic a `-partition-N` topic belongs to (the topic itself otherwise),
    by name alone: what groups partitions when the store has no `partitioned` column."""
    return parent_at(topic, partition_index(topic))


def parent_at(topic: str, index: int) -> str:
    """`parent_of(topic)` given its `partition_index` already."""
    return topic.rsplit("-partition-", 1)[0] if index >= 0 else topic


def group_label(subscription: str, keys: Sequence[tuple[str, str]]) -> str:
    """A group's name on both pages and in `/metrics` labels: the subscription at its topic."""
    parents = sorted({parent_of(t) for t, _ in keys})
    if len(parents) == 1:
        return f"{subscription} @ {parents[0]}"
    return f"{subscription} @ {len(parents)} topics ({parents[0]}, ...)"


def imbalance(counts: Sequence[int], partitions: int) -> float:
    """The largest partition count over the fair count partitions / consumers."""
    if not counts or not partitions:
        return 0.0
    return max(counts) * len(counts) / partitions


def overload(counts: Sequence[int], partitions: int) -> float:
    """The largest partition count over the largest of the most even spread, ceil(partitions /
    consumers): 1 is the best any rule can do. Unlike `imbalance`, a group with fewer
    partitions than consumers (one topic, three consumers for failover) reads 1, not 3."""
    if not counts or not partitions:
        return 0.0
    return max(counts) / -(-partitions // len(counts))
