"""Tolerant readers for admin API payload fields: a missing or mistyped field becomes None.

Pulsar adds and renames stats fields between releases; parsers read through these helpers so
an unknown field is ignored and a missing one is None instead of an exception.

A value no stored column can hold (a count beyond int64, a rate that is not a finite number
below 1e18, a timestamp past the year 9999) also becomes None, and is reported: inside
`field_warnings()` each one adds a line naming where it was read (`reading(topic)`), the
field and the value, which the poll stores among the snapshot's errors.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from core.model import HashRange

_RANGE_TEXT = re.compile(r"^\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]\s*$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_LIMIT = 1e18  # far above any rate or throughput; sums of many stay finite
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, datetime's last millisecond
MAX_WARNINGS = 50
HASH_LIMIT = 2**31 - 1  # the largest hash a range may name (3.0's 31-bit hash; int32 column)
_RANGE_DIGITS = 20  # longer numbers are out of range; int() of thousands of digits is slow

_warnings: ContextVar[list[str] | None] = ContextVar("field_warnings", default=None)
_where: ContextVar[str] = ContextVar("field_where", default="")


@contextmanager
def field_warnings() -> Iterator[list[str]]:
    """Collect the out-of-range fields read inside the block (at most MAX_WARNINGS, then
    one line counting the rest)."""
    found: list[str] = []
    token = _warnings.set(found)
    try:
        yield found
    finally:
        _warnings.reset(token)
        if len(found) > MAX_WARNINGS:
            extra = len(found) - MAX_WARNINGS
            del found[MAX_WARNINGS:]
            found.append(f"... and {extra} more out-of-range field(s)")


@contextmanager
def reading(where: str) -> Iterator[None]:
    """Name what the fields read inside the block belong to (e.g. a topic)."""
    token = _where.set(where)
    try:
        yield
    finally:
        _where.reset(token)


def warn(text: str) -> None:
    """Report something read and left out (inside `field_warnings()`, else nothing)."""
    found = _warnings.get()
    if found is not None:
        where = _where.get()
        found.append(f"{where + ': ' if where else ''}{text}")


def shown(value: Any) -> str:
    """A payload value as a warning quotes it: repr, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _out_of_range(key: str, value: Any, why: str) -> None:
    warn(f"{key}={shown(value)} {why}; stored as null")


def as_int(payload: Mapping[str, Any], *keys: str) -> int | None:
    """The first of `keys` holding a number that fits int64, as int (bools are not numbers)."""
    for key in keys:
        value: Any = payload.get(key)
        kind = type(value)  # exact types: bool is a subclass of int but not a number here
        number = value
        if kind is float and math.isfinite(value) and value.is_integer():
            kind, number = int, int(value)
        if kind is int:
            if INT64_MIN <= number <= INT64_MAX:
                return int(number)
            _out_of_range(key, value, "does not fit a 64-bit integer")
        elif kind is float and not math.isfinite(value):
            _out_of_range(key, value, "is not a finite number")
    return None


def as_float(payload: Mapping[str, Any], *keys: str) -> float | None:
    """The first of `keys` holding a finite number below 1e18 in magnitude, as float."""
    for key in keys:
        value = payload.get(key)
        if type(value) is float or type(value) is int:
            number = float(value) if abs(value) < 1e300 else math.inf
            if math.isfinite(number) and abs(number) < FLOAT_LIMIT:
                return number
            _out_of_range(key, value, f"is not a finite number below {FLOAT_LIMIT:g}")
    return None


def as_bool(payload: Mapping[str, Any], *keys: str) -> bool | None:
    for key in keys:
        value = payload.get(key)
        if isinstance(value, bool):
            return value
    return None


def as_str(payload: Mapping[str, Any], *keys: str) -> str | None:
    """The first of `keys` holding text, made storable (see `as_text`)."""
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str):
            return as_text(value, key)
    return None


def as_text(value: str, what: str = "a name") -> str:
    """`value` as storable UTF-8 text: a lone surrogate (what a JSON `\\ud800` escape
    decodes to; no UTF-8 encoder takes it) is written as its escape `\\ud800`, and reported."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        text = value.encode("utf-8", "backslashreplace").decode("utf-8")
        warn(f"{what}={shown(text)} is not valid text; its lone surrogates are kept escaped")
        return text
    return value


def as_dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else ()


def as_epoch_ms(payload: Mapping[str, Any], key: str) -> dt.datetime | None:
    """A millisecond epoch field as UTC time; 0 and negatives (Pulsar's "never") are None."""
    value = as_int(payload, key)
    if value is None or value <= 0:
        return None
    if value > MAX_EPOCH_MS:
        _out_of_range(key, value, "is past the year 9999 as epoch milliseconds")
        return None
    return _EPOCH + dt.timedelta(milliseconds=value)


def as_iso_time(payload: Mapping[str, Any], key: str) -> dt.datetime | None:
    """An ISO-8601 field (e.g. connectedSince, nanosecond digits allowed) as UTC time."""
    text = as_str(payload, key)
    if not text:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        return parsed.astimezone(dt.UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00 is before year 1 in UTC
        _out_of_range(key, text, "is outside the years 1 to 9999 in UTC")
        return None


def as_json_text(value: Any) -> str | None:
    """A nested object as canonical JSON text (sorted keys), None when absent."""
    if not isinstance(value, Mapping):
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def parse_hash_ranges(consumer: Mapping[str, Any]) -> tuple[HashRange, ...]:
    """A consumer's inclusive hash ranges, sorted.

    Pulsar 4.0 reports `keyHashRangeArrays` ([[start, end], ...]); the classic dispatcher
    and 3.x report `keyHashRanges` as strings like "[2960, 5968]". Malformed items are skipped;
    so are ranges no hash can form (start > end, or outside 0..2^31-1, the 3.0 hash's span and
    the stored int32), and those are reported.
    """
    ranges: list[HashRange] = []
    for item in as_list(consumer.get("keyHashRangeArrays")):
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            _add_range(ranges, item[0], item[1], "keyHashRangeArrays")
    if not ranges:
        for text in as_list(consumer.get("keyHashRanges")):
            match = _RANGE_TEXT.match(text) if isinstance(text, str) else None
            if match and max(len(match.group(1)), len(match.group(2))) <= _RANGE_DIGITS:
                _add_range(ranges, int(match.group(1)), int(match.group(2)), "keyHashRanges")
            elif match:
                warn(f"keyHashRanges item {shown(text)} is out of range; left out")
    return tuple(sorted(ranges))


def _add_range(ranges: list[HashRange], start: int, end: int, key: str) -> None:
    if 0 <= start <= end <= HASH_LIMIT:
        ranges.append((start, end))
    else:
        warn(f"{key} item [{start}, {end}] is not a range of 0..{HASH_LIMIT}; left out")
