"""Turn the raw answers of one poll into a `Snapshot` (pure: no network).

Kept apart from `poll()` so recorded answers can be assembled in tests exactly as live ones.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.brokers import (
    LoadManagerCounters,
    parse_broker,
    parse_lb_counters,
    parse_owned_bundles,
)
from pulsar_lens.collectors.bulkparts import PART_TABLES, BrokerPart, part_of_entries
from pulsar_lens.collectors.fields import check_keys, field_warnings, json_kind, reading
from pulsar_lens.collectors.namespaces import (
    NamespaceListing,
    bundles_of_full_names,
    owned_bundles_by_namespace,
    parse_boundaries,
    parse_bundle_key,
    parse_bundles,
)
from pulsar_lens.collectors.notes import FIELD, Notes, refuse, within
from pulsar_lens.collectors.partmerge import (
    first_places,
    merge_noted,
    pair_positions,
    part_topics,
    positions_among,
    rows_table,
    topic_table,
    with_broker_totals,
    with_topic_totals,
)
from pulsar_lens.collectors.topics import TopicStats, iter_partitions, topic_refusal
from pulsar_lens.collectors.typedrecords import subscriptions_of, topic_of
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    EndpointError,
    Snapshot,
)
from pulsar_lens.core.tablerows import TableRows
from pulsar_lens.core.topicname import TopicName, parse_topic_name


@dataclass
class PollAnswers:
    """Everything one poll was told. A value of None means that call failed (see errors)."""

    cluster: str
    collected_at: dt.datetime
    broker_ids: tuple[str, ...] = ()
    leader: str | None = None
    web_urls: dict[str, str] = field(default_factory=dict)
    load_reports: dict[str, Any] = field(default_factory=dict)
    lb_metrics: dict[str, Any] = field(default_factory=dict)  # broker -> broker-stats/metrics
    versions: dict[str, str | None] = field(default_factory=dict)
    owned: dict[str, Any] = field(default_factory=dict)  # broker -> ownedNamespaces answer
    bulk: dict[str, list[TopicStats] | None] = field(default_factory=dict)  # parsed here
    parts: dict[str, BrokerPart | None] = field(default_factory=dict)  # built in a worker
    namespaces: tuple[str, ...] = ()
    namespaces_complete: bool = True  # False when a tenant or namespace listing failed
    listings: dict[str, NamespaceListing] = field(default_factory=dict)
    topic_stats: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    errors: list[EndpointError] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    notes: Notes = field(default_factory=Notes)  # what the parsers refused or cut so far

    @property
    def polled(self) -> frozenset[str] | None:
        """The namespaces a broker part keeps, or None for all (when a listing failed, the
        bulk answers name namespaces the poll did not list)."""
        return frozenset(self.namespaces) if self.namespaces_complete else None


def bulk_by_topic(answers: PollAnswers) -> dict[str, TopicStats]:
    """One bulk entry per topic of the parsed answers (`answers.bulk`); if two brokers report
    a topic (mid-transfer), the first broker in id order wins."""
    found: dict[str, TopicStats] = {}
    for broker in sorted(answers.bulk):
        for entry in answers.bulk[broker] or ():
            found.setdefault(entry.topic, entry)
    return found


@dataclass(frozen=True)
class Filed:
    """Where the bulk answers filed each topic, one row per topic (`table`: topic,
    namespace, bundle, broker: its number in `brokers`): the first broker in id order that
    reports it. Column-wise: a poll files every topic, and a record per topic cost a tenth
    of a second at 100,000 topics."""

    table: pa.Table
    brokers: tuple[str, ...]
    first: np.ndarray
    """Over the parts' index topics, one after another: where each one's name is first."""

    def rows(self, names: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Each name's row, -1 for a name no broker filed."""
        return positions_among(names, self.table.column("topic"))


def broker_parts(answers: PollAnswers) -> dict[str, BrokerPart]:
    """The part of each broker whose bulk answer was read, by broker id: built in a worker
    (`answers.parts`), or here from the entries parsed in this process (`answers.bulk`)."""
    parts = {b: p for b, p in answers.parts.items() if p is not None}
    for broker, entries in answers.bulk.items():
        if entries is not None and broker not in parts:
            parts[broker] = part_of_entries(entries, broker, answers.polled)
    return dict(sorted(parts.items()))


