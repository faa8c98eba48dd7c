"""The column-by-column canonical JSON of record tables against the reference `canonical_json`.

`records_json` either returns exactly the bytes of `canonical_json(records)` or None (the
snapshot id then serialises that table with `canonical_json`); `snapshot_id` equals one
`digest()` of the whole payload. Records are filled with the values a parser gives (typed as
the record's annotations say, ints in float fields) and with anything at all in any field.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import random
import typing
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.core.digest import canonical_json, reference_snapshot_id, snapshot_id
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
from pulsar_lens.core.tablejson import records_json
from tests.props.strategies import props

T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
RECORDS = (
    BrokerRecord,
    BundleRecord,
    TopicRecord,
    SubscriptionRecord,
    ConsumerRecord,
    DrainingHashRecord,
)
EDGE_FLOATS = (
    1e16,
    1e-7,
    -0.0,
    0.0,
    0.1 + 0.2,
    1e-4,
    math.nextafter(1e-4, 0),
    math.nextafter(1e16, 0),
    -math.nextafter(1e16, 0),
    5e-324,
    1.7976931348623157e308,
    123456789012345678.0,
    1234567890123456.8,
    2.0**53,
    -1e-5,
    1e22,
)
EDGE_INTS = (
    0,
    -1,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    2**63,
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    10**30,
    -(10**400),
)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ("", "é", "😀 emoji", "\x00\x1f\x7f", '"\\/', "\u2028\u2029", "\U0010ffff", "日本語")
)
SURROGATE_TEXT = st.text(st.characters(), max_size=6)  # lone surrogates included
FLOATS = st.floats() | st.sampled_from(EDGE_FLOATS)
INTS = st.integers(-(2**70), 2**70) | st.sampled_from(EDGE_INTS)
ZONES = st.sampled_from(
    (dt.UTC, dt.timezone(dt.timedelta(hours=1)), dt.timezone(dt.timedelta(hours=-5, minutes=-30)))
)
AWARE = st.datetimes(timezones=ZONES) | st.datetimes(
    min_value=dt.datetime(2020, 1, 1), max_value=dt.datetime(2030, 1, 1), timezones=st.just(dt.UTC)
)
WHOLE_SECONDS = AWARE.map(lambda t: t.replace(microsecond=0))
TIMES = AWARE | WHOLE_SECONDS
PAIRS = st.lists(st.tuples(INTS, INTS), max_size=3).map(tuple)


class Colour(enum.Enum):
    RED = "red"


ANYTHING = st.one_of(
    st.none(),
    TEXT,
    SURROGATE_TEXT,
    INTS,
    st.booleans(),
    FLOATS,
    TIMES,
    st.datetimes(),  # naive
    PAIRS,
    st.lists(st.lists(st.integers(), max_size=2).map(tuple), max_size=2),
    st.tuples(st.tuples(st.tuples(st.integers()))),
    st.dates(),
    st.just(Colour.RED),
    st.dictionaries(TEXT, INTS, max_size=2),
    st.just(EndpointError("GET /x", 500, "boom")),
)


def _typed(hint: Any) -> st.SearchStrategy[Any]:
    """Values a parser gives for a field of this annotation (ints in float fields too)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args and len(args) < len(typing.get_args(hint)):  # Optional
        return st.none() | _typed(args[0])
    if hint is str:
        return TEXT
    if hint is bool:
        return st.booleans()
    if hint is int:
        return INTS
    if hint is float:
        return FLOATS | st.integers(-(2**60), 2**60)
    if hint is dt.datetime:
        return TIMES
    return PAIRS  # the hash ranges


def _records(kind: type, values: st.SearchStrategy[Any] | None) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(kind)
    fields = {
        f.name: values if values is not None else _typed(hints[f.name])
        for f in dataclasses.fields(kind)
    }
    return st.builds(kind, **fields)


def _tables(values: st.SearchStrategy[Any] | None) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.sampled_from(RECORDS).flatmap(
        lambda kind: st.lists(_records(kind, values), max_size=6).map(tuple)
    )


def reference(records: Any) -> bytes | type[Exception]:
    try:
        return canonical_json(records).encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        return type(exc)


def assert_same_or_declined(records: tuple[Any, ...]) -> None:
    data = records_json(records)
    if data is not None:
        assert data == reference(records)


@props(600)
@given(_tables(None))
@example(())
@example((TopicRecord(topic="t", tenant="é😀", namespace="n", msg_rate_in=1e16),))
@example((BundleRecord("n", "t", "b", 0, 2**64, msg_rate_in=1e-7, msg_rate_out=-0.0),))
def test_records_json_equals_canonical_json_on_typed_records(records: tuple[Any, ...]) -> None:
    assert_same_or_declined(records)


