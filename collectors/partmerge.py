"""The brokers' parts of a poll (`collectors.bulkparts`) and the rows built beside them, made
one snapshot's tables, column-wise: no record of a part's rows is made here.

A topic's row comes from the first broker in id order that reports it (a topic mid-transfer
is in two answers); its subscriptions, consumers and draining hashes from there too, unless
its per-topic stats were read, which replace them. Rows are in topic-name order, and within
a topic in the order they were built, as `assemble.build_snapshot` has always given them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.collectors.bulkparts import BrokerPart, Noted
from pulsar_lens.collectors.fields import add_warnings
from pulsar_lens.collectors.notes import current_notes
from pulsar_lens.core.model import BrokerRecord, BundleRecord, content_table
from pulsar_lens.core.tablerows import table_columns
from pulsar_lens.core.topicname import TopicName


class FiledAt(Protocol):
    @property
    def broker(self) -> str: ...


def merge_noted(noted: Noted) -> None:
    """What making a part's rows noted, into the notes and warnings being collected."""
    notes = current_notes()
    if notes is not None:
        notes.merge(noted.notes)
    add_warnings(noted.warnings)


def topic_table(
    parts: Mapping[str, BrokerPart],
    filed: Mapping[str, FiledAt],
    here: Sequence[Any],
    names: Sequence[TopicName],
    placed: Sequence[tuple[str | None, str | None]],
) -> pa.Table:
    """One row per name, in their order: the part's row of the broker that files it, else
    the record made `here`; bundle and owner as `placed` says (one per name)."""
    pieces, at, offset = [], {}, 0
    for broker, part in parts.items():
        for row, topic in enumerate(part.index.column("topic").to_pylist()):
            if filed[topic].broker == broker:
                at[topic] = offset + row
        pieces.append(part.tables["topics"])
        offset += part.tables["topics"].num_rows
    for row, record in enumerate(here):
        at[record.topic] = offset + row
    pieces.append(content_table("topics", here))
    whole = pa.concat_tables(pieces)
    table = whole.take(pa.array([at[n.topic] for n in names], pa.int64()))
    for column, values in (
        ("bundle", [p[0] for p in placed]),
        ("owner_broker", [p[1] for p in placed]),
    ):
        i = table.schema.get_field_index(column)
        table = table.set_column(i, table.schema.field(i), pa.array(values, pa.string()))
    return table.combine_chunks()


def rows_table(
    name: str,
    parts: Mapping[str, BrokerPart],
    filed: Mapping[str, FiledAt],
    place: Mapping[str, int],
    detailed: Container[str],
    here: Sequence[Any],
) -> pa.Table:
    """Table `name` (subscriptions, consumers, draining hashes): each part's rows of the
    snapshot's topics (`place`: each one's place among them) that it files and that are not
    `detailed`, and the records made `here`, in topic order (stably: a topic's rows keep
    their order)."""
    pieces: list[pa.Table] = []
    places: list[int] = []
    for broker, part in parts.items():
        table = part.tables[name]
        if table.num_rows:
            topics = table.column("topic").to_pylist()
            keep = [t in place and t not in detailed and filed[t].broker == broker for t in topics]
            pieces.append(table.filter(pa.array(keep, pa.bool_())))
            places.extend(place[t] for t, k in zip(topics, keep, strict=True) if k)
    pieces.append(content_table(name, here))
    if not places:
        return pieces[-1]
    places.extend(place[record.topic] for record in here)
    whole = pa.concat_tables(pieces)
    return whole.take(pc.sort_indices(pa.array(places, pa.int64()))).combine_chunks()


def with_topic_totals(
    bundles: Mapping[str, Mapping[str, BundleRecord]], topics: pa.Table
) -> list[BundleRecord]:
    """Each bundle with its topic count and, when any of its topics has rates, their sums."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    rate_in: dict[tuple[str, str], float] = defaultdict(float)
    rate_out: dict[tuple[str, str], float] = defaultdict(float)
    seen_rates: set[tuple[str, str]] = set()
    columns = ("namespace", "bundle", "msg_rate_in", "msg_rate_out")
    for ns, bundle, into, out in zip(*table_columns(topics, columns), strict=True):
        if bundle is None:
            continue
        key = (ns, bundle)
        counts[key] += 1
        if into is not None:
            seen_rates.add(key)
            rate_in[key] += into
            rate_out[key] += out or 0.0
    found = []
    for ns in sorted(bundles):
        for rec in bundles[ns].values():
            key = (ns, rec.bundle)
            loaded = key in seen_rates
            found.append(
                replace(
                    rec,
                    topic_count=counts.get(key, 0),
                    msg_rate_in=rate_in[key] if loaded else None,
                    msg_rate_out=rate_out[key] if loaded else None,
                )
            )
    return found


def with_broker_totals(
    brokers: list[BrokerRecord], topics: pa.Table, consumers: pa.Table
) -> list[BrokerRecord]:
    """Fill the counts and rates a load report would give from the topics each broker serves,
    where the load manager keeps no report (NoopLoadManager answers 204); a report wins."""
    names, owners, ins, outs = table_columns(
        topics, ("topic", "owner_broker", "msg_rate_in", "msg_rate_out")
    )
    owner_of = dict(zip(names, owners, strict=True))
    n_topics: dict[str | None, int] = defaultdict(int)
    rate_in: dict[str | None, float] = defaultdict(float)
    rate_out: dict[str | None, float] = defaultdict(float)
    n_consumers: dict[str | None, int] = defaultdict(int)
    for owner, into, out in zip(owners, ins, outs, strict=True):
        n_topics[owner] += 1
        rate_in[owner] += into or 0.0
        rate_out[owner] += out or 0.0
    for topic in consumers.column("topic").to_pylist():
        n_consumers[owner_of.get(topic)] += 1
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