def filed_topics(parts: Mapping[str, BrokerPart]) -> Filed:
    pieces = [
        pa.table(
            {
                "topic": part.index.column("topic"),
                "namespace": part.index.column("namespace"),
                "bundle": part.index.column("bundle"),
                "broker": np.full(part.index.num_rows, number, dtype=np.int32),
            },
            schema=FILED_SCHEMA,
        )
        for number, part in enumerate(parts.values())
    ]
    every = pa.concat_tables(pieces) if pieces else FILED_SCHEMA.empty_table()
    topics = every.column("topic")
    first = first_places(topics)
    mine = first == np.arange(len(first))
    return Filed(every.filter(mine).combine_chunks(), tuple(parts), first)


def part_places(filed: Filed, names: SnapshotNames) -> tuple[np.ndarray, np.ndarray]:
    """(`Filed.first`, each part index topic's place among the snapshot's names, -1: not
    one of them), from what the filing and the naming found: no name is looked up again."""
    mine = filed.first == np.arange(len(filed.first))
    filed_row = (np.cumsum(mine) - 1)[filed.first]  # its first place's row in `filed.table`
    place_of_row = np.full(filed.table.num_rows, -1, dtype=np.int64)
    named = np.flatnonzero(names.filed_at >= 0)
    place_of_row[names.filed_at[named]] = named
    return filed.first, place_of_row[filed_row]


FILED_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("namespace", pa.string()),
        pa.field("bundle", pa.string()),
        pa.field("broker", pa.int32()),
    ]
)


def wanted_namespaces(answers: PollAnswers, filed: Filed) -> list[str]:
    """The polled namespaces, plus those only the brokers' bulk answers revealed (when the
    tenant listing failed)."""
    names = set(answers.namespaces)
    if not answers.namespaces_complete:
        names.update(filed.table.column("namespace").unique().to_pylist())
    return sorted(names)


def _ownership(answers: PollAnswers, namespaces: list[str]) -> dict[str, dict[str, str]]:
    owners: dict[str, str] = {}
    for broker in sorted(answers.owned):
        payload = answers.owned[broker]
        if payload is not None:
            for key in parse_owned_bundles(payload):
                owners.setdefault(key, broker)
    return owned_bundles_by_namespace(owners, namespaces)


def _bundles(
    answers: PollAnswers,
    namespaces: list[str],
    owners: Mapping[str, Mapping[str, str]],
    filed: Filed,
) -> dict[str, dict[str, BundleRecord]]:
    """{namespace: {bundle: record}}; when a namespace's bundle listing failed, the bundles
    that brokers own or report topics in stand in for it."""
    result: dict[str, dict[str, BundleRecord]] = {}
    listings = {ns: _listed_bundles(answers, ns) for ns in namespaces}
    reported: dict[str, set[str]] = defaultdict(set)
    if not all(listings.values()):
        pairs = filed.table.group_by(["namespace", "bundle"], use_threads=False).aggregate([])
        for namespace, bundle in zip(
            *(pairs.column(n).to_pylist() for n in ("namespace", "bundle")), strict=True
        ):
            if bundle:
                reported[namespace].add(bundle)
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


def _listed_bundles(answers: PollAnswers, ns: str) -> dict[str, BundleRecord]:
    listing = answers.listings.get(ns)
    return {b.bundle: b for b in (listing.bundles if listing and listing.bundles else ())}


@dataclass(frozen=True)
class SnapshotNames:
    """The snapshot's topics in name order, each one's namespace and its row in `Filed`
    (-1: no broker filed it), and the parsed names of those no broker's part files (only
    their rows are made here; at a million topics, parsing every name again cost more than
    the rest of the assembly)."""

    topics: pa.Array
    namespaces: pa.Array
    filed_at: np.ndarray
    parsed: dict[str, TopicName]


