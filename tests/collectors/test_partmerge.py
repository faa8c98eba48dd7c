"""The brokers' parts merged column-wise are the rows a record-by-record assembly gives: a
topic's row from the first broker in id order that reports it (a topic mid-transfer is in
two answers), its subscriptions, consumers and draining hashes from there too unless its
per-topic stats were read, the rows made in the poll's process for the rest, all in
topic-name order with each topic's rows in the order they were built; topics of a part that
are not the snapshot's (a namespace not polled) are left out."""

from __future__ import annotations

from dataclasses import astuple
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_lens.collectors.assemble import filed_topics, part_places
from pulsar_lens.collectors.bulkparts import INDEX_SCHEMA, BrokerPart
from pulsar_lens.collectors.partmerge import (
    found_positions,
    part_topics,
    positions_among,
    rows_table,
    topic_table,
)
from pulsar_lens.core.model import (
    ConsumerRecord,
    DrainingHashRecord,
    SubscriptionRecord,
    TopicRecord,
    content_table,
)
from pulsar_lens.core.tablerows import records_from_table

TOPICS = [f"persistent://t/ns/topic-{i:02}" for i in range(12)]
BROKERS = ["b0:8080", "b1:8080", "b2:8080"]
KINDS = {
    "subscriptions": lambda topic, n: SubscriptionRecord(topic, f"s{n}"),
    "consumers": lambda topic, n: ConsumerRecord(topic, "s", f"c{n}"),
    "draining_hashes": lambda topic, n: DrainingHashRecord(topic, "s", f"c{n}", 1, 1, 1),
}


ORIGINS = [*BROKERS, "here"]


def topic_record(topic: str, origin: str, **placed: str) -> TopicRecord:
    """A topic's row, its rate telling where it was made."""
    return TopicRecord(topic, "t", "t/ns", msg_rate_in=float(ORIGINS.index(origin)), **placed)


def rows_of(topic: str, origin: str, counts: dict[str, int]) -> dict[str, list[Any]]:
    """A topic's rows, named by where they were made so that their source shows."""
    return {
        name: [KINDS[name](topic, f"{origin}-{i}") for i in range(counts[name])] for name in KINDS
    }


@st.composite
def merges(draw: st.DrawFn) -> dict[str, Any]:
    counts = st.fixed_dictionaries({name: st.integers(0, 3) for name in KINDS})
    holds = {
        broker: sorted(draw(st.sets(st.sampled_from(TOPICS), max_size=8))) for broker in BROKERS
    }
    reported = sorted({t for topics in holds.values() for t in topics})
    listed = draw(st.sets(st.sampled_from(TOPICS)))  # named by a listing only: made here
    # in a part, not the snapshot's (a namespace not polled)
    unpolled = draw(st.sets(st.sampled_from(reported))) if reported else set()
    names = sorted((set(reported) | listed) - unpolled)
    detailed = draw(st.sets(st.sampled_from(names))) if names else set()
    rows = {(b, t): rows_of(t, b, draw(counts)) for b, topics in holds.items() for t in topics}
    here_rows = {t: rows_of(t, "here", draw(counts)) for t in names}
    return {
        "holds": holds,
        "names": names,
        "detailed": detailed,
        "rows": rows,
        "here": here_rows,
    }


def part(broker: str, topics: list[str], rows: dict[Any, Any]) -> BrokerPart:
    index = pa.table(
        {
            "topic": topics,
            "namespace": ["t/ns"] * len(topics),
            "bundle": [None] * len(topics),
            "needs_details": [False] * len(topics),
            "backlog": [0] * len(topics),
        },
        schema=INDEX_SCHEMA,
    )
    tables = {"topics": content_table("topics", [topic_record(t, broker) for t in topics])}
    for name in KINDS:
        records = [r for t in topics for r in rows[broker, t][name]]
        tables[name] = content_table(name, records)
    return BrokerPart(broker, index, tables)


@settings(max_examples=300, deadline=None)
@given(merges())
def test_parts_merge_as_records_assemble(case: dict[str, Any]) -> None:
    holds, names, detailed = case["holds"], case["names"], case["detailed"]
    parts = {b: part(b, holds[b], case["rows"]) for b in BROKERS}
    filed = {}
    for broker in BROKERS:  # in id order: the first that reports a topic files it
        for topic in holds[broker]:
            filed.setdefault(topic, broker)
    here_topics = [topic_record(t, "here") for t in names if t not in filed]
    here = {
        name: [r for t in names if t in detailed for r in case["here"][t][name]] for name in KINDS
    }
    placed = [(f"bundle-{t[-2:]}", f"owner-{t[-2:]}") for t in names]

    ordered = pa.array(names, pa.string())
    kept = part_topics(parts, ordered, detailed)
    # the places the assembly's filing and naming found already, not looked up again
    filing = filed_topics(parts)
    names_found = SimpleNamespace(filed_at=filing.rows(ordered))
    known = part_topics(parts, ordered, detailed, known=part_places(filing, names_found))
    for broker, found in known.items():
        for got, want in zip(astuple(found), astuple(kept[broker]), strict=True):
            assert got.equals(want) if isinstance(got, pa.ChunkedArray) else (got == want).all()
    columns = tuple(pa.array([p[i] for p in placed], pa.string()) for i in (0, 1))
    topics = records_from_table("topics", topic_table(parts, kept, here_topics, ordered, columns))
    expected = [
        topic_record(t, filed.get(t, "here"), bundle=bundle, owner_broker=owner)
        for t, (bundle, owner) in zip(names, placed, strict=True)
    ]
    assert list(topics) == expected
    for name in KINDS:
        expected_rows = [
            r
            for t in names
            for r in (
                case["here"][t][name]
                if t in detailed
                else case["rows"][filed[t], t][name]
                if t in filed
                else []
            )
        ]
        got = records_from_table(name, rows_table(name, parts, kept, here[name], ordered))
        assert list(got) == expected_rows, name


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.sampled_from("abcdefgé日"), max_size=12),
    names=st.lists(st.sampled_from("abcdefgé日xyz"), min_size=100, max_size=160),
    chunked=st.booleans(),
)
def test_positions_among_the_names_are_index_in_s(
    values: list[str], names: list[str], chunked: bool
) -> None:
    """Hashing the few values (at most 12, among 100 names or more: always that way here)
    instead of the many names finds the same first places (a name given twice too), -1 where
    a value is not named."""
    looked_up: pa.Array | pa.ChunkedArray = pa.array(values, pa.string())
    if chunked:
        looked_up = pa.chunked_array([values[:3], values[3:]], pa.string())
    among: pa.Array | pa.ChunkedArray = pa.array(names, pa.string())
    if chunked:  # as a table's column: its names in pieces
        among = pa.chunked_array([names[:50], names[50:]], pa.string())
    expected = found_positions(pc.index_in(looked_up, value_set=among))
    assert positions_among(looked_up, among).tolist() == expected.tolist()
