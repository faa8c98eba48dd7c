"""The assembly as it was before it filed, named and placed topics by column: the record by
record `Filed`, `_topic_names`, `_listed`, `_placements` and `_rows_here` (`reference_placing`),
kept to compare with (tests/collectors/test_assemble_columns.py). The rest is the assembly's
own (`build_snapshot`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pulsar_lens.collectors import assemble
from pulsar_lens.collectors.assemble import (
    Placed,
    PollAnswers,
    _ownership,
    build_snapshot,
    busy_topics,
    rows_made_here,
)
from pulsar_lens.collectors.bulkparts import BrokerPart
from pulsar_lens.collectors.namespaces import bundles_of_full_names
from pulsar_lens.collectors.notes import refuse, within
from pulsar_lens.collectors.topics import iter_partitions, topic_refusal
from pulsar_lens.core.model import BundleRecord, Snapshot
from pulsar_lens.core.tablerows import table_columns
from pulsar_lens.core.topicname import TopicName, parse_topic_name


@dataclass(frozen=True, slots=True)
class Filed:
    """Where the bulk answers filed a topic: the first broker in id order that reports it."""

    broker: str
    bundle: str | None
    namespace: str


def filed_topics(parts: Mapping[str, BrokerPart]) -> dict[str, Filed]:
    found: dict[str, Filed] = {}
    for broker, part in parts.items():
        columns = table_columns(part.index, ("topic", "bundle", "namespace"))
        for topic, bundle, namespace in zip(*columns, strict=True):
            if topic not in found:
                found[topic] = Filed(broker, bundle, namespace)
    return found


@dataclass(frozen=True)
class SnapshotNames:
    """The snapshot's topics in name order, each one's namespace, and the parsed names of
    those no broker's part files (only their rows are made here; at a million topics,
    parsing every name again cost more than the rest of the assembly)."""

    topics: list[str]
    namespaces: list[str]
    parsed: dict[str, TopicName]


def _topic_names(
    answers: PollAnswers, namespaces: list[str], filed: Mapping[str, Filed]
) -> SnapshotNames:
    """The topics of the polled namespaces: those the brokers report (checked as they were
    parsed) and those the namespaces list, refused when no topic of that namespace."""
    wanted = set(namespaces)
    checked: set[str] = set(filed)  # the parsers checked them
    for listing in answers.listings.values():
        checked.update(_listed(listing.namespace, listing.topics or (), filed))
    counted = {
        p for parent, n in answers.partition_counts.items() for p in iter_partitions(parent, n)
    }
    parsed: dict[str, TopicName] = {}
    for name in (checked | counted) - filed.keys():
        why = None if name in checked else topic_refusal(name)
        if why is not None:  # a partition of a parent refused on its own
            refuse("topic", f"{why}; left out", name)
            continue
        topic = parse_topic_name(name)  # a short name ("orders") stands for its full one
        if topic.namespace in wanted and topic.topic not in filed:
            parsed[topic.topic] = topic
    found = SnapshotNames([], [], parsed)
    for name in sorted(filed.keys() | parsed.keys()):
        entry = filed.get(name)
        namespace = entry.namespace if entry is not None else parsed[name].namespace
        if namespace in wanted:  # a broker also reports namespaces left unpolled
            found.topics.append(name)
            found.namespaces.append(namespace)
    return found


def _listed(namespace: str, topics: Sequence[str], filed: Mapping[str, Filed]) -> Iterator[str]:
    """The topics a namespace listing named, but those it cannot hold (a name a broker's
    answer filed was checked and parsed there already: only its namespace is compared)."""
    with within(namespace):
        for name in topics:
            known = filed.get(name)
            if known is not None and known.namespace == namespace:
                yield name
                continue
            why = topic_refusal(name)
            if why is None and parse_topic_name(name).namespace != namespace:
                why = "is listed in another namespace than its name says"
            if why is None:
                yield name
            else:
                refuse("topic", f"{why}; left out", name)


def _placements(
    names: SnapshotNames,
    filed: Mapping[str, Filed],
    answers: PollAnswers,
    bundles: Mapping[str, Mapping[str, BundleRecord]],
) -> list[tuple[str | None, str | None]]:
    """Each topic's bundle and owner broker; each namespace's topics placed in one search."""
    by_namespace: dict[str, list[int]] = defaultdict(list)
    for i, namespace in enumerate(names.namespaces):
        by_namespace[namespace].append(i)
    placed: list[str | None] = [None] * len(names.topics)
    for namespace, at in by_namespace.items():
        listing = answers.listings.get(namespace)
        if listing is not None and listing.boundaries:
            found = bundles_of_full_names([names.topics[i] for i in at], listing.boundaries)
            for i, bundle in zip(at, found, strict=True):
                placed[i] = bundle
    result = []
    for name, namespace, bundle in zip(names.topics, names.namespaces, placed, strict=True):
        entry = filed.get(name)
        if bundle is None and entry is not None:
            bundle = entry.bundle
        # the bulk answer can be a stats period old (e.g. from before a split); the
        # boundaries were read in this poll, so they win; ownership is read live, the bulk
        # answer's broker only stands in when it is unknown
        record = bundles.get(namespace, {}).get(bundle) if bundle is not None else None
        owner = record.owner_broker if record is not None else None
        if owner is None and entry is not None:
            owner = entry.broker
        result.append((bundle, owner))
    return result


def reference_snapshot(answers: PollAnswers) -> Snapshot:
    """`build_snapshot` with the topics named and placed record by record."""
    return build_snapshot(answers, reference_placing)


def reference_placing(answers: PollAnswers, parts: Mapping[str, BrokerPart]) -> Placed:
    by_column = assemble.filed_topics(parts)  # what the bundles read of it did not change
    namespaces = assemble.wanted_namespaces(answers, by_column)
    bundles = assemble._bundles(answers, namespaces, _ownership(answers, namespaces), by_column)
    filed = filed_topics(parts)
    names = _topic_names(answers, namespaces, filed)
    detailed = {t: s for t, s in answers.topic_stats.items() if s}
    here = _rows_here(answers, names, parts, filed, detailed)
    placed = _placements(names, filed, answers, bundles)
    columns = (
        pa.array([p[0] for p in placed], pa.string()),
        pa.array([p[1] for p in placed], pa.string()),
    )
    return Placed(pa.array(names.topics, pa.string()), columns, here, bundles, detailed)


def _rows_here(
    answers: PollAnswers,
    names: SnapshotNames,
    parts: Mapping[str, BrokerPart],
    filed: Mapping[str, Filed],
    detailed: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """`assemble._rows_here`, each topic's part found in the `Filed` records."""
    busy = busy_topics(names.parsed, parts, detailed)
    found = [
        (name, parts[entry.broker] if (entry := filed.get(name)) is not None else None)
        for name in names.topics
        if name in busy
    ]
    return rows_made_here(found, names.parsed, detailed)
