"""`core.arrowframes.table_frame`: the frame `to_pandas` gives (values, dtypes, index), with
each text column one Arrow chunk, so that taking rows of it (filtering, sorting, merging)
copies only the rows taken."""

from __future__ import annotations

import random

import pandas as pd
import pyarrow as pa
import pytest

from pulsar_lens.core.arrowframes import empty_cell, table_frame


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


RANGE = pa.struct([("start", pa.int32()), ("end", pa.int32())])


@pytest.mark.parametrize("kind", [pa.list_(RANGE), pa.large_list(RANGE), pa.list_(pa.int64())])
def test_list_columns_as_to_pandas_their_empty_cells_one_array(kind: pa.DataType) -> None:
    rng = random.Random(7)

    def cell() -> list[object] | None:
        shape = rng.choice(["null", "empty", "empty", "some"])
        if shape == "null":
            return None
        count = 0 if shape == "empty" else rng.randint(1, 3)
        if pa.types.is_struct(kind.value_type):
            return [{"start": rng.randint(0, 9), "end": rng.randint(10, 99)} for _ in range(count)]
        return [rng.randint(0, 99) for _ in range(count)]

    polls = [
        pd.DataFrame(
            {
                "topic": [f"t-{i}-{poll}" for i in range(6)],
                "ranges": [cell() for _ in range(6)],
                "n": range(6),
            },
            index=range(6 * poll, 6 * poll + 6),
        )
        for poll in range(3)
    ]
    table = pa.concat_tables(
        pa.Table.from_pandas(
            f,
            schema=pa.schema([("topic", pa.string()), ("ranges", kind), ("n", pa.int64())]),
            preserve_index=True,
        )
        for f in polls
    )
    made, plain = table_frame(table), table.to_pandas()
    assert list(made.columns) == list(plain.columns)
    assert list(made.index) == list(plain.index)
    assert made.dtypes.equals(plain.dtypes)
    pd.testing.assert_frame_equal(made.drop(columns="ranges"), plain.drop(columns="ranges"))
    for ours, theirs in zip(made["ranges"], plain["ranges"], strict=True):
        if theirs is None:
            assert ours is None
        else:
            assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
            assert ours.tolist() == theirs.tolist()
            if not len(theirs):
                assert ours is empty_cell(kind)


def test_a_list_column_alone_and_empty() -> None:
    only = pa.table({"ranges": pa.array([[], [1], None], pa.list_(pa.int64()))})
    made = table_frame(only)
    assert [c if c is None else c.tolist() for c in made["ranges"]] == [[], [1], None]
    empty = only.slice(0, 0)
    pd.testing.assert_frame_equal(table_frame(empty), empty.to_pandas())
