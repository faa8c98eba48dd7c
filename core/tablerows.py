"""A snapshot table's rows held as Arrow and read as records only when asked (`TableRows`).

The collector builds the large tables of a poll (topics, subscriptions, consumers, draining
hashes) as Arrow in worker processes, one broker at a time; turning them back into a
million Python records would cost what building them in the collect process did. A
`Snapshot` holds them as `TableRows` instead: `len()` and truth read the table, the store
writes the table as it is (`core.model.content_table`), the diff reads its columns, and
anything else that iterates gets the records, made once (`records_from_table`) and kept.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any, overload

import pyarrow as pa

from pulsar_lens.core.model import CONTENT_SCHEMAS, RECORD_TYPES


class TableRows(Sequence[Any]):
    """The rows of table `name` (a `content_table`: the record fields, no common columns)."""

    __slots__ = ("_records", "name", "table")

    def __init__(self, name: str, table: pa.Table) -> None:
        schema = CONTENT_SCHEMAS[name]
        if not table.schema.equals(schema):
            raise ValueError(f"a {name} table must have the columns of its records: {schema}")
        self.name, self.table = name, table
        self._records: tuple[Any, ...] | None = None

    def held_table(self, name: str) -> pa.Table | None:
        """The table these rows are, when they are the rows of `name`."""
        return self.table if name == self.name else None

    def records(self) -> tuple[Any, ...]:
        if self._records is None:
            self._records = records_from_table(self.name, self.table)
        return self._records

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __bool__(self) -> bool:
        return bool(self.table.num_rows)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self.records()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.records())

    def __eq__(self, other: object) -> bool:
        """Equal to the same records in any sequence (a snapshot built either way)."""
        if other is self:
            return True
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(other) == len(self) and tuple(other) == self.records()

    def __hash__(self) -> int:
        return hash(self.records())

    def __repr__(self) -> str:
        return f"TableRows({self.name!r}, {len(self):,} rows)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TableRows, (self.name, self.table))


class HeldColumns(Sequence[Any]):
    """Some columns of the rows of table `name`, kept to be read again with `columns_of`: what
    the collector holds of a poll for the next one's diff. Its rows cannot be made into
    records (nor stored): that is refused, never done with fields missing."""

    __slots__ = ("name", "table")

    def __init__(self, name: str, table: pa.Table) -> None:
        unknown = set(table.column_names) - set(CONTENT_SCHEMAS[name].names)
        if unknown:
            raise ValueError(f"a {name} table has no columns {sorted(unknown)}")
        self.name, self.table = name, table

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __bool__(self) -> bool:
        return bool(self.table.num_rows)

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(
            f"only the columns {self.table.column_names} of these {self.name} rows are held: "
            "read them with columns_of"
        )

    def __repr__(self) -> str:
        return f"HeldColumns({self.name!r}, {self.table.column_names}, {len(self):,} rows)"


def held_columns(name: str, rows: Sequence[Any], names: Sequence[str]) -> Sequence[Any]:
    """Columns `names` of rows held as Arrow, copied so that the others' memory goes with the
    table they came from; rows held as records are small and kept as they are."""
    if not isinstance(rows, TableRows):
        return rows
    if not names:
        return HeldColumns(name, rows.table.select([]))  # its rows counted, nothing held
    columns = {n: rows.table.column(n).combine_chunks() for n in names}
    return HeldColumns(name, pa.table(columns))


def records_from_table(name: str, table: pa.Table) -> tuple[Any, ...]:
    """The records of a table that holds their fields (a stored table, or a `content_table`):
    the inverse of `core.model.records_to_table`."""
    record_type = RECORD_TYPES[name]
    fields = [f.name for f in dataclasses.fields(record_type)]
    rows = table.select(fields).to_pylist()
    return tuple(record_type(**{k: _value(v) for k, v in row.items()}) for row in rows)


def _value(value: Any) -> Any:
    """A stored cell as its record holds it: hash ranges become tuples of (start, end)."""
    if isinstance(value, list):
        return tuple((int(r["start"]), int(r["end"])) for r in value)
    return value


def range_tuples(column: pa.ChunkedArray | pa.Array) -> list[tuple[tuple[int, int], ...]]:
    """A hash-range column as the records hold it, each row a tuple of (start, end), read
    from flat arrays (a null row reads as no ranges, as `content_table` never writes one)."""
    if isinstance(column, pa.ChunkedArray):
        return [r for chunk in column.chunks for r in range_tuples(chunk)]
    offsets = column.offsets.to_pylist()
    values = column.flatten()
    pairs = list(
        zip(values.field("start").to_pylist(), values.field("end").to_pylist(), strict=True)
    )
    base = offsets[0] if offsets else 0
    return [
        tuple(pairs[a - base : b - base]) if b > a else () for a, b in itertools.pairwise(offsets)
    ]


def columns_of(rows: Sequence[Any], names: Sequence[str]) -> list[list[Any]]:
    """The values of fields `names` of every row, as the records hold them: read from the
    table when the rows are held as Arrow (no record is made), else one pass each."""
    if isinstance(rows, TableRows | HeldColumns):
        return table_columns(rows.table, names)
    return [list(map(attrgetter(n), rows)) for n in names]


def table_columns(table: pa.Table, names: Sequence[str]) -> list[list[Any]]:
    """The values of columns `names` of `table` as Python values, hash ranges as records
    hold them."""
    return [
        range_tuples(table.column(n)) if n == "hash_ranges" else table.column(n).to_pylist()
        for n in names
    ]
