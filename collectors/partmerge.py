"""The brokers' parts of a poll (`collectors.bulkparts`) and the rows built beside them, made
one snapshot's tables, column-wise: no record of a part's rows is made here.

A topic's row comes from the first broker in id order that reports it (a topic mid-transfer
is in two answers); its subscriptions, consumers and draining hashes from there too, unless
its per-topic stats were read, which replace them. Rows are in topic-name order, and within
a topic in the order they were built, as `assemble.build_snapshot` has always given them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.collectors.bulkparts import BrokerPart, Noted
from pulsar_lens.collectors.fields import add_warnings
from pulsar_lens.collectors.notes import current_notes
from pulsar_lens.core.model import BrokerRecord, BundleRecord, content_table


def merge_noted(noted: Noted) -> None:
    """What making a part's rows noted, into the notes and warnings being collected."""
    notes = current_notes()
    if notes is not None:
        notes.merge(noted.notes)
    add_warnings(noted.warnings)


@dataclass(frozen=True)
class PartTopics:
    """A part's topics (its index's order) as the snapshot takes them: `filed`, the topics
    whose row is this part's (no broker before it in id order reports them); `place`, each
    one's place among the snapshot's names (-1: not one of them); `rows`, the topics whose
    subscriptions, consumers and draining hashes are this part's (filed here, among the
    names, their per-topic stats not read)."""

    topics: pa.ChunkedArray
    filed: np.ndarray
    place: np.ndarray
    rows: np.ndarray


def part_topics(
    parts: Mapping[str, BrokerPart],
    names: pa.Array,
    detailed: Collection[str],
    *,
    known: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, PartTopics]:
    """`PartTopics` of each part, column-wise; `names` are the snapshot's, in order. Every
    part's topics are looked up together, so each lookup builds its hash table once; `known`,
    (each part topic's first place among them, its place among the names) when the caller
    knows them already (`assemble.part_places`: at 1,000,000 topics two lookups of a million
    names each)."""
    chunks = [chunk for part in parts.values() for chunk in part.index.column("topic").chunks]
    every = pa.chunked_array(chunks, pa.string())
    count = len(every)
    if known is None:
        # a topic's first place among every part's topics (parts in broker id order): its filer
        first = first_places(every)
        place = found_positions(pc.index_in(every, value_set=names))
    else:
        first, place = known
    filed = first == np.arange(count)
    read = pa.array(sorted(detailed), pa.string())
    own = np.invert(pc.is_in(every, value_set=read).to_numpy(zero_copy_only=False))
    rows = filed & (place >= 0) & own
    found: dict[str, PartTopics] = {}
    start = 0
    for broker, part in parts.items():
        topics = part.index.column("topic")
        end = start + len(topics)
        at = slice(start, end)
        found[broker] = PartTopics(topics, filed[at], place[at].astype(np.int64), rows[at])
        start = end
    return found


def topic_table(
    parts: Mapping[str, BrokerPart],
    kept: Mapping[str, PartTopics],
    here: Sequence[Any],
    names: pa.Array,
    placed: tuple[pa.Array, pa.Array],
) -> pa.Table:
    """One row per name, in their order: the part's row of the broker that files it, else
    the record made `here`; bundle and owner as `placed` says (one of each per name)."""
    pieces = [part.tables["topics"].filter(kept[b].filed) for b, part in parts.items()]
    whole = pa.concat_tables([*pieces, content_table("topics", here)])
    at = pc.index_in(names, value_set=whole.column("topic"))
    if at.null_count:
        raise ValueError("a topic of the snapshot has no row")  # a bug: every name has one
    table = whole.take(at)
    for column, values in zip(("bundle", "owner_broker"), placed, strict=True):
        i = table.schema.get_field_index(column)
        table = table.set_column(i, table.schema.field(i), values)
    return table.combine_chunks()


def rows_table(
    name: str,
    parts: Mapping[str, BrokerPart],
    kept: Mapping[str, PartTopics],
    here: Sequence[Any],
    names: pa.Array,
) -> pa.Table:
    """Table `name` (subscriptions, consumers, draining hashes): each part's rows of the
    topics whose rows it gives (`PartTopics.rows`) and the records made `here`, in the
    names' order (stably: a topic's rows keep their order)."""
    pieces: list[pa.Table] = []
    places: list[np.ndarray] = []
    for broker, part in parts.items():
        table = part.tables[name]
        if table.num_rows:
            keep, place = _per_row(table.column("topic"), kept[broker])
            pieces.append(table.filter(keep))
            places.append(place[keep])
    mine = content_table(name, here)
    if not sum(map(len, places)):
        return mine
    at = positions_among(mine.column("topic"), names)  # a few records, a million names
    whole = pa.concat_tables([*pieces, mine])
    order = np.argsort(np.concatenate([*places, at]), kind="stable")
    return whole.take(pa.array(order)).combine_chunks()