def _topic_names(answers: PollAnswers, namespaces: list[str], filed: Filed) -> SnapshotNames:
    """The topics of the polled namespaces: those the brokers report (checked as they were
    parsed) and those the namespaces list, refused when no topic of that namespace."""
    wanted = set(namespaces)
    unfiled = _listed([listing for listing in answers.listings.values() if listing.topics], filed)
    counted = [
        p for parent, n in answers.partition_counts.items() for p in iter_partitions(parent, n)
    ]
    candidates = unfiled | set(_unfiled(counted, filed))
    parsed: dict[str, TopicName] = {}
    for name in candidates:
        why = None if name in unfiled else topic_refusal(name)
        if why is not None:  # a partition of a parent refused on its own
            refuse("topic", f"{why}; left out", name)
            continue
        topic = parse_topic_name(name)  # a short name ("orders") stands for its full one
        if topic.namespace in wanted:
            parsed[topic.topic] = topic
    for name in set(parsed) - set(_unfiled(list(parsed), filed)):
        del parsed[name]  # a short name whose full one a broker filed
    whole = filed.table
    polled = pc.is_in(whole.column("namespace"), value_set=pa.array(sorted(wanted), pa.string()))
    rows = np.flatnonzero(polled.to_numpy(zero_copy_only=False))
    extra = sorted(parsed)
    topics = pa.concat_arrays(
        [whole.column("topic").take(rows).combine_chunks(), pa.array(extra, pa.string())]
    )
    spaces = pa.concat_arrays(
        [
            whole.column("namespace").take(rows).combine_chunks(),
            pa.array([parsed[n].namespace for n in extra], pa.string()),
        ]
    )
    at = np.concatenate([rows, np.full(len(extra), -1, dtype=np.int64)])
    order = pc.sort_indices(topics).to_numpy()
    return SnapshotNames(topics.take(order), spaces.take(order), at[order], parsed)


def _unfiled(names: Sequence[str], filed: Filed) -> list[str]:
    """The `names` no broker filed."""
    if not names:
        return []
    rows = filed.rows(_texts(names))
    return [name for name, row in zip(names, rows.tolist(), strict=True) if row < 0]


def _texts(names: Sequence[str]) -> pa.Array:
    """`names` as Arrow text, a name that is not valid text (a lone surrogate: bytes that
    were not UTF-8) as a missing value, which matches nothing."""
    try:
        return pa.array(names, pa.string())
    except (UnicodeEncodeError, pa.ArrowException):
        return pa.array([n if _encodes(n) else None for n in names], pa.string())


def _encodes(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _listed(listings: Sequence[NamespaceListing], filed: Filed) -> set[str]:
    """The topics the namespace listings named that no broker filed, but those a listing
    cannot hold. A name a broker's answer filed was checked and parsed there already: only
    its namespace is compared (every listing's names looked up at once)."""
    names = [name for listing in listings for name in listing.topics or ()]
    rows = filed.rows(_texts(names))
    known = rows >= 0
    same = np.zeros(len(names), dtype=bool)
    if known.any():
        counts = [len(listing.topics or ()) for listing in listings]
        spaces = pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(len(listings), dtype=np.int32), counts)[known]),
            pa.array([listing.namespace for listing in listings], pa.string()),
        ).cast(pa.string())
        theirs = filed.table.column("namespace").take(pa.array(rows[known]))
        same[known] = pc.equal(theirs, spaces).to_numpy(zero_copy_only=False)
    found: set[str] = set()
    start = 0
    for listing in listings:
        end = start + len(listing.topics or ())
        namespace = listing.namespace
        with within(namespace):
            for i in (start + np.flatnonzero(~same[start:end])).tolist():
                name = names[i]
                why = topic_refusal(name)
                if why is None and parse_topic_name(name).namespace != namespace:
                    why = "is listed in another namespace than its name says"
                if why is not None:
                    refuse("topic", f"{why}; left out", name)
                elif not known[i]:
                    found.add(name)
        start = end
    return found


