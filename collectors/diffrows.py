"""Which rows of two polls the diff (`collectors.events`) must compare, found column-wise.

Between two polls most consumers and subscriptions are unchanged: at 100,000 topics a
tenth of the topics change, and the diff turned every row of both polls into Python values
to find the few keys that differ. When both polls' rows are held as Arrow, `rows_to_compare`
gives each row of both polls one integer for its key and one for its compared fields (each
column's values numbered by Arrow's dictionary encoding, the numbers of a row's columns
numbered again pair by pair), finds the keys that may differ with NumPy's set lookups on
those, and only those keys' rows become Python values. A key is kept when its compared
fields differ, when it is in one poll only, or when it has more than one row in either poll
(its rows are compared as the diff compares them); every other key's rows are the same in
both polls, and the diff would find nothing there.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core.tablerows import HeldColumns, TableRows, columns_of, table_columns


def rows_to_compare(
    before: Sequence[Any],
    after: Sequence[Any],
    names: Sequence[str],
    *,
    key: int,
    compared: int,
    skipped: set[str],
) -> tuple[list[list[Any]], list[list[Any]]]:
    """The values of fields `names` (the topic first) of the rows of both polls that are not
    of a `skipped` topic, as `columns_of` reads them; when both polls are held as Arrow,
    only the rows of the keys (the first `key` names) whose first `compared` fields may
    differ."""
    if not isinstance(before, TableRows | HeldColumns) or not isinstance(
        after, TableRows | HeldColumns
    ):
        return _kept(before, names, skipped), _kept(after, names, skipped)
    old, new = (_without(rows.table.select(list(names)), skipped) for rows in (before, after))
    both = pa.concat_tables([old, new], promote_options="permissive")
    codes = [_codes(both.column(name), ranges=name == "hash_ranges") for name in names]
    keys = _combined(codes[:key])
    rows = _combined([keys, *codes[key:compared]])
    split = old.num_rows
    old_keys, new_keys, old_rows, new_rows = keys[:split], keys[split:], rows[:split], rows[split:]
    maybe = np.concatenate(
        [
            new_keys[~np.isin(new_rows, old_rows)],
            old_keys[~np.isin(old_rows, new_rows)],
            _repeated(old_keys),
            _repeated(new_keys),
        ]
    )
    return (
        table_columns(old.filter(pa.array(np.isin(old_keys, maybe))), names),
        table_columns(new.filter(pa.array(np.isin(new_keys, maybe))), names),
    )


def _kept(rows: Sequence[Any], names: Sequence[str], skipped: set[str]) -> list[list[Any]]:
    """`columns_of` the rows whose topic (the first name) is not skipped."""
    found = columns_of(rows, names)
    if not skipped:
        return found
    keep = [t not in skipped for t in found[0]]
    return [list(compress(values, keep)) for values in found]


def _without(table: pa.Table, skipped: set[str]) -> pa.Table:
    if not skipped or not table.num_rows:
        return table
    gone = pc.is_in(table.column(0), value_set=pa.array(sorted(skipped), pa.string()))
    return table.filter(pc.invert(gone))


def _codes(column: pa.ChunkedArray, *, ranges: bool) -> np.ndarray:
    """One integer per row, the same for rows whose values are the same (null its own
    value; hash ranges as `start-end,...`, no ranges and null alike, as `range_tuples`
    reads them)."""
    values = column.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if ranges:
        values = _ranges_text(values)
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _combined(codes: Sequence[np.ndarray]) -> np.ndarray:
    """One integer per row, the same for rows whose `codes` are all the same."""
    found = codes[0]
    for more in codes[1:]:
        pairs = pa.array((found << 32) | more)
        found = np.asarray(pc.dictionary_encode(pairs).indices.to_numpy(), dtype=np.int64)
    return found


def _ranges_text(column: pa.Array) -> pa.Array:
    """Each row's hash ranges as `start-end,start-end` ('' for none or null)."""
    if not len(column):
        return pa.array([], pa.large_string())
    values = column.flatten()
    pairs = pc.binary_join_element_wise(
        pc.struct_field(values, "start").cast(pa.large_string()),
        pc.struct_field(values, "end").cast(pa.large_string()),
        pa.scalar("-", pa.large_string()),
    )
    offsets = pc.subtract(column.offsets, column.offsets[0])
    lists = pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), pairs)
    return pc.fill_null(pc.binary_join(lists, pa.scalar(",", pa.large_string())), "")


def _repeated(keys: np.ndarray) -> np.ndarray:
    """The keys given more than once."""
    found, counts = np.unique(keys, return_counts=True)
    return found[counts > 1]