@props(600)
@given(_tables(ANYTHING))
def test_records_json_equals_canonical_json_or_declines_on_any_values(
    records: tuple[Any, ...],
) -> None:
    assert_same_or_declined(records)


def test_records_json_declines_what_canonical_json_refuses_or_spells_otherwise() -> None:
    def topic(**fields: Any) -> tuple[TopicRecord]:
        return (dataclasses.replace(TopicRecord(topic="t", tenant="p", namespace="p/n"), **fields),)

    for fields in (
        {"msg_rate_in": math.nan},
        {"msg_rate_in": -math.inf},
        {"oldest_publisher_since": dt.datetime(2026, 1, 1)},  # naive
        {"bundle": Colour.RED},
        {"tenant": "\ud800"},
    ):
        assert records_json(topic(**fields)) is None, fields
    assert records_json((TopicRecord("t", "p", "p/n"), BundleRecord("n", "t", "b", 0, 1))) is None


def test_records_json_takes_the_fast_path_on_what_a_poll_holds() -> None:
    topics = tuple(
        TopicRecord(
            topic=f"persistent://p/n/t-{i}",
            tenant="p",
            namespace="p/n",
            msg_rate_in=i / 7 if i % 3 else 3.5e-5,
            storage_size=i,
            oldest_publisher_since=T0 + dt.timedelta(microseconds=i * 999),
        )
        for i in range(50)
    )
    consumers = (
        ConsumerRecord("t", "s", "c", hash_ranges=((0, 10), (11, 65535)), connected_since=T0),
    )
    for records in (topics, consumers, (), (DrainingHashRecord("t", "s", "c", 1, 2, 3),)):
        data = records_json(records)
        assert data is not None
        assert data == canonical_json(records).encode()


def test_records_json_spells_every_float_as_json_dumps() -> None:
    # random bit patterns cover every exponent; the edges are where repr switches form
    bits = np.random.default_rng(7).integers(0, 2**64, size=50_000, dtype=np.uint64)
    floats = [x for x in bits.view(np.float64).tolist() if math.isfinite(x)]
    near = [
        f(math.nextafter(edge, toward))
        for edge in (1e-4, 1e16, 1e15, 1e-5)
        for toward in (0.0, math.inf)
        for f in (float, lambda x: -x)
    ]
    decimal = [random.Random(7).uniform(-1e6, 1e6) for _ in range(5_000)]
    values = [*EDGE_FLOATS, *near, *floats, *decimal]
    records = tuple(BundleRecord("n", "t", "b", 0, 1, msg_rate_in=x) for x in values)
    assert records_json(records) == canonical_json(records).encode()


@pytest.mark.parametrize("year", [1, 999, 1000, 2026, 9999])
def test_records_json_spells_timestamps_as_format_timestamp(year: int) -> None:
    zones = (dt.UTC, dt.timezone(dt.timedelta(hours=14)), dt.timezone(dt.timedelta(hours=-12)))
    times = [
        dt.datetime(year, 6, 15, 12, 30, 45, micro, tzinfo=zone)
        for micro in (0, 1, 500000, 999999)
        for zone in zones
    ]
    records = tuple(ConsumerRecord("t", "s", "c", connected_since=t) for t in times)
    assert records_json(records) == canonical_json(records).encode()


def _snapshots() -> st.SearchStrategy[Snapshot]:
    tables = {
        name: st.lists(_records(kind, None), max_size=3).map(tuple)
        for name, kind in (
            ("brokers", BrokerRecord),
            ("bundles", BundleRecord),
            ("topics", TopicRecord),
            ("subscriptions", SubscriptionRecord),
            ("consumers", ConsumerRecord),
            ("draining_hashes", DrainingHashRecord),
        )
    }
    errors = st.lists(st.builds(EndpointError, TEXT, st.none() | INTS, TEXT), max_size=2)
    return st.builds(Snapshot, cluster=TEXT, collected_at=TIMES, errors=errors.map(tuple), **tables)


@props(300)
@given(_snapshots())
def test_snapshot_id_equals_one_digest_of_the_whole_payload(snapshot: Snapshot) -> None:
    try:
        expected: str | type[Exception] = reference_snapshot_id(snapshot)
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        expected = type(exc)
    try:
        found: str | type[Exception] = snapshot_id(snapshot)
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        found = type(exc)
    assert found == expected
