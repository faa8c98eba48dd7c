"""`core.arrowframes.table_frame`: the frame `to_pandas` gives (values, dtypes, index), with
each text column one Arrow chunk, so that taking rows of it (filtering, sorting, merging)
copies only the rows taken."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from pulsar_lens.core.arrowframes import table_frame


def _chunks(frame: pd.DataFrame, column: str) -> int:
    return int(frame[column].array.__arrow_array__().num_chunks)


@pytest.mark.parametrize("text", [pa.string(), pa.large_string(), pa.string_view()])
def test_text_columns_joined_frame_unchanged(text: pa.DataType) -> None:
    polls = [
        pd.DataFrame(
            {
                "topic": [f"persistent://t/ns/topic-{i}-{poll}" for i in range(5)],
                "backlog": [i * poll for i in range(5)],
                "note": [None, "x", None, "y", "z"] if poll % 2 else [None] * 5,
            },
            index=range(5 * poll, 5 * poll + 5),
        )
        for poll in range(4)
    ]
    table = pa.concat_tables(
        _as_text(pa.Table.from_pandas(f, preserve_index=True), text) for f in polls
    )
    assert table.column("topic").num_chunks == 4
    made = table_frame(table)
    pd.testing.assert_frame_equal(made, table.to_pandas())
    assert list(made.index) == list(range(20))
    for column in ("topic", "note"):
        assert _chunks(made, column) == 1
    kept = made[made["backlog"] > 3]  # a take of the joined columns
    pd.testing.assert_frame_equal(kept, table.to_pandas()[made["backlog"] > 3])


def _as_text(table: pa.Table, text: pa.DataType) -> pa.Table:
    for name in ("topic", "note"):
        at = table.schema.get_field_index(name)
        table = table.set_column(at, pa.field(name, text), table.column(name).cast(text))
    return table


def test_one_chunk_and_empty_tables_as_to_pandas() -> None:
    one = pa.table({"topic": ["a", "b"], "n": [1, 2]})
    pd.testing.assert_frame_equal(table_frame(one), one.to_pandas())
    empty = one.slice(0, 0)
    pd.testing.assert_frame_equal(table_frame(empty), empty.to_pandas())
    numbers = pa.concat_tables([pa.table({"n": [1]}), pa.table({"n": [2]})])
    pd.testing.assert_frame_equal(table_frame(numbers), numbers.to_pandas())
