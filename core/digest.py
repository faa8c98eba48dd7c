"""The one canonical serialisation of our values, and the digests built on it.

Plugin cache keys are `sha256:<hex>` over `canonical_json()`; snapshot ids are `sha256t:<hex>`
over the snapshot's tables as Arrow (`snapshot_id`). Changing either changes every id: a new
algorithm gets a new prefix and new golden vectors.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from pulsar_lens.core import tabledigest
from pulsar_lens.core.model import POLLED_TABLES, Snapshot

DIGEST_PREFIX = "sha256:"
SNAPSHOT_ID_PREFIX = "sha256t:"
"""Snapshot ids: SHA-256 of the tables' values (`snapshot_id`). Ids written before them are
`sha256:` over canonical JSON (DIGEST_PREFIX); both name a stored poll."""
SNAPSHOT_ID_PREFIXES = (SNAPSHOT_ID_PREFIX, DIGEST_PREFIX)
SNAPSHOT_ID_DOMAIN = b"pulsar-lens snapshot id 2\n"


def format_timestamp(value: dt.datetime) -> str:
    """ISO-8601 in UTC with microseconds and a `Z`, e.g. `2026-11-21T12:00:00.000000Z`.

    Raises ValueError for a naive datetime: its instant is ambiguous.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} has no time zone; use UTC")
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a dataclass -> its field names, in order


def _plain(obj: Any) -> Any:
    """Turn obj into JSON-native values, refusing anything with two possible spellings."""
    # the exact types a snapshot is made of first: a poll of 100,000 topics has millions
    kind = type(obj)
    if obj is None or kind is str or kind is int or kind is bool:
        return obj
    if kind is float:
        return _finite(obj)
    names = _FIELD_NAMES.get(kind)
    if names is not None:
        return _plain_record(obj, names)
    if kind is tuple or kind is list:
        return [_plain(item) for item in obj]
    if isinstance(obj, enum.Enum):
        return _plain(obj.value)
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return _finite(obj)
    if isinstance(obj, dt.datetime):
        return format_timestamp(obj)
    if isinstance(obj, dt.date):
        return obj.isoformat()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = tuple(f.name for f in dataclasses.fields(obj))
        _FIELD_NAMES[kind] = names
        return _plain_record(obj, names)
    if isinstance(obj, Mapping):
        return _plain_mapping(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, bytes | bytearray):
        return [_plain(item) for item in obj]
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):  # a pydantic model, e.g. a plugin's Params
        return _plain(model_dump())
    raise TypeError(f"cannot serialise {type(obj).__name__} canonically")


def _finite(number: float) -> float:
    if not math.isfinite(number):
        raise ValueError(f"{number!r} has no canonical JSON form")
    return number


def _plain_record(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """A dataclass as an object of its fields, minus those that are None."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(obj, name)
        if value is not None:
            out[name] = _plain(value)
    return out


def _plain_mapping(obj: Mapping[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            # json.dumps would turn 1 into "1" and let {1: x} and {"1": x} collide
            raise TypeError(f"mapping keys must be str, got {type(key).__name__} {key!r}")
        out[key] = _plain(value)
    return out


def canonical_json(obj: Any) -> str:
    """Serialise obj as canonical JSON.

    Sorted keys, `,`/`:` separators, non-ASCII kept as UTF-8, datetimes as UTC ISO-8601
    with microseconds, tuples and lists as arrays, dataclasses as objects of their fields
    minus those that are None (so adding an optional field to a record keeps old ids).
    NaN and infinities raise ValueError; naive datetimes raise ValueError; other types
    (bytes, sets, non-str keys) raise TypeError.
    """
    return json.dumps(
        _plain(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(obj: Any) -> str:
    """`sha256:<hex>` of the UTF-8 bytes of `canonical_json(obj)`."""
    data = canonical_json(obj).encode("utf-8")
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def snapshot_id(snapshot: Snapshot, tables: Mapping[str, pa.Table] | None = None) -> str:
    """The id of one poll: `sha256t:<hex>`, a digest of cluster, collected_at, errors and
    every polled table's values.

    `collected_at` is covered so that two polls that saw identical content still get distinct
    ids: the store keys rows, history windows and plugin caches by snapshot id, and folding
    two polls into one would lose a point of every time series. The content is covered so
    that an id names exactly what was seen. `durations` and `requests` are left out: they
    measure our own poll, not the cluster.

    The tables are digested from their Arrow form (`core.tabledigest`), which the store
    builds anyway: pass `tables` (`snapshot.content_tables()`) when you have them. Ids of
    this form replaced `sha256:` over the snapshot's canonical JSON, which cost more than
    building and writing the tables together; stores keep the ids they were written with.
    """
    if tables is None:
        tables = snapshot.content_tables()
    hasher = hashlib.sha256(SNAPSHOT_ID_DOMAIN)
    tabledigest.update_text(hasher, snapshot.cluster)
    tabledigest.update_text(hasher, format_timestamp(snapshot.collected_at))
    tabledigest.update_text(hasher, canonical_json(snapshot.errors))
    for name in sorted(POLLED_TABLES):
        tabledigest.update(hasher, name, tables[name])
    return SNAPSHOT_ID_PREFIX + hasher.hexdigest()


def cache_key(plugin: str, version: str, params: Any, snapshot_ids: Sequence[str]) -> str:
    """The cache key of one plugin run: plugin slug, its version, params, input snapshot ids.

    `params` may be a mapping, a dataclass or a pydantic model (its `model_dump()`).
    Snapshot ids keep the order given; callers pass them oldest first.
    """
    return digest(
        {
            "plugin": plugin,
            "version": version,
            "params": params,
            "snapshot_ids": list(snapshot_ids),
        }
    )
