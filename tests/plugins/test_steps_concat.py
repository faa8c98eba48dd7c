"""Kept steps put together (`plugins.steps._concat`): tables of one schema are joined in Arrow
and converted once, which must give the frame that converting each and concatenating them in
pandas gives, whatever the columns (missing values in some steps only, whole numbers with and
without gaps, text, times, flags, categories, pandas' nullable dtypes); and a frame stored
empty is read from its schema alone (`results.read_tables`), as the whole table reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pulsar_lens.api import Result
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.steps import _concat


def _frame(rng: np.random.Generator, rows: int, kind: int) -> pd.DataFrame:
    """A frame of every kind of column a step makes; `kind` varies which values are missing
    and which pandas dtypes hold them, so some steps' tables differ in schema."""
    gaps = rng.random(rows) < (0.3 if kind % 2 else 0.0)
    whole = pd.Series(rng.integers(0, 100, rows), dtype="int64")
    text = pd.Series([f"t{i}" for i in rng.integers(0, 5, rows)], dtype=object)
    flags = pd.Series(rng.random(rows) < 0.5, dtype=object)
    frame = pd.DataFrame(
        {
            "whole": whole.where(~gaps) if kind % 2 else whole,
            "text": text.where(~gaps, None),
            "at": pd.to_datetime(rng.integers(0, 10**9, rows), unit="s", utc=True),
            "flag": flags.where(~gaps, None) if kind % 3 == 0 else flags.astype(bool),
            "ratio": rng.random(rows),
        }
    )
    if kind % 4 == 1:
        frame["whole"] = frame["whole"].astype("Int64")
    if kind % 5 == 2:
        frame["text"] = frame["text"].astype("category")
    return frame


@pytest.mark.parametrize("seed", range(40))
def test_tables_joined_in_arrow_equal_frames_joined_in_pandas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    same = seed % 2 == 0  # every step's frame of one kind, or of several
    frames = [
        _frame(rng, int(rng.choice([0, 0, 1, 3, 20])), 4 if same else int(rng.integers(0, 8)))
        for _ in range(int(rng.integers(1, 9)))
    ]
    tables = [pa.Table.from_pandas(frame, preserve_index=False) for frame in frames]
    full = [table.to_pandas() for table in tables if table.num_rows]
    expected = (
        pd.concat(full, ignore_index=True)
        if len(full) > 1
        else full[0]
        if full
        else tables[0].to_pandas()
    )
    pd.testing.assert_frame_equal(_concat(tables), expected)


def test_a_frame_stored_empty_reads_from_its_schema_as_the_whole_table(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "store", folder="steps")
    (tmp_path / "store").mkdir()
    frames = {
        "empty": _frame(np.random.default_rng(1), 0, 5),
        "full": _frame(np.random.default_rng(2), 4, 5),
    }
    stored = StoredResult(
        plugin="p",
        version="1",
        params={},
        snapshot_ids=("a", "b"),
        status="ok",
        seconds=0.1,
        result=Result(frames=frames),
    )
    entry = store.write(stored)
    tables = store.read_tables("p", "1", {}, ("a", "b"))
    assert tables is not None
    for name in frames:
        whole = pq.read_table(entry / f"{name}.parquet")
        assert tables[name].schema.equals(whole.schema, check_metadata=True)
        pd.testing.assert_frame_equal(tables[name].to_pandas(), whole.to_pandas())
    assert tables["empty"].num_rows == 0 and tables["full"].num_rows == 4
    assert store.read_tables("p", "1", {}, ("a",)) is None  # another step: none kept
