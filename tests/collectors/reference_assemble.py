"""The assembly as it was before it filed, named and placed topics by column: the record by
record `Filed`, `_topic_names`, `_listed`, `_placements` and `_rows_here`, kept to compare
with (tests/collectors/test_assemble_columns.py). The rest is the assembly's own."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.assemble import (
    PollAnswers,
    _brokers,
    _listed_bundles,
    _ownership,
    broker_parts,
)
from pulsar_lens.collectors.bulkparts import PART_TABLES, BrokerPart
from pulsar_lens.collectors.fields import check_keys, field_warnings, reading
from pulsar_lens.collectors.namespaces import bundles_of_full_names, parse_bundle_key
from pulsar_lens.collectors.notes import FIELD, Notes, refuse, within
from pulsar_lens.collectors.partmerge import (
    merge_noted,
    part_topics,
    rows_table,
    topic_table,
    with_broker_totals,
    with_topic_totals,
)
from pulsar_lens.collectors.topics import iter_partitions, topic_refusal
from pulsar_lens.collectors.typedrecords import subscriptions_of, topic_of
from pulsar_lens.core.model import BundleRecord, EndpointError, Snapshot
from pulsar_lens.core.tablerows import TableRows, table_columns
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


def wanted_namespaces(answers: PollAnswers, filed: Mapping[str, Filed]) -> list[str]:
    """The polled namespaces, plus those only the brokers' bulk answers revealed (when the
    tenant listing failed)."""
    names = set(answers.namespaces)
    if not answers.namespaces_complete:
        names.update(f.namespace for f in filed.values())
    return sorted(names)


def _bundles(
    answers: PollAnswers,
    namespaces: list[str],
    owners: Mapping[str, Mapping[str, str]],
    filed: Mapping[str, Filed],
) -> dict[str, dict[str, BundleRecord]]:
    """{namespace: {bundle: record}}; when a namespace's bundle listing failed, the bundles
    that brokers own or report topics in stand in for it."""
    result: dict[str, dict[str, BundleRecord]] = {}
    listings = {ns: _listed_bundles(answers, ns) for ns in namespaces}
    reported: dict[str, set[str]] = defaultdict(set)
    if not all(listings.values()):
        for f in filed.values():
            if f.bundle:
                reported[f.namespace].add(f.bundle)
    for ns, listed in listings.items():
        if not listed:
            for key in set(owners.get(ns, {})) | reported[ns]:
                parsed = parse_bundle_key(f"{ns}/{key}")
                if parsed:
                    listed[key] = BundleRecord(ns, ns.split("/")[0], key, parsed[2], parsed[3])
        result[ns] = {
            name: replace(rec, owner_broker=owners.get(ns, {}).get(name))
            for name, rec in sorted(listed.items(), key=lambda kv: kv[1].lower)
        }
    return result


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
    """The Snapshot these answers describe; topics with per-topic stats use them for their
    subscriptions and consumers, the others the brokers' bulk answer.

    A field no column can hold becomes null, and the snapshot's errors say which; so do
    the items of the answers that were refused or cut, counted (`answers.notes`)."""
    with collection_paused():  # millions of records, no garbage
        parts = broker_parts(answers)
        notes = Notes()  # what parsing the bulk answers noted came first, then the rest
        for part in parts.values():
            notes.merge(part.notes)
        notes.merge(answers.notes)  # a copy: built twice from the same answers, counted once
        with field_warnings(notes) as found:
            snapshot = _build(answers, parts)
    lines = notes.lines()
    if not found and not lines:
        return snapshot
    warnings = [EndpointError(action, None, text) for action, text in lines]
    warnings += [EndpointError(FIELD, None, text) for text in found]
    return replace(snapshot, errors=(*snapshot.errors, *warnings))


def _build(answers: PollAnswers, parts: Mapping[str, BrokerPart]) -> Snapshot:
    filed = filed_topics(parts)
    namespaces = wanted_namespaces(answers, filed)
    bundles = _bundles(answers, namespaces, _ownership(answers, namespaces), filed)
    names = _topic_names(answers, namespaces, filed)
    detailed = {t: s for t, s in answers.topic_stats.items() if s}
    here = _rows_here(answers, names, parts, filed, detailed)
    placed = _placements(names, filed, answers, bundles)
    columns = (
        pa.array([p[0] for p in placed], pa.string()),
        pa.array([p[1] for p in placed], pa.string()),
    )
    ordered = pa.array(names.topics, pa.string())
    kept = part_topics(parts, ordered, detailed)
    topics = topic_table(parts, kept, here["topics"], ordered, columns)
    rows = {
        name: rows_table(name, parts, kept, here[name], ordered)
        for name in ("subscriptions", "consumers", "draining_hashes")
    }
    with reading("brokers"):
        brokers = _brokers(answers)
    return Snapshot(
        cluster=answers.cluster,
        collected_at=answers.collected_at,
        brokers=tuple(with_broker_totals(brokers, topics, rows["consumers"])),
        bundles=tuple(with_topic_totals(bundles, topics)),
        topics=TableRows("topics", topics),
        subscriptions=TableRows("subscriptions", rows["subscriptions"]),
        consumers=TableRows("consumers", rows["consumers"]),
        draining_hashes=TableRows("draining_hashes", rows["draining_hashes"]),
        errors=tuple(answers.errors),
        durations=dict(answers.durations),
        requests=answers.requests,
    )


def _rows_here(
    answers: PollAnswers,
    names: SnapshotNames,
    parts: Mapping[str, BrokerPart],
    filed: Mapping[str, Filed],
    detailed: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """The rows no broker's part holds: topics no bulk answer reports (listed, or partitions
    counted), and the subscriptions of topics whose per-topic stats were read. What the
    parts' rows noted is counted here too, topic by topic, for the rows kept."""
    rows: dict[str, list[Any]] = {name: [] for name in PART_TABLES}
    # the rest are a part's rows that noted nothing: nothing to do here (most of a poll)
    busy = set(names.parsed)  # not filed: their topic rows are made here
    busy.update(detailed)
    for part in parts.values():
        busy.update(part.noted)
    for name in names.topics:
        if name not in busy:
            continue
        stats = detailed.get(name)
        entry = filed.get(name)
        topic_noted, subs_noted = (
            parts[entry.broker].noted.get(name, (None, None)) if entry else (None, None)
        )
        if topic_noted is not None:
            merge_noted(topic_noted)
        if stats is None:
            if subs_noted is not None:
                merge_noted(subs_noted)
            if entry is not None:
                continue
        with reading(name):
            if entry is None:
                topic = names.parsed[name]
                rows["topics"].append(topic_of(topic, None, bundle=None, owner=None))
            if stats is not None:
                check_keys(stats, "topic stats")
                found = subscriptions_of(name, stats)
                rows["subscriptions"].extend(found.subscriptions)
                rows["consumers"].extend(found.consumers)
                rows["draining_hashes"].extend(found.draining_hashes)
    return rows
