"""The store's layout: its tables and their schemas, the index row, the names its files carry,
and the small pure helpers its reads and writes share (`core.store` is the store itself)."""

from __future__ import annotations

import bisect
import datetime as dt
import errno
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core import dataset
from pulsar_lens.core.dataset import DataFile
from pulsar_lens.core.digest import canonical_json
from pulsar_lens.core.model import COMMON_FIELDS, SCHEMAS, TABLES, UTC_TS, Snapshot

INDEX = "snapshots"
INDEX_SCHEMA = pa.schema(
    [
        *COMMON_FIELDS,
        pa.field("partial", pa.bool_(), nullable=False),
        pa.field("errors_json", pa.string()),  # [{"endpoint","message","status"}, ...]
        pa.field("requests", pa.int64()),
        pa.field("durations_json", pa.string()),  # {"endpoint family": seconds}
        pa.field("row_counts_json", pa.string()),  # {"topics": 1234, ...}
    ]
)
STORE_SCHEMAS: Mapping[str, pa.Schema] = {**SCHEMAS, INDEX: INDEX_SCHEMA}
STORE_TABLES: tuple[str, ...] = (*TABLES, INDEX)
# a read that met a file retention or compaction removed lists again, after a pause that
# doubles from READ_RETRY_WAIT_S (at most 0.02 + 0.04 + ... + 0.32 s = 0.62 s in all), so that a
# housekeeping round that is deleting files finishes first
READ_ATTEMPTS = 6
READ_RETRY_WAIT_S = 0.02
QUARANTINE = "quarantine"
QUARANTINED = re.compile(r"\.\d{8}T\d{12}Z$")
MAX_CACHED_INDEX_FILES = 20_000
SNAPSHOT_TAG_LENGTH = 16  # hex digits of the snapshot id in its files' names


def schema_for(name: str) -> pa.Schema:
    try:
        return STORE_SCHEMAS[name]
    except KeyError:
        known = ", ".join(STORE_TABLES)
        raise KeyError(f"unknown table {name!r}; expected one of {known}") from None


def _ts(value: dt.datetime) -> pa.Scalar:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()}: pass an aware UTC datetime")
    return pa.scalar(value, type=UTC_TS)


def tag(sid: str) -> str:
    """The short id a snapshot's files carry in their names."""
    return sid.partition(":")[2][:SNAPSHOT_TAG_LENGTH]


def write_failure(exc: BaseException) -> str:
    """Why a write failed, in one line: the errno's name first when the system gave one
    (`ENOSPC: No space left on device`), without the temporary file's name.

    pyarrow's write errors carry the errno as a field too: it raises an I/O failure of the
    system as `OSError(28, "Error writing bytes to file. Detail: [errno 28] ...")` (pyarrow
    26; tests/core/test_store.py provokes one), so no error's text is read here."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is not None and code in errno.errorcode:
        return f"{errno.errorcode[code]}: {os.strerror(code)}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def readable(path: Path, schema: pa.Schema) -> bool:
    """Whether one file reads as the table; running out of memory proves nothing about
    the file, so that error goes up instead of a verdict."""
    try:
        dataset.scan([dataset.describe(path, dt.date(1970, 1, 1))], schema, None)
    except MemoryError:
        raise
    except (OSError, pa.ArrowException):
        return False
    return True


def is_snapshot_tag(tag: str) -> bool:
    return len(tag) == SNAPSHOT_TAG_LENGTH and all(c in "0123456789abcdef" for c in tag)


def spans_any(f: DataFile, times: Sequence[dt.datetime]) -> bool:
    """Whether one of the sorted times lies within the file's [first, last]."""
    i = bisect.bisect_left(times, f.first)
    return i < len(times) and times[i] <= f.last


def time_filter(since: dt.datetime | None, until: dt.datetime | None) -> pc.Expression | None:
    expr: pc.Expression | None = None
    if since is not None:
        expr = pc.field("collected_at") >= _ts(since)
    if until is not None:
        upper = pc.field("collected_at") <= _ts(until)
        expr = upper if expr is None else expr & upper
    return expr


def index_row(snapshot: Snapshot, sid: str, counts: Mapping[str, int]) -> pa.Table:
    return pa.table(
        {
            "snapshot_id": [sid],
            "collected_at": [snapshot.collected_at],
            "cluster": [snapshot.cluster],
            "partial": [snapshot.partial],
            "errors_json": [canonical_json(snapshot.errors)],
            "requests": [snapshot.requests],
            "durations_json": [canonical_json(snapshot.durations)],
            "row_counts_json": [canonical_json(counts)],
        },
        schema=INDEX_SCHEMA,
    )
