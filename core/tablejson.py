"""Canonical JSON of a table of records, column by column: the bytes `core.digest` spells.

`records_json(records)` returns exactly `canonical_json(records).encode()` for a tuple of
records of one dataclass type, or None when some value is outside what this path spells the
same way (the caller then serialises the table with `canonical_json`). It reads each field
as a column (one `attrgetter` pass), checks the column's value types, and hands the rows to
msgspec as structs whose fields are the record's in sorted order, a None field omitted.

What msgspec spells differently from `json.dumps` is settled here, before it encodes:

* floats: msgspec writes `1e16` and `1e-7` where `json.dumps` writes `1e+16` and `1e-07`.
  Both write the same shortest digits, and the same text for every float that `repr` spells
  without an exponent (0, and 1e-4 <= |x| < 1e16), so only the others become `repr` text.
  NaN and infinities (which msgspec writes as `null`) send the table to canonical_json,
  which refuses them.
* datetimes: msgspec leaves out a zero fraction (`...:00Z`) and writes other zones' offsets
  and years before 1000 otherwise; those become `format_timestamp` text. A UTC datetime
  with microseconds msgspec writes as `format_timestamp` does.
* strings, ints of any size, bools: the same text, non-ASCII kept as UTF-8
  (`tests/props/test_tablejson.py` compares both on random values). Any other type (enums,
  subclasses, mappings, nested records) sends the table to canonical_json.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

_NONE = type(None)
_SCALARS = frozenset({str, int, bool, _NONE})  # spelled alike by both
_NUMBERS = frozenset({float, int, bool, _NONE})
_TIMES = frozenset({dt.datetime, _NONE})
_SEQUENCES = frozenset({tuple, list})
_ENCODER = msgspec.json.Encoder(order="sorted")

_FIELDS: dict[type, tuple[str, ...]] = {}  # a record type -> its field names, sorted
_STRUCTS: dict[tuple[str, ...], type[msgspec.Struct]] = {}  # field names -> a struct of them


def records_json(records: Sequence[Any]) -> bytes | None:
    """`canonical_json(records).encode()` for records of one dataclass type, or None."""
    if not records:
        return b"[]"
    kinds = set(map(type, records))
    if len(kinds) != 1:
        return None
    names = _sorted_fields(kinds.pop())
    if not names:
        return None  # not a dataclass, or one without fields
    present, columns = [], []
    for name in names:
        values = list(map(attrgetter(name), records))
        kinds = set(map(type, values))
        if kinds == {_NONE}:
            continue  # left out of every row: no struct field at all, fewer to build and encode
        column = _column(values, kinds)
        if column is None:
            return None
        present.append(name)
        columns.append(column)
    if not columns:
        return b"[" + b",".join([b"{}"] * len(records)) + b"]"
    try:
        return _ENCODER.encode(list(map(_struct(tuple(present)), *columns)))
    except UnicodeEncodeError:  # a lone surrogate: canonical_json's bytes cannot hold it either
        return None


def _sorted_fields(kind: type) -> tuple[str, ...]:
    if kind not in _FIELDS:
        is_record = dataclasses.is_dataclass(kind) and isinstance(kind, type)
        _FIELDS[kind] = tuple(sorted(f.name for f in dataclasses.fields(kind))) if is_record else ()
    return _FIELDS[kind]


def _struct(names: tuple[str, ...]) -> type[msgspec.Struct]:
    """A struct of these fields, each None by default and then left out (omit_defaults)."""
    if names not in _STRUCTS:
        fields = [(name, Any, None) for name in names]
        _STRUCTS[names] = msgspec.defstruct("Row", fields, omit_defaults=True)
    return _STRUCTS[names]


def _column(values: list[Any], kinds: set[type]) -> list[Any] | None:
    """The column's values as msgspec must get them, or None when it cannot spell them."""
    if kinds <= _SCALARS:
        return values
    if kinds <= _NUMBERS:
        return _floats(values, none=_NONE in kinds)
    if kinds <= _TIMES:
        return _timestamps(values)
    if kinds <= _SEQUENCES | {_NONE} and _plain_items(values):
        return values
    return None


def _floats(values: list[Any], *, none: bool) -> list[Any] | None:
    """Floats that `repr` writes with an exponent as their `repr` text; None on NaN or inf."""
    try:
        numbers = np.array(values, dtype=np.float64)  # None becomes NaN
    except OverflowError:  # an int beyond any float: canonical_json spells it
        return None
    if none and np.count_nonzero(np.isnan(numbers)) != values.count(None):
        return None  # a NaN
    if not none and np.isnan(numbers).any():
        return None
    size = np.abs(numbers)
    odd = np.flatnonzero(((size < 1e-4) | (size >= 1e16)) & (numbers != 0))  # NaN: neither
    if not odd.size:
        return values
    values = values.copy()
    for i in odd.tolist():
        if type(values[i]) is float:  # an int is spelled alike, however large
            if not math.isfinite(values[i]):
                return None
            values[i] = msgspec.Raw(repr(values[i]).encode())
    return values


def _timestamps(values: list[Any]) -> list[Any] | None:
    """Datetimes msgspec would spell otherwise as `format_timestamp` text; None on a naive one."""
    from pulsar_lens.core.digest import format_timestamp  # digest imports this module

    odd = [
        i
        for i, v in enumerate(values)
        if v is not None and (v.microsecond == 0 or v.tzinfo is not dt.UTC or v.year < 1000)
    ]
    if not odd:
        return values
    values = values.copy()
    whole = [i for i in odd if values[i].tzinfo is dt.UTC and values[i].year >= 1000]
    if whole:
        # UTC whole seconds, msgspec's "...:00Z": a fraction added to all at once (what
        # strftime would take 30 times as long to write one by one)
        text = _ENCODER.encode([values[i] for i in whole]).replace(b'Z"', b'.000000Z"')
        for i, stamp in zip(whole, msgspec.json.decode(text), strict=True):
            values[i] = stamp
    try:
        for i in set(odd).difference(whole):
            values[i] = format_timestamp(values[i])
    except ValueError:  # a naive datetime: canonical_json says so
        return None
    return values


def _plain_items(values: list[Any]) -> bool:
    """Whether tuples of tuples of str/int/bool/None (e.g. hash ranges) are all the column holds."""
    outer = [v for v in values if v is not None]
    inner = list(chain.from_iterable(outer))
    if not set(map(type, inner)) <= _SEQUENCES | _SCALARS:
        return False
    leaves = [v for v in inner if type(v) in _SEQUENCES]
    return set(map(type, chain.from_iterable(leaves))) <= _SCALARS
