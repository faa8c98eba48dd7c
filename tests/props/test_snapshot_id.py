"""The snapshot id against a reference that spells its input from the records in plain Python
(`struct.pack`, no Arrow): the format `core.tabledigest` documents, byte for byte, on random
snapshots of every table; and the values the store cannot hold are refused, not digested."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import struct
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.core.digest import (
    SNAPSHOT_ID_DOMAIN,
    SNAPSHOT_ID_PREFIX,
    canonical_json,
    format_timestamp,
    snapshot_id,
)
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import (
    POLLED_TABLES,
    RECORD_TYPES,
    ConsumerRecord,
    EndpointError,
    Snapshot,
    TopicRecord,
)
from pulsar_lens.core.store import Store
from tests.props.strategies import props

T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
INT64 = 2**63
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8) | st.sampled_from(
    ("", "é", "😀 emoji", "\x00\x1f\x7f", '"\\/', "\U0010ffff", "日本語")
)
ZONES = st.sampled_from((dt.UTC, dt.timezone(dt.timedelta(hours=-5, minutes=-30))))
TIMES = st.datetimes(
    min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=ZONES
)
INT32 = st.integers(0, 2**31 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53)


# ---- the reference: the documented input, spelled from the records ---------------------------


def _kind(hint: Any) -> tuple[str, str]:
    """(how the reference spells a value of this annotation, Arrow's name of its type)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args and len(args) < len(typing.get_args(hint)):
        hint = args[0]
    return {
        str: ("text", "string"),
        int: ("int", "int64"),
        float: ("float", "double"),
        bool: ("bool", "bool"),
        dt.datetime: ("time", "timestamp[us, tz=UTC]"),
    }.get(hint, ("ranges", "list<item: struct<start: int32, end: int32>>"))


def _validity(values: list[Any]) -> bytes:
    if None not in values:
        return b""
    bits = bytearray((len(values) + 7) // 8)
    for i, value in enumerate(values):
        if value is not None:
            bits[i // 8] |= 1 << (i % 8)
    return bytes(bits)


def _ints(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def _column(kind: str, values: list[Any]) -> Iterator[bytes]:
    yield _validity(values)
    if kind == "text":
        data = [b"" if v is None else v.encode() for v in values]
        yield _ints([len(d) for d in data])
        yield b"".join(data)
    elif kind == "int":
        yield _ints([0 if v is None else v for v in values])
    elif kind == "float":
        yield struct.pack(f"<{len(values)}d", *(0.0 if v is None else float(v) for v in values))
    elif kind == "bool":
        yield bytes(0 if v is None else int(v) for v in values)
    elif kind == "time":
        yield _ints(
            [0 if v is None else (v - EPOCH) // dt.timedelta(microseconds=1) for v in values]
        )
    else:  # hash ranges: list lengths, then the (never null) pairs' struct, field by field
        yield _ints([0 if v is None else len(v) for v in values])
        pairs = [pair for v in values if v is not None for pair in v]
        yield b""  # the structs: none null
        for side in (0, 1):
            yield b""
            yield _ints([pair[side] for pair in pairs])


def _piece(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def reference_id(snapshot: Snapshot) -> str:
    data = SNAPSHOT_ID_DOMAIN
    data += _piece(snapshot.cluster.encode())
    data += _piece(format_timestamp(snapshot.collected_at).encode())
    data += _piece(canonical_json(snapshot.errors).encode())
    for name in sorted(POLLED_TABLES):
        records = snapshot.records(name)
        data += _piece(name.encode()) + _piece(struct.pack("<Q", len(records)))
        hints = typing.get_type_hints(RECORD_TYPES[name])
        for field in sorted(f.name for f in dataclasses.fields(RECORD_TYPES[name])):
            values = [getattr(r, field) for r in records]
            if all(v is None for v in values):
                continue
            kind, arrow_name = _kind(hints[field])
            data += _piece(field.encode()) + _piece(arrow_name.encode())
            data += b"".join(_piece(part) for part in _column(kind, values))
    return SNAPSHOT_ID_PREFIX + hashlib.sha256(data).hexdigest()


# ---- random snapshots -------------------------------------------------------------------------


def _typed(hint: Any) -> st.SearchStrategy[Any]:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args and len(args) < len(typing.get_args(hint)):
        return st.none() | _typed(args[0])
    return {
        str: TEXT,
        int: st.integers(-INT64, INT64 - 1),
        float: FLOATS,
        bool: st.booleans(),
        dt.datetime: TIMES,
    }.get(hint, st.lists(st.tuples(INT32, INT32), max_size=3).map(tuple))


def _table(name: str) -> st.SearchStrategy[tuple[Any, ...]]:
    kind = RECORD_TYPES[name]
    hints = typing.get_type_hints(kind)
    fields = {f.name: _typed(hints[f.name]) for f in dataclasses.fields(kind)}
    return st.lists(st.builds(kind, **fields), max_size=5).map(tuple)


SNAPSHOTS = st.builds(
    Snapshot,
    cluster=TEXT,
    collected_at=TIMES,
    errors=st.lists(st.builds(EndpointError, TEXT, st.none() | INT32, TEXT), max_size=2).map(tuple),
    **{name: _table(name) for name in POLLED_TABLES},
)


@props(100)
@given(SNAPSHOTS)
@example(Snapshot(cluster="", collected_at=T0))
def test_the_snapshot_id_digests_exactly_the_documented_input(snapshot: Snapshot) -> None:
    assert snapshot_id(snapshot) == reference_id(snapshot)


def test_texts_are_told_apart_by_their_lengths_and_nulls_from_empty_texts() -> None:
    def with_names(*names: str | None) -> Snapshot:
        topics = tuple(TopicRecord(topic="t", tenant="p", namespace="p/n", bundle=n) for n in names)
        return Snapshot(cluster="c", collected_at=T0, topics=topics)

    ids = {snapshot_id(with_names(*n)) for n in (("ab", "c"), ("a", "bc"), ("", None), (None, ""))}
    assert len(ids) == 4


def test_a_field_no_record_fills_leaves_the_id_as_if_it_did_not_exist() -> None:
    """So an optional field added to a record later keeps the ids of polls without it."""
    filled = Snapshot(cluster="c", collected_at=T0, topics=(TopicRecord("t", "p", "p/n"),))
    one = dataclasses.replace(filled, topics=(TopicRecord("t", "p", "p/n", backlog_size=1),))
    assert snapshot_id(filled) == reference_id(filled) != snapshot_id(one)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_float_json_cannot_spell_is_refused_and_the_store_says_so(
    value: float, tmp_path: Any
) -> None:
    snapshot = Snapshot(
        cluster="c", collected_at=T0, topics=(TopicRecord("t", "p", "p/n", msg_rate_in=value),)
    )
    with pytest.raises(ValueError, match=r"topics\.msg_rate_in"):
        snapshot_id(snapshot)
    with pytest.raises(SnapshotError, match="a value the store cannot hold"):
        Store(tmp_path).write(snapshot)
    assert not any(tmp_path.rglob("*.parquet"))


def test_a_naive_datetime_is_refused_not_read_as_utc() -> None:
    consumer = ConsumerRecord("t", "s", "c", connected_since=dt.datetime(2026, 11, 21, 12))
    with pytest.raises(ValueError, match=r"consumers\.connected_since: a naive datetime"):
        snapshot_id(Snapshot(cluster="c", collected_at=T0, consumers=(consumer,)))
