"""The snapshot store: a Parquet dataset on disk, one folder per table, partitioned by day.

Every table of core.model.TABLES has its own folder, plus `snapshots`, an index with one row
per stored poll. Writes are atomic per file (see core.dataset); a snapshot's index row is
written after its tables, so a snapshot is visible to `read_latest` and `read_history` only
once complete. Time-range reads (`read(since=, until=)`) and compaction leave out the files
of a poll without an index row (its write is under way, or a crash cut it short).
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import errno
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core import dataset, links
from pulsar_lens.core.dataset import DataFile
from pulsar_lens.core.digest import canonical_json, snapshot_id
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import (
    COMMON_FIELDS,
    POLLED_TABLES,
    SCHEMAS,
    TABLES,
    UTC_TS,
    EventRecord,
    Snapshot,
    records_to_table,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

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
READ_ATTEMPTS = 3
QUARANTINE = "quarantine"
_QUARANTINED = re.compile(r"\.\d{8}T\d{12}Z$")
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


def _tag(sid: str) -> str:
    """The short id a snapshot's files carry in their names."""
    return sid.partition(":")[2][:SNAPSHOT_TAG_LENGTH]


class Store:
    """Snapshot tables under one root folder; see the module docstring for the layout."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._index_cache: dict[Path, pa.Table] = {}

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def table_dir(self, name: str) -> Path:
        schema_for(name)
        return self.root / name

    # -- writing ---------------------------------------------------------------------------

    def write(self, snapshot: Snapshot, *, events: Sequence[EventRecord] = ()) -> str:
        """Write every polled table of the snapshot, its events, then its index row.

        Returns the snapshot id. Writing the same snapshot again replaces its files.
        All or nothing: when any file cannot be written (disk full, a value Arrow refuses)
        the files already written for it are removed and SnapshotError says why.
        """
        sid = snapshot_id(snapshot)
        written: list[Path] = []
        try:
            self._write(snapshot, sid, events, written)
        except (OSError, ValueError, OverflowError, pa.ArrowException) as exc:
            for path in written:
                # a disk turned read-only midway keeps them: the retry replaces them
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
            raise SnapshotError(
                f"could not write snapshot {_tag(sid)} under {self.root}: {write_failure(exc)}"
            ) from exc
        return sid

    def _write(
        self, snapshot: Snapshot, sid: str, events: Sequence[EventRecord], written: list[Path]
    ) -> None:
        counts: dict[str, int] = {}
        tables = {name: snapshot.records(name) for name in POLLED_TABLES}
        if events:
            tables["events"] = tuple(events)
        for name, records in tables.items():
            table = records_to_table(
                name,
                records,
                snapshot_id=sid,
                collected_at=snapshot.collected_at,
                cluster=snapshot.cluster,
            )
            counts[name] = table.num_rows
            written += dataset.write_rows(self._table_path(name), table, _tag(sid))
        index = _index_row(snapshot, sid, counts)
        written += dataset.write_rows(self._table_path(INDEX), index, _tag(sid))

    def write_table(self, name: str, table: pa.Table) -> None:
        """Append rows to a table (e.g. probes, key_samples); they must match its schema."""
        schema = schema_for(name)
        if set(table.column_names) != set(schema.names):
            missing = sorted(set(schema.names) - set(table.column_names))
            extra = sorted(set(table.column_names) - set(schema.names))
            raise ValueError(f"table {name!r}: missing columns {missing}, unexpected {extra}")
        conformed = table.select(schema.names).cast(schema)
        try:
            dataset.write_rows(self._table_path(name), conformed, "w" + os.urandom(8).hex())
        except OSError as exc:
            raise SnapshotError(f"could not write table {name!r} under {self.root}: {exc}") from exc

    # -- the index -------------------------------------------------------------------------

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame:
        """The index, oldest first: the newest `limit` snapshots, or all of them."""
        return self._index(limit=limit).to_pandas()

    def latest_snapshot_id(self) -> str | None:
        index = self._index(limit=1)
        return str(index["snapshot_id"][0].as_py()) if index.num_rows else None

    def _index(
        self,
        *,
        limit: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> pa.Table:
        tables = self._listing_again(
            "the index", lambda: self._index_tables(limit=limit, since=since, until=until)
        )
        index = pa.concat_tables([INDEX_SCHEMA.empty_table(), *tables])
        index = index.filter(_time_filter(since, until)) if since or until else index
        index = index.sort_by([("collected_at", "ascending")])
        return index.slice(max(0, index.num_rows - limit)) if limit is not None else index

    def _index_tables(
        self, *, limit: int | None, since: dt.datetime | None, until: dt.datetime | None
    ) -> list[pa.Table]:
        if limit is not None:
            return self._newest_index_tables(limit)
        files = dataset.list_files(self._table_path(INDEX), since=since, until=until)
        return [self._index_file(f) for f in files]

    def _newest_index_tables(self, limit: int) -> list[pa.Table]:
        """Index files of the newest days, newest first, until `limit` rows are surely in."""
        tables: list[pa.Table] = []
        found = 0
        for day in reversed(dataset.list_days(self._table_path(INDEX))):
            if found >= limit:
                break  # every row of an older day is older than every row found
            files = dataset.day_files(self._table_path(INDEX), day)
            day_tables = dataset.read_newest(files, limit - found, self._index_file)
            tables.extend(day_tables)
            found += sum(t.num_rows for t in day_tables)
        return tables

    def _index_file(self, f: DataFile) -> pa.Table:
        """One index file; files never change once named, so each is read once."""
        cached = self._index_cache.get(f.path)
        if cached is None:
            if len(self._index_cache) >= MAX_CACHED_INDEX_FILES:
                self._index_cache.clear()  # compaction and retention leave dead entries
            cached = self._scan([f], INDEX_SCHEMA, None)
            self._index_cache[f.path] = cached
        return cached

    # -- reading ---------------------------------------------------------------------------

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> pa.Table:
        """Rows of a table, oldest first, from the given snapshots and/or time range.

        `since` and `until` bound `collected_at`, both inclusive. Unknown snapshot ids
        match nothing.
        """
        schema_for(name)
        if snapshot_ids is None:
            return self._read(name, None, since, until)
        found = self._locate(list(dict.fromkeys(snapshot_ids)), since, until)
        if name == INDEX:
            return found
        return self._read_snapshots(name, found)

    def read_latest(self, name: str) -> pa.Table:
        """The rows of the newest stored snapshot (empty if it had none)."""
        return self.read_history(name, snapshots=1)

    def read_history(self, name: str, *, snapshots: int) -> pa.Table:
        """The rows of the newest `snapshots` stored snapshots, oldest first."""
        schema_for(name)
        index = self._index(limit=snapshots)
        if name == INDEX:
            return index
        return self._read_snapshots(name, index)

    def _locate(
        self, ids: Sequence[str], since: dt.datetime | None, until: dt.datetime | None
    ) -> pa.Table:
        """The index rows of these snapshot ids, searching the newest days first.

        A snapshot's own index file carries its id's tag in its name, so only those files,
        compacted ones and foreign ones are opened.
        """
        wanted = set(ids)
        tags = {_tag(sid) for sid in ids}
        parts: list[pa.Table] = []
        for day in reversed(dataset.list_days(self._table_path(INDEX))):
            if not wanted:
                break
            files = [
                f
                for f in dataset.day_files(self._table_path(INDEX), day)
                if f.overlaps(since, until) and (f.tag in tags or not _is_snapshot_tag(f.tag))
            ]
            for f in files:
                rows = self._index_file(f)
                rows = rows.filter(
                    pc.is_in(rows["snapshot_id"], pa.array(sorted(wanted), pa.string()))
                )
                wanted -= set(rows["snapshot_id"].to_pylist())
                parts.append(rows)
        found = pa.concat_tables([INDEX_SCHEMA.empty_table(), *parts])
        if since or until:
            found = found.filter(_time_filter(since, until))
        return found.sort_by([("collected_at", "ascending")])

    def _read_snapshots(self, name: str, index: pa.Table) -> pa.Table:
        """The rows of the snapshots listed in index rows, opening only files that may hold them."""
        if index.num_rows == 0:
            return schema_for(name).empty_table()
        times = sorted(index["collected_at"].to_pylist())
        return self._read(name, index["snapshot_id"].to_pylist(), times[0], times[-1], at=times)

    def _read(
        self,
        name: str,
        ids: Sequence[str] | None,
        since: dt.datetime | None,
        until: dt.datetime | None,
        *,
        at: Sequence[dt.datetime] = (),
    ) -> pa.Table:
        """Rows in [since, until], of ids if given; with `at`, only files spanning those times."""
        schema = schema_for(name)
        expr = _time_filter(since, until)
        if ids is not None:
            id_filter = pc.field("snapshot_id").isin(pa.array(ids, pa.string()))
            expr = id_filter if expr is None else expr & id_filter

        def read() -> pa.Table:
            if ids is None:
                files = self.live_files(name, since=since, until=until)
            else:  # rows of indexed polls only: no need to look the files up in the index
                files = dataset.list_files(self._table_path(name), since=since, until=until)
            if at:
                files = [f for f in files if _spans_any(f, at)]
            return self._scan(files, schema, expr)

        table = self._listing_again(f"table {name!r}", read)
        return table.sort_by([("collected_at", "ascending")])

    def _listing_again(self, what: str, read: Callable[[], T]) -> T:
        """`read()`, listed and read again when a file it listed was gone by the time it was
        opened (a compaction replaced it, retention removed it), up to READ_ATTEMPTS times."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return read()
            except FileNotFoundError:
                log.debug("retrying a read of %s (attempt %d)", what, attempt + 1)
        raise SnapshotError(f"could not read {what} under {self.root}: files kept moving")

    def live_files(
        self,
        name: str,
        *,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> list[DataFile]:
        """The files of table `name` a read of [since, until] opens, oldest first: neither
        the sources of a finished compaction, nor the files of a poll without an index row,
        nor a symbolic link below the root (`core.links`). Spark's reader reads just these."""
        keep = None if name == INDEX else self._indexed()
        return dataset.list_files(self._table_path(name), since=since, until=until, keep=keep)

    def _indexed(self) -> Callable[[DataFile], bool]:
        """Whether a file holds no poll's rows (probes, a foreign file) or those of a poll
        whose index row is written; each day's index is looked at once, when first needed."""
        tags: dict[dt.date, set[str]] = {}

        def keep(f: DataFile) -> bool:
            if not _is_snapshot_tag(f.tag):
                return True
            if f.day not in tags:
                tags[f.day] = self._indexed_tags(f.day)
            return f.tag in tags[f.day]

        return keep

    def _indexed_tags(self, day: dt.date) -> set[str]:
        """The name tags of the polls of one day that have an index row (a poll's rows and
        its index row share `collected_at`, hence the day)."""
        tags: set[str] = set()
        for f in dataset.day_files(self._table_path(INDEX), day):
            if _is_snapshot_tag(f.tag):
                tags.add(f.tag)
            else:  # a compacted index file: its rows name the polls it holds
                tags.update(_tag(sid) for sid in self._index_file(f)["snapshot_id"].to_pylist())
        return tags

    def _scan(
        self, files: Sequence[DataFile], schema: pa.Schema, expr: pc.Expression | None
    ) -> pa.Table:
        """Read files; one that cannot be read as this table (random bytes, empty, another
        schema, a folder) is moved to quarantine/ and the read goes on without it."""
        try:
            return dataset.scan(files, schema, expr)
        except (FileNotFoundError, MemoryError):
            raise  # a moved file, or a reader short of memory: no file here is foreign
        except (OSError, pa.ArrowException) as exc:
            bad = [f for f in files if not _readable(f.path, schema)]
            if not bad:
                where = ", ".join(str(f.path) for f in files[:3])
                raise SnapshotError(f"unreadable Parquet file among {where}: {exc}") from exc
            for f in bad:
                try:
                    self.quarantine(f.path, f"{type(exc).__name__}: {exc}")
                except SnapshotError as refused:  # it stays, and reads go on without it
                    log.warning("%s; reading on without it", refused)
            return self._scan([f for f in files if f not in bad], schema, expr)

    def quarantine(self, path: Path, why: str) -> Path:
        """Move a file (or folder) that does not belong in the store aside, under
        quarantine/, keeping its place in the name; readers then go on without it."""
        relative = path.relative_to(self.root)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        try:
            links.refuse_links_below(
                self.root, relative.parent
            )  # else the move would leave the store
            folder = links.real_folder(self.root, Path(QUARANTINE, *relative.parent.parts))
        except OSError as exc:
            raise SnapshotError(f"could not move {path} to quarantine: {exc}") from exc
        target = folder / f"{relative.name}.{stamp}"
        os.replace(path, target)  # a link is moved itself, never what it points to
        log.warning("moved %s out of the store to %s: %s", path, target, why)
        return target

    def quarantined_files(self) -> int:
        """How many files and folders were moved to quarantine/ so far."""
        folder = self.root / QUARANTINE
        if folder.is_symlink() or not folder.is_dir():
            return 0
        return sum(1 for p in folder.rglob("*") if _QUARANTINED.search(p.name))

    def _table_path(self, name: str) -> Path:
        """The folder of table `name`, after moving aside a file that took its name."""
        path = self.root / name
        if path.is_symlink():
            self.quarantine(path, "a symbolic link where the table's folder belongs")
        elif path.exists() and not path.is_dir():
            self.quarantine(path, "a file where the table's folder belongs")
        return path

    # -- housekeeping ----------------------------------------------------------------------

    def days(self, name: str) -> list[dt.date]:
        """The day partitions a table has, oldest first."""
        return dataset.list_days(self.table_dir(name))

    def compact(self, day: dt.date) -> int:
        """Merge each table's files of one day into one file; return files replaced. Files of
        a poll without an index row stay out (see `live_files`)."""
        indexed = self._indexed()
        return sum(
            dataset.compact_day(
                self._table_path(name), day, schema, keep=None if name == INDEX else indexed
            )
            for name, schema in STORE_SCHEMAS.items()
        )

    def compact_closed(self, *, before: dt.date, stop: Callable[[], bool] | None = None) -> int:
        """Compact every day before `before` that still has several files per table. When
        `stop()` turns true, the day under way is finished and the rest left for later."""
        replaced = 0
        indexed = self._indexed()
        for name, schema in STORE_SCHEMAS.items():
            table_dir = self._table_path(name)
            keep = None if name == INDEX else indexed
            for day in dataset.list_days(table_dir):
                if stop is not None and stop():
                    return replaced
                if day < before and dataset.count_files(table_dir, day) > 1:
                    replaced += dataset.compact_day(table_dir, day, schema, keep=keep)
        return replaced

    def apply_retention(self, *, max_age: dt.timedelta, now: dt.datetime | None = None) -> int:
        """Delete files whose rows are all older than max_age (index rows included).

        Works on whole files: a compacted day straddling the cutoff stays until all of its
        rows are old. Returns the number of data files removed.
        """
        cutoff = (now or dt.datetime.now(dt.UTC)) - max_age
        removed = 0
        # the index first: a crash midway leaves rows without an index row, which reads
        # leave out, never an index row whose rows are gone
        for name in (INDEX, *TABLES):
            table_dir = self._table_path(name)
            removed += dataset.remove_before(table_dir, cutoff)
            for day in dataset.list_days(table_dir):
                dataset.remove_temps(dataset.partition_dir(table_dir, day))
        return removed


def write_failure(exc: BaseException) -> str:
    """Why a write failed, in one line: the errno's name first when the system gave one
    (`ENOSPC: No space left on device`), without the temporary file's name."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None:
        # pyarrow raises its own OSError text: "[Errno 28] Error writing bytes ... Detail: ..."
        found = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
        code = int(found[1]) if found else None
    if code is not None and code in errno.errorcode:
        return f"{errno.errorcode[code]}: {os.strerror(code)}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _readable(path: Path, schema: pa.Schema) -> bool:
    """Whether one file reads as the table; running out of memory proves nothing about
    the file, so that error goes up instead of a verdict."""
    try:
        dataset.scan([dataset.describe(path, dt.date(1970, 1, 1))], schema, None)
    except MemoryError:
        raise
    except (OSError, pa.ArrowException):
        return False
    return True


def _is_snapshot_tag(tag: str) -> bool:
    return len(tag) == SNAPSHOT_TAG_LENGTH and all(c in "0123456789abcdef" for c in tag)


def _spans_any(f: DataFile, times: Sequence[dt.datetime]) -> bool:
    """Whether one of the sorted times lies within the file's [first, last]."""
    i = bisect.bisect_left(times, f.first)
    return i < len(times) and times[i] <= f.last


def _time_filter(since: dt.datetime | None, until: dt.datetime | None) -> pc.Expression | None:
    expr: pc.Expression | None = None
    if since is not None:
        expr = pc.field("collected_at") >= _ts(since)
    if until is not None:
        upper = pc.field("collected_at") <= _ts(until)
        expr = upper if expr is None else expr & upper
    return expr


def _index_row(snapshot: Snapshot, sid: str, counts: Mapping[str, int]) -> pa.Table:
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