def _placements(
    names: SnapshotNames,
    filed: Filed,
    answers: PollAnswers,
    bundles: Mapping[str, Mapping[str, BundleRecord]],
) -> tuple[pa.Array, pa.Array]:
    """Each topic's bundle and owner broker; each namespace's topics placed in one search.

    The bulk answer can be a stats period old (e.g. from before a split); the boundaries
    were read in this poll, so they win; ownership is read live, the bulk answer's broker
    only stands in when it is unknown."""
    count = len(names.topics)
    placed = np.full(count, None, dtype=object)
    spaces = pc.dictionary_encode(names.namespaces)
    codes = spaces.indices.to_numpy(zero_copy_only=False)
    topics: list[str] | None = None
    for code, namespace in enumerate(spaces.dictionary.to_pylist()):
        listing = answers.listings.get(namespace)
        if listing is not None and listing.boundaries:
            topics = names.topics.to_pylist() if topics is None else topics
            at = np.flatnonzero(codes == code)
            mine = [topics[i] for i in at.tolist()]
            placed[at] = bundles_of_full_names(mine, listing.boundaries)
    row = names.filed_at
    filer = row >= 0
    bundle = pa.array(placed, pa.string())
    if filer.any():
        theirs = filed.table.column("bundle").take(pa.array(np.where(filer, row, 0)))
        stand_in = pc.if_else(pa.array(filer), theirs, pa.nulls(count, pa.string()))
        bundle = pc.coalesce(bundle, stand_in)
    records = [(ns, rec) for ns in sorted(bundles) for rec in bundles[ns].values()]
    which = pair_positions(names.namespaces, bundle, [(ns, r.bundle) for ns, r in records])
    owners = np.array([r.owner_broker for _, r in records] + [None], dtype=object)
    owner = owners[which]  # -1: the None at the end
    unknown = np.fromiter((o is None for o in owner.tolist()), bool, count)
    missing = np.flatnonzero(filer & unknown)
    if len(missing):
        numbers = filed.table.column("broker").to_numpy()
        brokers = np.array(filed.brokers, dtype=object)
        owner[missing] = brokers[numbers[row[missing]]]
    if isinstance(bundle, pa.ChunkedArray):
        bundle = bundle.combine_chunks()
    return bundle, pa.array(owner, pa.string())


def _brokers(answers: PollAnswers) -> list[BrokerRecord]:
    return [
        parse_broker(
            broker,
            web_url=answers.web_urls.get(broker),
            leader=answers.leader,
            load_report=answers.load_reports.get(broker),
            version=answers.versions.get(broker),
            lb=_lb_counters(answers.lb_metrics.get(broker)),
        )
        for broker in answers.broker_ids
    ]


def _lb_counters(payload: Any) -> LoadManagerCounters | None:
    """None when the call failed (not answered), so its counters stay unknown."""
    return None if payload is None else parse_lb_counters(payload)


@dataclass(frozen=True)
class Placed:
    """The answers' topics as the snapshot takes them, before its tables are made: their
    names in order, each one's bundle and owner, the rows made in this process
    (`_rows_here`), the bundles, and the per-topic stats read."""

    names: pa.Array
    placed: tuple[pa.Array, pa.Array]
    here: dict[str, list[Any]]
    bundles: dict[str, dict[str, BundleRecord]]
    detailed: dict[str, Mapping[str, Any]]
    part_places: tuple[np.ndarray, np.ndarray] | None = None
    """`part_places`, when the placing found them (else the parts' topics are looked up)."""


Placing = Callable[[PollAnswers, Mapping[str, BrokerPart]], Placed]
"""What `build_snapshot` places the topics with (`place_topics`)."""


def build_snapshot(answers: PollAnswers, placing: Placing | None = None) -> Snapshot:
    """The Snapshot these answers describe; topics with per-topic stats use them for their
    subscriptions and consumers, the others the brokers' bulk answer. `placing`: what names
    and places the topics (`place_topics`; the tests give the record-by-record one).

    A field no column can hold becomes null, and the snapshot's errors say which; so do
    the items of the answers that were refused or cut, counted (`answers.notes`)."""
    with collection_paused():  # millions of records, no garbage
        parts = broker_parts(answers)
        notes = Notes()  # what parsing the bulk answers noted came first, then the rest
        for part in parts.values():
            notes.merge(part.notes)
        notes.merge(answers.notes)  # a copy: built twice from the same answers, counted once
        with field_warnings(notes) as found:
            snapshot = _build(answers, parts, (placing or place_topics)(answers, parts))
    lines = notes.lines()
    if not found and not lines:
        return snapshot
    warnings = [EndpointError(action, None, text) for action, text in lines]
    warnings += [EndpointError(FIELD, None, text) for text in found]
    return replace(snapshot, errors=(*snapshot.errors, *warnings))


def place_topics(answers: PollAnswers, parts: Mapping[str, BrokerPart]) -> Placed:
    """`Placed` of the answers, column by column."""
    filed = filed_topics(parts)
    namespaces = wanted_namespaces(answers, filed)
    bundles = _bundles(answers, namespaces, _ownership(answers, namespaces), filed)
    names = _topic_names(answers, namespaces, filed)
    detailed = {t: s for t, s in answers.topic_stats.items() if s}
    here = _rows_here(names, parts, filed, detailed)
    placed = _placements(names, filed, answers, bundles)
    return Placed(
        names.topics, placed, here, bundles, detailed, part_places=part_places(filed, names)
    )


