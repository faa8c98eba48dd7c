"""A digest of Arrow tables by their values, column by column: what a snapshot id covers.

`update(hasher, name, table)` feeds `hasher` the table's name, its row count and, for each
column in name order, the column's name, its Arrow type, which rows are null and the values
of the others, each piece prefixed with its length (so `["ab", "c"]` and `["a", "bc"]`
differ). Values go in as fixed-width little-endian numbers (a timestamp its microseconds, a
bool one byte), texts as their UTF-8 bytes after their lengths, lists as their lengths and
then their items' columns, structs field by field. A null's value is not fed (its slot is
zeroed first): only the rows' values count, never how Arrow laid them out (chunks, offsets,
the bytes under a null).

A column every row of which is null is left out, name and all, so a record field added later
and not yet filled keeps the ids of the tables that do not have it. NaN and infinities are
refused (ValueError), as canonical JSON refuses them.

Written for the tables `core.model.content_table` builds; any other type is refused
(TypeError) rather than digested in a way nobody wrote down.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LENGTH = struct.Struct("<Q")


def update(hasher: Any, name: str, table: pa.Table) -> None:
    """Feed `hasher` (a hashlib object) the digest input of table `name`."""
    _piece(hasher, name.encode("utf-8"))
    _piece(hasher, _LENGTH.pack(table.num_rows))
    for column_name in sorted(table.column_names):
        column = table[column_name]
        if column.null_count == len(column):
            continue  # no row has it: as if the table had no such column
        _piece(hasher, column_name.encode("utf-8"))
        _piece(hasher, str(column.type).encode("utf-8"))
        for part in _parts(column.combine_chunks(), f"{name}.{column_name}"):
            _piece(hasher, part)


def _piece(hasher: Any, data: bytes | memoryview) -> None:
    hasher.update(_LENGTH.pack(len(data)))
    hasher.update(data)


def _parts(array: pa.Array, where: str) -> Iterator[bytes | memoryview]:
    """Which rows are null (packed bits, empty when none is), then the values' pieces."""
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    yield np.packbits(valid, bitorder="little").tobytes() if array.null_count else b""
    kind = array.type
    if pa.types.is_string(kind):
        yield from _texts(pc.fill_null(array, ""))
    elif pa.types.is_list(kind):
        lengths = pc.fill_null(pc.list_value_length(array), 0)
        yield _numbers(lengths.to_numpy(zero_copy_only=False), "<i8")
        yield from _parts(array.flatten(), where)
    elif pa.types.is_struct(kind):
        for child in array.flatten():
            yield from _parts(child, where)
    elif pa.types.is_boolean(kind):
        yield _numbers(pc.fill_null(array, False).to_numpy(zero_copy_only=False), "u1")
    elif pa.types.is_integer(kind) or (pa.types.is_timestamp(kind) and kind.unit == "us"):
        yield _numbers(_filled(array, pa.int64()), "<i8")
    elif pa.types.is_float64(kind):
        values = _filled(array, kind)
        if not np.isfinite(values).all():
            raise ValueError(f"{where}: NaN or an infinity has no digest; the store refuses it")
        yield _numbers(values, "<f8")
    else:
        raise TypeError(f"{where}: no digest for Arrow type {kind}")


def _filled(array: pa.Array, as_type: pa.DataType) -> np.ndarray:
    """The values as numbers of `as_type`, a null's slot zero."""
    values = array.cast(as_type) if array.type != as_type else array
    filled: np.ndarray = pc.fill_null(values, pa.scalar(0, as_type)).to_numpy(zero_copy_only=False)
    return filled


def _numbers(values: np.ndarray, dtype: str) -> bytes:
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def _texts(array: pa.Array) -> Iterator[bytes | memoryview]:
    """The texts' byte lengths, then their UTF-8 bytes end to end."""
    offsets = np.frombuffer(array.buffers()[1], dtype="<i4")[
        array.offset : array.offset + len(array) + 1
    ]
    yield _numbers(np.diff(offsets), "<i8")
    data = array.buffers()[2]
    yield b"" if data is None else memoryview(data)[int(offsets[0]) : int(offsets[-1])]


def update_text(hasher: Any, text: str) -> None:
    """Feed `hasher` one text, length first."""
    _piece(hasher, text.encode("utf-8"))
