"""A table built from rows given as tuples (what a broker's part makes, never a record) is the
table built from the records those tuples are, cell for cell, for every polled table."""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_lens.core.model import (
    POLLED_TABLES,
    RECORD_TYPES,
    ConsumerRecord,
    content_table,
    row_of,
    rows_content_table,
)

INT64 = st.integers(-(2**63), 2**63 - 1)
RANGES = st.lists(st.tuples(st.integers(0, 65535), st.integers(0, 65535)), max_size=4).map(tuple)
UTC_TIMES = st.datetimes(timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=5))]))


def _values(hint: Any) -> st.SearchStrategy[Any]:
    """Any value a field of this type holds (None where it may)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return st.none() | _values(inner)
    kinds: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=12),
        bool: st.booleans(),
        int: INT64,
        float: st.floats(allow_nan=False),
        dt.datetime: UTC_TIMES,
    }
    return RANGES if typing.get_origin(hint) is tuple else kinds[hint]


def records(name: str) -> st.SearchStrategy[list[Any]]:
    record_type = RECORD_TYPES[name]
    hints = typing.get_type_hints(record_type)
    fields = {f.name: _values(hints[f.name]) for f in dataclasses.fields(record_type)}
    return st.lists(st.builds(record_type, **fields), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_rows_build_the_table_their_records_build(data: st.DataObject) -> None:
    for name in POLLED_TABLES:
        found = data.draw(records(name), label=name)
        rows = [row_of(record) for record in found]
        table = rows_content_table(name, rows)
        assert table.equals(content_table(name, found), check_metadata=True), name
        assert table.schema == content_table(name, found).schema
        assert [type(r)(*row) for r, row in zip(found, rows, strict=True)] == found


def test_a_row_of_another_width_is_refused() -> None:
    row = row_of(ConsumerRecord(topic="t", subscription="s", consumer_name="c"))
    with pytest.raises(ValueError, match="18 fields"):
        rows_content_table("consumers", [row, row[:-1]])


def test_a_naive_time_in_a_row_is_refused_as_in_a_record() -> None:
    record = ConsumerRecord(
        topic="t", subscription="s", consumer_name="c", connected_since=dt.datetime(2026, 1, 1)
    )
    for build, rows in ((content_table, [record]), (rows_content_table, [row_of(record)])):
        with pytest.raises(ValueError, match="naive"):
            build("consumers", rows)  # type: ignore[operator]


def test_no_rows_make_an_empty_table() -> None:
    for name in POLLED_TABLES:
        assert rows_content_table(name, []).equals(content_table(name, []))
