"""Arrow tables as pandas frames whose text columns are one Arrow chunk each.

pandas keeps a text column as the Arrow data it was read from (its `str` dtype), chunks and
all: a window of sixty polls read from the store is a column of sixty chunks or more. Arrow
takes rows of a chunked text column (what filtering, sorting and merging a frame does) by
joining its chunks first, every time: a copy of the whole column for each take. At 100,000
topics a pass made some 700 takes, 0.8 s of its 8 s. Joined once here, where the frame is
made, a take copies only the rows taken.

A list column's cells become numpy arrays, as `to_pandas` makes them, but an empty list is
one shared empty array rather than a new one per row: the `hash_ranges` of 2,059,577
consumers at 1,000,000 topics, three with ranges, took 0.5 s to convert and 0.05 s so."""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def _text(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def _list(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def table_frame(table: pa.Table) -> pd.DataFrame:
    """`table.to_pandas()`, its text columns each joined into one chunk first and its list
    columns' empty cells one shared empty array (`list_cells`)."""
    columns = table.columns
    if any(c.num_chunks > 1 and _text(c.type) for c in columns):
        joined = [c.combine_chunks() if c.num_chunks > 1 and _text(c.type) else c for c in columns]
        table = pa.Table.from_arrays(joined, schema=table.schema)
    lists = [f.name for f in table.schema if _list(f.type)]
    if not lists or not table.num_rows:
        return table.to_pandas()
    frame = table.drop_columns(lists).to_pandas()
    for name in lists:
        before = table.column_names[: table.schema.get_field_index(name)]
        frame.insert(sum(n in frame.columns for n in before), name, list_cells(table[name]))
    return frame


def list_cells(column: pa.ChunkedArray) -> npt.NDArray[np.object_]:
    """A list column's cells as `to_pandas` makes them (an array per list, None for null),
    every empty list one `empty_cell`: only the others are converted."""
    full = pc.fill_null(pc.not_equal(pc.list_value_length(column), 0), True)
    rows = np.flatnonzero(full.to_numpy(zero_copy_only=False))
    cells = np.empty(len(column), dtype=object)
    cells.fill(empty_cell(column.type))
    if len(rows):
        cells[rows] = column.take(pa.array(rows)).to_pandas().to_numpy(dtype=object)
    return cells


@functools.cache
def empty_cell(kind: pa.DataType) -> npt.NDArray[np.generic]:
    """An array of the dtype `to_pandas` makes of a list of `kind`, empty: the cell of every
    empty list of that type. Having no elements, it has nothing a plugin could change for
    the others. (Whether `to_pandas`'s cells are writeable depends on the column's chunks,
    here as there.)"""
    cell: npt.NDArray[np.generic] = pa.array([[]], kind).to_pandas()[0].copy()
    return cell