def _build(answers: PollAnswers, parts: Mapping[str, BrokerPart], placed: Placed) -> Snapshot:
    ordered, here = placed.names, placed.here
    kept = part_topics(parts, ordered, placed.detailed, known=placed.part_places)
    topics = topic_table(parts, kept, here["topics"], ordered, placed.placed)
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
        bundles=tuple(with_topic_totals(placed.bundles, topics)),
        topics=TableRows("topics", topics),
        subscriptions=TableRows("subscriptions", rows["subscriptions"]),
        consumers=TableRows("consumers", rows["consumers"]),
        draining_hashes=TableRows("draining_hashes", rows["draining_hashes"]),
        errors=tuple(answers.errors),
        durations=dict(answers.durations),
        requests=answers.requests,
    )


def _rows_here(
    names: SnapshotNames,
    parts: Mapping[str, BrokerPart],
    filed: Filed,
    detailed: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """The rows no broker's part holds: topics no bulk answer reports (listed, or partitions
    counted), and the subscriptions of topics whose per-topic stats were read. What the
    parts' rows noted is counted here too, topic by topic, for the rows kept."""
    listed = list(busy_topics(names.parsed, parts, detailed))
    place = positions_among(_texts(listed), names.topics)
    brokers = filed.table.column("broker").to_numpy()
    found: list[tuple[str, BrokerPart | None]] = []
    for at, name in sorted((p, n) for p, n in zip(place.tolist(), listed, strict=True) if p >= 0):
        row = int(names.filed_at[at])
        found.append((name, parts[filed.brokers[brokers[row]]] if row >= 0 else None))
    return rows_made_here(found, names.parsed, detailed)


def busy_topics(
    parsed: Mapping[str, TopicName],
    parts: Mapping[str, BrokerPart],
    detailed: Mapping[str, Mapping[str, Any]],
) -> set[str]:
    """The topics `_rows_here` makes rows of or counts notes for: those no broker filed
    (`parsed`), those with per-topic stats, and those whose part's rows noted something. The
    rest are a part's rows that noted nothing: nothing to do here (most of a poll)."""
    busy = set(parsed)
    busy.update(detailed)
    for part in parts.values():
        busy.update(part.noted)
    return busy


def rows_made_here(
    busy: Sequence[tuple[str, BrokerPart | None]],
    parsed: Mapping[str, TopicName],
    detailed: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """`_rows_here` of the `busy` topics, in the snapshot's order, each with the part that
    files it (None: no broker filed it; its name is `parsed`)."""
    rows: dict[str, list[Any]] = {name: [] for name in PART_TABLES}
    for name, part in busy:
        stats = detailed.get(name)
        topic_noted, subs_noted = (
            part.noted.get(name, (None, None)) if part is not None else (None, None)
        )
        if topic_noted is not None:
            merge_noted(topic_noted)
        if stats is None:
            if subs_noted is not None:
                merge_noted(subs_noted)
            if part is not None:
                continue
        with reading(name):
            if part is None:
                rows["topics"].append(topic_of(parsed[name], None, bundle=None, owner=None))
            if stats is not None:
                check_keys(stats, "topic stats")
                found = subscriptions_of(name, stats)
                rows["subscriptions"].extend(found.subscriptions)
                rows["consumers"].extend(found.consumers)
                rows["draining_hashes"].extend(found.draining_hashes)
    return rows


def namespace_listing(ns: str, bundles: Any, topics: Any, parted: Any) -> NamespaceListing:
    """What a namespace's three calls answered (None where one failed), its names as text."""
    return NamespaceListing(
        namespace=ns,
        bundles=parse_bundles(ns, bundles) if bundles is not None else None,
        boundaries=parse_boundaries(bundles) if bundles is not None else None,
        topics=_names(ns, topics, "topic listing item"),
        partitioned=_names(ns, parted, "partitioned topic listing item"),
    )


def _names(ns: str, listed: Sequence[Any] | None, what: str) -> tuple[str, ...] | None:
    """The texts of a listing; anything else is refused (names are checked later)."""
    if listed is None:
        return None
    for item in listed:
        if not isinstance(item, str):
            refuse(what, f"is {json_kind(item)}, not a name; left out", ns, item)
    return tuple(item for item in listed if isinstance(item, str))
