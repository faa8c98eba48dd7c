"""`core.store.by_time` skips the sort of a table already in time order: whatever the rows,
their chunks and missing times, it gives what the stable sort by `collected_at` gives."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.core.store import by_time

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TIMES = st.lists(st.one_of(st.none(), st.integers(0, 5)), max_size=30)


@given(TIMES, st.integers(1, 4), st.booleans())
def test_by_time_is_the_stable_sort(seconds: list[int | None], chunks: int, ordered: bool) -> None:
    if ordered:
        seconds = sorted(s for s in seconds if s is not None)
    times = [None if s is None else T0 + dt.timedelta(seconds=s) for s in seconds]
    column = pa.array(times, pa.timestamp("us", tz="UTC"))
    table = pa.table({"collected_at": column, "row": pa.array(range(len(times)), pa.int64())})
    step = max(1, len(times) // chunks)
    table = pa.concat_tables([table.slice(i, step) for i in range(0, len(times), step)] or [table])
    assert by_time(table).equals(table.sort_by([("collected_at", "ascending")]))