def _per_row(topics: pa.ChunkedArray, part: PartTopics) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row is kept and its topic's place: a part's rows are grouped by topic in
    its index's order, so each run of a topic takes that topic's answer."""
    runs = pc.run_end_encode(topics.combine_chunks())
    lengths = np.diff(runs.run_ends.to_numpy(), prepend=0)
    at = pc.index_in(runs.values, value_set=part.topics)
    if at.null_count:
        raise ValueError("a part holds rows of a topic it does not index")
    at_np = at.to_numpy()
    return np.repeat(part.rows[at_np], lengths), np.repeat(part.place[at_np], lengths)


def with_topic_totals(
    bundles: Mapping[str, Mapping[str, BundleRecord]], topics: pa.Table
) -> list[BundleRecord]:
    """Each bundle with its topic count and, when any of its topics has rates, their sums.

    By column: each topic's bundle found among the records, then counts and sums per bundle
    (`np.bincount` adds each bundle's rates in row order from 0.0, as a loop would)."""
    records = [(ns, rec) for ns in sorted(bundles) for rec in bundles[ns].values()]
    at = pair_positions(
        topics.column("namespace"),
        topics.column("bundle"),
        [(ns, rec.bundle) for ns, rec in records],
    )
    into, rated = _rates(topics.column("msg_rate_in"))
    out, _ = _rates(topics.column("msg_rate_out"))
    counted = at >= 0
    rated &= counted
    size = len(records)
    counts = np.bincount(at[counted], minlength=size)
    loaded = np.bincount(at[rated], minlength=size) > 0
    rate_in = np.bincount(at[rated], weights=into[rated], minlength=size)
    rate_out = np.bincount(at[rated], weights=out[rated], minlength=size)
    return [
        replace(
            rec,
            topic_count=int(counts[i]),
            msg_rate_in=float(rate_in[i]) if loaded[i] else None,
            msg_rate_out=float(rate_out[i]) if loaded[i] else None,
        )
        for i, (_, rec) in enumerate(records)
    ]


def with_broker_totals(
    brokers: list[BrokerRecord], topics: pa.Table, consumers: pa.Table
) -> list[BrokerRecord]:
    """Fill the counts and rates a load report would give from the topics each broker serves,
    where the load manager keeps no report (NoopLoadManager answers 204); a report wins.

    By column, as `with_topic_totals`; a consumer counts for the owner of its topic's row."""
    if all(
        None not in (b.num_topics, b.msg_rate_in, b.msg_rate_out, b.num_consumers) for b in brokers
    ):
        return brokers  # every figure reported: nothing to count
    ids = pa.array([b.broker_id for b in brokers], pa.string())
    owner = found_positions(pc.index_in(topics.column("owner_broker"), value_set=ids))
    into, _ = _rates(topics.column("msg_rate_in"))
    out, _ = _rates(topics.column("msg_rate_out"))
    served = owner >= 0
    size = len(brokers)
    n_topics = np.bincount(owner[served], minlength=size)
    rate_in = np.bincount(owner[served], weights=into[served], minlength=size)
    rate_out = np.bincount(owner[served], weights=out[served], minlength=size)
    row = found_positions(pc.index_in(consumers.column("topic"), value_set=topics.column("topic")))
    held = owner[row[row >= 0]]
    n_consumers = np.bincount(held[held >= 0], minlength=size)
    return [
        replace(
            b,
            num_topics=b.num_topics if b.num_topics is not None else int(n_topics[i]),
            msg_rate_in=b.msg_rate_in if b.msg_rate_in is not None else float(rate_in[i]),
            msg_rate_out=b.msg_rate_out if b.msg_rate_out is not None else float(rate_out[i]),
            num_consumers=(b.num_consumers if b.num_consumers is not None else int(n_consumers[i])),
        )
        for i, b in enumerate(brokers)
    ]


def found_positions(positions: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`pc.index_in`'s positions as int64, -1 where nothing was found."""
    found: np.ndarray = pc.fill_null(positions, -1).to_numpy().astype(np.int64, copy=False)
    return found


def first_places(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Where each value is first found among `values` (a value's first row where it is)."""
    return found_positions(pc.index_in(values, value_set=values))


def positions_among(
    values: pa.Array | pa.ChunkedArray, names: pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """`found_positions(pc.index_in(values, value_set=names))`, the hash table made of the
    smaller side: a lookup builds one of its whole value set, so a few values looked up among
    a poll's 1,000,000 topic names cost a table of a million (0.1-0.3 s) to find a few."""
    if len(values) * 8 >= len(names) or values.null_count or names.null_count:
        return found_positions(pc.index_in(values, value_set=names))
    distinct = pc.unique(values)
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    # each distinct value's first place among the names (len(names): none)
    hit = found_positions(pc.index_in(names, value_set=distinct))
    named = np.flatnonzero(hit >= 0)
    first = np.full(len(distinct), len(names), np.int64)
    np.minimum.at(first, hit[named], named)
    first[first == len(names)] = -1
    places: np.ndarray = first[found_positions(pc.index_in(values, value_set=distinct))]
    return places


def _rates(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, given): a missing rate as 0.0 (NaN stays NaN), and where one was given."""
    given = column.is_valid().to_numpy(zero_copy_only=False)
    values = pc.fill_null(column.cast(pa.float64()), 0.0).to_numpy()
    return values, given


def pair_positions(
    first: pa.ChunkedArray, second: pa.ChunkedArray, keys: Sequence[tuple[str, str]]
) -> np.ndarray:
    """Per row, the position in `keys` of its (first, second) value pair; -1 for a pair not
    among them or with a missing value."""
    if not keys or not len(first):
        return np.full(len(first), -1, dtype=np.int64)
    firsts = list(dict.fromkeys(k[0] for k in keys))
    seconds = list(dict.fromkeys(k[1] for k in keys))
    a = found_positions(pc.index_in(first, value_set=pa.array(firsts, pa.string())))
    b = found_positions(pc.index_in(second, value_set=pa.array(seconds, pa.string())))
    where_a = {v: i for i, v in enumerate(firsts)}
    where_b = {v: i for i, v in enumerate(seconds)}
    width = len(seconds)
    codes = np.array([where_a[x] * width + where_b[y] for x, y in keys], dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    row_codes = np.where((a >= 0) & (b >= 0), a * width + b, -1)
    slot = np.searchsorted(codes[order], row_codes)
    slot = np.minimum(slot, len(codes) - 1)
    hit = (row_codes >= 0) & (codes[order][slot] == row_codes)
    return np.where(hit, order[slot], -1)
