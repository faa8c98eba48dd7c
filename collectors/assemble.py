"""Turn the raw answers of one poll into a `Snapshot` (pure: no network).

Kept apart from `poll()` so recorded answers can be assembled in tests exactly as live ones.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.brokers import (
    LoadManagerCounters,
    parse_broker,
    parse_lb_counters,
    parse_owned_bundles,
)
from pulsar_lens.collectors.fields import check_keys, field_warnings, json_kind, reading
from pulsar_lens.collectors.namespaces import (
    NamespaceListing,
    bundle_of_full_name,
    owned_bundles_by_namespace,
    parse_boundaries,
    parse_bundle_key,
    parse_bundles,
)
from pulsar_lens.collectors.notes import FIELD, Notes, refuse, within
from pulsar_lens.collectors.topics import TopicStats, iter_partitions, topic_refusal
from pulsar_lens.collectors.typedrecords import subscriptions_of, topic_of
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    EndpointError,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
)
from pulsar_lens.core.topicname import TopicName, parse_topic_name

log = logging.getLogger(__name__)


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
    bulk: dict[str, list[TopicStats] | None] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    namespaces_complete: bool = True  # False when a tenant or namespace listing failed
    listings: dict[str, NamespaceListing] = field(default_factory=dict)
    topic_stats: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    errors: list[EndpointError] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    notes: Notes = field(default_factory=Notes)  # what the parsers refused or cut so far


def bulk_by_topic(answers: PollAnswers) -> dict[str, TopicStats]:
    """One bulk entry per topic; if two brokers report a topic (mid-transfer), the first
    broker in id order wins."""
    found: dict[str, TopicStats] = {}
    for broker in sorted(answers.bulk):
        for entry in answers.bulk[broker] or ():
            found.setdefault(entry.topic, entry)
    return found


def wanted_namespaces(answers: PollAnswers, bulk: Mapping[str, TopicStats]) -> list[str]:
    """The polled namespaces, plus those only the brokers' bulk answers revealed (when the
    tenant listing failed)."""
    names = set(answers.namespaces)
    if not answers.namespaces_complete:
        for entry in bulk.values():
            try:
                names.add(parse_topic_name(entry.topic).namespace)
            except ValueError:
                continue
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
    bulk: Mapping[str, TopicStats],
) -> dict[str, dict[str, BundleRecord]]:
    """{namespace: {bundle: record}}; when a namespace's bundle listing failed, the bundles
    that brokers own or report topics in stand in for it."""
    result: dict[str, dict[str, BundleRecord]] = {}
    for ns in namespaces:
        listing = answers.listings.get(ns)
        listed = {b.bundle: b for b in (listing.bundles if listing and listing.bundles else ())}
        if not listed:
            keys = set(owners.get(ns, {}))
            keys |= {f"{e.bundle}" for e in bulk.values() if e.bundle and _ns_of(e.topic) == ns}
            for key in keys:
                parsed = parse_bundle_key(f"{ns}/{key}")
                if parsed:
                    listed[key] = BundleRecord(ns, ns.split("/")[0], key, parsed[2], parsed[3])
        result[ns] = {
            name: replace(rec, owner_broker=owners.get(ns, {}).get(name))
            for name, rec in sorted(listed.items(), key=lambda kv: kv[1].lower)
        }
    return result


def _ns_of(topic: str) -> str | None:
    try:
        return parse_topic_name(topic).namespace
    except ValueError:
        return None


def _topic_names(
    answers: PollAnswers, namespaces: list[str], bulk: Mapping[str, TopicStats]
) -> list[TopicName]:
    """The topics of the polled namespaces: those the brokers report (checked as they were
    parsed) and those the namespaces list, refused when no topic of that namespace."""
    wanted = set(namespaces)
    names: set[str] = set(bulk)
    for listing in answers.listings.values():
        names.update(_listed(listing.namespace, listing.topics or ()))
    for parent, count in answers.partition_counts.items():
        names.update(iter_partitions(parent, count))
    parsed = []
    for name in sorted(names):
        why = topic_refusal(name)
        if why is not None:  # a partition of a parent refused on its own
            refuse("topic", f"{why}; left out", name)
            continue
        topic = parse_topic_name(name)
        if topic.namespace in wanted:  # a broker also reports namespaces left unpolled
            parsed.append(topic)
    return parsed


def _listed(namespace: str, topics: Sequence[str]) -> Iterator[str]:
    """The topics a namespace listing named, but those it cannot hold."""
    with within(namespace):
        for name in topics:
            why = topic_refusal(name)
            if why is None and parse_topic_name(name).namespace != namespace:
                why = "is listed in another namespace than its name says"
            if why is None:
                yield name
            else:
                refuse("topic", f"{why}; left out", name)


def _topic_record(
    name: TopicName,
    entry: TopicStats | None,
    answers: PollAnswers,
    bundles: Mapping[str, Mapping[str, BundleRecord]],
) -> TopicRecord:
    listing = answers.listings.get(name.namespace)
    boundaries = listing.boundaries if listing else None
    bundle = bundle_of_full_name(name.topic, boundaries) if boundaries else None
    if bundle is None and entry is not None:
        bundle = entry.bundle
    if entry is not None and entry.bundle and bundle != entry.bundle:
        # the bulk answer can be a stats period old (e.g. from before a split); the
        # boundaries were read in this poll, so they win
        log.debug("%s: bulk stats say bundle %s, boundaries %s", name.topic, entry.bundle, bundle)
    # ownership is read live; the bulk answer's broker only stands in when it is unknown
    record = bundles.get(name.namespace, {}).get(bundle) if bundle is not None else None
    owner = record.owner_broker if record is not None else None
    if owner is None and entry is not None:
        owner = entry.broker
    return topic_of(name, entry.stats if entry else None, bundle=bundle, owner=owner)


def _with_topic_totals(
    bundles: dict[str, dict[str, BundleRecord]], topics: list[TopicRecord]
) -> list[BundleRecord]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    rate_in: dict[tuple[str, str], float] = defaultdict(float)
    rate_out: dict[tuple[str, str], float] = defaultdict(float)
    seen_rates: set[tuple[str, str]] = set()
    for t in topics:
        if t.bundle is None:
            continue
        key = (t.namespace, t.bundle)
        counts[key] += 1
        if t.msg_rate_in is not None:
            seen_rates.add(key)
            rate_in[key] += t.msg_rate_in
            rate_out[key] += t.msg_rate_out or 0.0
    out = []
    for ns in sorted(bundles):
        for rec in bundles[ns].values():
            key = (ns, rec.bundle)
            loaded = key in seen_rates
            out.append(
                replace(
                    rec,
                    topic_count=counts.get(key, 0),
                    msg_rate_in=rate_in[key] if loaded else None,
                    msg_rate_out=rate_out[key] if loaded else None,
                )
            )
    return out


def _with_broker_totals(
    brokers: list[BrokerRecord], topics: list[TopicRecord], consumers: list[ConsumerRecord]
) -> list[BrokerRecord]:
    """Fill the counts and rates a load report would give from the topics each broker serves,
    where the load manager keeps no report (NoopLoadManager answers 204); a report wins."""
    owner_of = {t.topic: t.owner_broker for t in topics}
    n_topics: dict[str | None, int] = defaultdict(int)
    rate_in: dict[str | None, float] = defaultdict(float)
    rate_out: dict[str | None, float] = defaultdict(float)
    n_consumers: dict[str | None, int] = defaultdict(int)
    for t in topics:
        n_topics[t.owner_broker] += 1
        rate_in[t.owner_broker] += t.msg_rate_in or 0.0
        rate_out[t.owner_broker] += t.msg_rate_out or 0.0
    for c in consumers:
        n_consumers[owner_of.get(c.topic)] += 1
    return [
        replace(
            b,
            num_topics=b.num_topics if b.num_topics is not None else n_topics[b.broker_id],
            msg_rate_in=b.msg_rate_in if b.msg_rate_in is not None else rate_in[b.broker_id],
            msg_rate_out=b.msg_rate_out if b.msg_rate_out is not None else rate_out[b.broker_id],
            num_consumers=(
                b.num_consumers if b.num_consumers is not None else n_consumers[b.broker_id]
            ),
        )
        for b in brokers
    ]


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


def build_snapshot(answers: PollAnswers) -> Snapshot:
    """The Snapshot these answers describe; topics with per-topic stats use them for their
    subscriptions and consumers, the others the brokers' bulk answer.

    A field no column can hold becomes null, and the snapshot's errors say which; so do
    the items of the answers that were refused or cut, counted (`answers.notes`)."""
    notes = copy.deepcopy(answers.notes)  # built twice from the same answers, counted once
    with field_warnings(notes) as found, collection_paused():  # millions of records, no garbage
        snapshot = _build(answers)
    lines = notes.lines()
    if not found and not lines:
        return snapshot
    warnings = [EndpointError(action, None, text) for action, text in lines]
    warnings += [EndpointError(FIELD, None, text) for text in found]
    return replace(snapshot, errors=(*snapshot.errors, *warnings))


def _build(answers: PollAnswers) -> Snapshot:
    bulk = bulk_by_topic(answers)
    namespaces = wanted_namespaces(answers, bulk)
    bundles = _bundles(answers, namespaces, _ownership(answers, namespaces), bulk)
    topics: list[TopicRecord] = []
    subs: list[SubscriptionRecord] = []
    consumers: list[ConsumerRecord] = []
    draining: list[DrainingHashRecord] = []
    for name in _topic_names(answers, namespaces, bulk):
        entry = bulk.get(name.topic)
        with reading(name.topic):
            topics.append(_topic_record(name, entry, answers, bundles))
            detailed = answers.topic_stats.get(name.topic)
            if detailed:
                check_keys(detailed, "topic stats")
            stats = detailed or (entry.stats if entry else None)
            if stats is not None:
                rows = subscriptions_of(name.topic, stats)
                subs.extend(rows.subscriptions)
                consumers.extend(rows.consumers)
                draining.extend(rows.draining_hashes)
    with reading("brokers"):
        brokers = _brokers(answers)
    return Snapshot(
        cluster=answers.cluster,
        collected_at=answers.collected_at,
        brokers=tuple(_with_broker_totals(brokers, topics, consumers)),
        bundles=tuple(_with_topic_totals(bundles, topics)),
        topics=tuple(topics),
        subscriptions=tuple(subs),
        consumers=tuple(consumers),
        draining_hashes=tuple(draining),
        errors=tuple(answers.errors),
        durations=dict(answers.durations),
        requests=answers.requests,
    )


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
