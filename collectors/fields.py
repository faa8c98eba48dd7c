"""Tolerant readers for admin API payload fields: a missing or mistyped field becomes None.

Pulsar adds and renames stats fields between releases; parsers read through these helpers so
an unknown field is ignored and a missing one is None instead of an exception.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from core.model import HashRange

_RANGE_TEXT = re.compile(r"^\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]\s*$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def as_int(payload: Mapping[str, Any], *keys: str) -> int | None:
    """The first of `keys` holding a number, as int (bools are not numbers here)."""
    for key in keys:
        value: Any = payload.get(key)
        kind = type(value)  # exact types: bool is a subclass of int but not a number here
        if kind is int:
            return int(value)
        if kind is float and value.is_integer():
            return int(value)
    return None


def as_float(payload: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = payload.get(key)
        if type(value) is float or type(value) is int:
            return float(value)
    return None


def as_bool(payload: Mapping[str, Any], *keys: str) -> bool | None:
    for key in keys:
        value = payload.get(key)
        if isinstance(value, bool):
            return value
    return None


def as_str(payload: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str):
            return value
    return None


def as_dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else ()


def as_epoch_ms(payload: Mapping[str, Any], key: str) -> dt.datetime | None:
    """A millisecond epoch field as UTC time; 0 and negatives (Pulsar's "never") are None."""
    value = as_int(payload, key)
    if value is None or value <= 0:
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
    return parsed.astimezone(dt.UTC)


def as_json_text(value: Any) -> str | None:
    """A nested object as canonical JSON text (sorted keys), None when absent."""
    if not isinstance(value, Mapping):
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def parse_hash_ranges(consumer: Mapping[str, Any]) -> tuple[HashRange, ...]:
    """A consumer's inclusive hash ranges, sorted.

    Pulsar 4.0 reports `keyHashRangeArrays` ([[start, end], ...]); the classic dispatcher
    and 3.x report `keyHashRanges` as strings like "[2960, 5968]". Malformed items are skipped.
    """
    ranges: list[HashRange] = []
    for item in as_list(consumer.get("keyHashRangeArrays")):
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            ranges.append((item[0], item[1]))
    if not ranges:
        for text in as_list(consumer.get("keyHashRanges")):
            match = _RANGE_TEXT.match(text) if isinstance(text, str) else None
            if match:
                ranges.append((int(match.group(1)), int(match.group(2))))
    return tuple(sorted(ranges))
