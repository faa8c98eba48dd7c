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
import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pulsar_lens.collectors.notes import Notes, cut, duplicates_of, noting, refuse, shown, within
from pulsar_lens.core.model import HashRange

_RANGE_TEXT = re.compile(r"^\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]\s*$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_LIMIT = 1e18  # far above any rate or throughput; sums of many stay finite
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, datetime's last millisecond
MAX_WARNINGS = 50
HASH_LIMIT = 2**31 - 1  # the largest hash a range may name (3.0's 31-bit hash; int32 column)
_RANGE_DIGITS = 20  # longer numbers are out of range; int() of thousands of digits is slow
MAX_HASH_ITEMS = 65_536
"""Hash ranges, or draining hashes, of one consumer read from an answer: the sticky-key hash
space is 0..65535, so no consumer owns more ranges or drains more distinct hashes."""
MAX_TEXT = 8_192
"""Characters of a name or text read from an answer. A broker reads an admin request line
within `httpMaxRequestHeaderSize` (8 KiB by default), so no longer topic or subscription
name can be administered; consumer names and other texts get the same bound."""
_ABSENT = object()


@dataclass
class WarningLines:
    """The warning lines of one block: the first MAX_WARNINGS kept, the rest only counted."""

    found: list[str] = field(default_factory=list)
    extra: int = 0

    def add(self, other: WarningLines) -> None:
        """`other`'s lines after these, as if read after them in one block."""
        room = max(0, MAX_WARNINGS - len(self.found))
        self.found.extend(other.found[:room])
        self.extra += max(0, len(other.found) - room) + other.extra

    @property
    def total(self) -> int:
        return len(self.found) + self.extra

    def lines(self) -> list[str]:
        more = [f"... and {self.extra} more out-of-range field(s)"] if self.extra else []
        return [*self.found, *more]


_warnings: ContextVar[WarningLines | None] = ContextVar("field_warnings", default=None)
_where: ContextVar[str] = ContextVar("field_where", default="")


@contextmanager
def field_warning_lines(notes: Notes | None = None) -> Iterator[WarningLines]:
    """Collect the out-of-range fields read inside the block (at most MAX_WARNINGS, then
    only counted), and the items refused or cut into `notes` when given."""
    lines = WarningLines()
    token = _warnings.set(lines)
    try:
        with noting(notes) if notes is not None else nullcontext():
            yield lines
    finally:
        _warnings.reset(token)


@contextmanager
def field_warnings(notes: Notes | None = None) -> Iterator[list[str]]:
    """`field_warning_lines` as the lines a snapshot's errors hold (one counting the rest)."""
    found: list[str] = []
    try:
        with field_warning_lines(notes) as lines:
            yield found
    finally:
        found.extend(lines.lines())


def add_warnings(other: WarningLines) -> None:
    """`other`'s lines (read elsewhere, e.g. in a worker process) into the current block."""
    lines = _warnings.get()
    if lines is not None:
        lines.add(other)


class reading:
    """Name what the fields read inside the block belong to (e.g. a topic)."""

    __slots__ = ("inner", "token", "where")

    def __init__(self, where: str) -> None:
        self.where = where
        self.inner = within(where)

    def __enter__(self) -> None:
        self.token = _where.set(self.where)
        self.inner.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__()
        _where.reset(self.token)


def warn(text: str) -> None:
    """Report something read and left out (inside `field_warnings()`, else nothing)."""
    lines = _warnings.get()
    if lines is None:
        return
    if len(lines.found) >= MAX_WARNINGS:
        lines.extra += 1  # counted, not kept: a million bad values make no million lines
        return
    where = _where.get()
    lines.found.append(f"{where + ': ' if where else ''}{text}")


def _out_of_range(key: str, value: Any, why: str) -> None:
    warn(f"{key}={shown(value)} {why}; stored as null")


def as_int(payload: Mapping[str, Any], *keys: str) -> int | None:
    """The first of `keys` holding a number that fits int64, as int (bools are not numbers)."""
    for key in keys:
        value: Any = payload.get(key)
        kind = type(value)  # exact types: bool is a subclass of int but not a number here
        if kind is int and INT64_MIN <= value <= INT64_MAX:  # the usual case, first
            return value  # type: ignore[no-any-return]
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
        if type(value) is float and -FLOAT_LIMIT < value < FLOAT_LIMIT:  # the usual case
            return value
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
            return bounded(as_text(value, key), key)
    return None


def bounded(text: str, what: str) -> str:
    """`text` cut to MAX_TEXT characters when longer: its start, "…" and a digest of the
    whole, so two long names that share a start stay two names (and the same one each poll)."""
    if len(text) <= MAX_TEXT:
        return text
    cut(what, f"is longer than {MAX_TEXT:,} characters: cut to its start and a digest", text)
    tail = "…" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return text[: MAX_TEXT - len(tail)] + tail


def as_text(value: str, what: str = "a name") -> str:
    """`value` as storable UTF-8 text: a lone surrogate (what a JSON `\\ud800` escape
    decodes to; no UTF-8 encoder takes it) is written as its escape `\\ud800`, and reported."""
    if value.isascii():  # the usual case, and no surrogate is ASCII
        return value
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
    return iso_time(as_str(payload, key), key)


def iso_time(text: str | None, key: str) -> dt.datetime | None:
    """`as_iso_time` of a text already read (`key` names it in a warning)."""
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


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (for a refusal's reason)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def as_items(
    payload: Mapping[str, Any], key: str, what: str, *, limit: int | None = None
) -> Sequence[Any]:
    """The list `payload[key]`, at most `limit` items (the rest cut, and said); () when
    absent, and refused when it is not a list. `what` names it in the refusal."""
    value = payload.get(key, _ABSENT)
    if value is _ABSENT:
        return ()
    if not isinstance(value, list):
        refuse(what, f"is {json_kind(value)}, not a list; left out")
        return ()
    if limit is not None and len(value) > limit:
        cut(what, f"has more than {limit:,} items; the first {limit:,} kept", len(value))
        return value[:limit]
    return value


def as_object(payload: Mapping[str, Any], key: str, what: str) -> Mapping[str, Any]:
    """The object `payload[key]`; {} when absent, and refused when it is not an object."""
    value = payload.get(key, _ABSENT)
    if value is _ABSENT:
        return {}
    if not isinstance(value, Mapping):
        refuse(what, f"is {json_kind(value)}, not an object; left out")
        return {}
    return value


def check_keys(value: Mapping[str, Any], what: str) -> None:
    """Refuse the earlier values of keys an answer's object held twice (the last is kept)."""
    for key in duplicates_of(value):
        refuse(what, "holds a key twice; its earlier value left out", key)


def parse_hash_ranges(consumer: Mapping[str, Any]) -> tuple[HashRange, ...]:
    """A consumer's inclusive hash ranges, sorted.

    Pulsar 4.0 reports `keyHashRangeArrays` ([[start, end], ...]); the classic dispatcher
    and 3.x report `keyHashRanges` as strings like "[2960, 5968]". At most MAX_HASH_ITEMS of
    each are read. Malformed items are refused, and so are ranges no hash can form (start >
    end, or outside 0..2^31-1, the 3.0 hash's span and the stored int32).
    """
    ranges: list[HashRange] = []
    arrays = "consumer keyHashRangeArrays"
    for item in as_items(consumer, "keyHashRangeArrays", arrays, limit=MAX_HASH_ITEMS):
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            _add_range(ranges, item[0], item[1], arrays)
        else:
            refuse(f"{arrays} item", "is not [start, end] of two whole numbers; left out", item)
    if not ranges:
        texts = "consumer keyHashRanges"
        for text in as_items(consumer, "keyHashRanges", texts, limit=MAX_HASH_ITEMS):
            match = _RANGE_TEXT.match(text) if isinstance(text, str) else None
            if match and max(len(match.group(1)), len(match.group(2))) <= _RANGE_DIGITS:
                _add_range(ranges, int(match.group(1)), int(match.group(2)), texts)
            elif match:
                refuse(f"{texts} item", f"is not a range of 0..{HASH_LIMIT}; left out", text)
            else:
                refuse(f"{texts} item", 'is not a text "[start, end]"; left out', text)
    return tuple(sorted(ranges))


def _add_range(ranges: list[HashRange], start: int, end: int, what: str) -> None:
    if 0 <= start <= end <= HASH_LIMIT:
        ranges.append((start, end))
    else:
        refuse(f"{what} item", f"is not a range of 0..{HASH_LIMIT}; left out", [start, end])
