"""The snapshot store: a Parquet dataset on disk, one folder per table, partitioned by day.

Every table of core.model.TABLES has its own folder, plus `snapshots`, an index with one row
per stored poll. Writes are atomic per file (see core.dataset); a snapshot's index row is
written after its tables, so a snapshot is visible to `read_latest` and `read_history` only
once complete. Time-range reads (`read(since=, until=)`) and compaction leave out the files
of a poll without an index row (its write is under way, or a crash cut it short).

The layout's names and schemas are in `core.storelayout`; the files themselves (which a read
opens, quarantine, compaction, retention) in `core.storefiles`, which `Store` extends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core import dataset
from pulsar_lens.core.digest import snapshot_id
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import EventRecord, Snapshot, content_table, with_common_columns
from pulsar_lens.core.storefiles import StoreFiles
from pulsar_lens.core.storelayout import (
    INDEX,
    INDEX_SCHEMA,
    QUARANTINE,
    READ_ATTEMPTS,
    READ_RETRY_WAIT_S,
    SNAPSHOT_TAG_LENGTH,
    STORE_SCHEMAS,
    STORE_TABLES,
    index_row,
    is_snapshot_tag,
    schema_for,
    spans_any,
    tag,
    time_filter,
    write_failure,
)

__all__ = [
    "INDEX",
    "INDEX_SCHEMA",
    "QUARANTINE",
    "SNAPSHOT_TAG_LENGTH",
    "STORE_SCHEMAS",
    "STORE_TABLES",
    "Store",
    "schema_for",
    "write_failure",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Store(StoreFiles):
    """Snapshot tables under one root folder; see the module docstring for the layout."""

    # -- writing ---------------------------------------------------------------------------

    def write(self, snapshot: Snapshot, *, events: Sequence[EventRecord] = ()) -> str:
        """Write every polled table of the snapshot, its events, then its index row.

        Returns the snapshot id. Writing the same snapshot again replaces its files.
        All or nothing: when any file cannot be written (disk full, a value Arrow refuses)
        the files already written for it are removed and SnapshotError says why.
        """
        try:
            tables = snapshot.content_tables()  # built once: digested, then written
            sid = snapshot_id(snapshot, tables)
        except (ValueError, OverflowError, TypeError, pa.ArrowException) as exc:
            raise SnapshotError(
                f"could not write the snapshot of {snapshot.collected_at.isoformat()} under "
                f"{self.root}: a value the store cannot hold: {write_failure(exc)}",
                path=self.root,
            ) from exc
        written: list[Path] = []
        try:
            self._write(snapshot, sid, tables, events, written)
        except (OSError, ValueError, OverflowError, pa.ArrowException) as exc:
            for path in written:
                # a disk turned read-only midway keeps them: the retry replaces them
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
            raise SnapshotError(
                f"could not write snapshot {tag(sid)} under {self.root}: {write_failure(exc)}",
                path=self.root,
                snapshot_id=sid,
            ) from exc
        return sid

    def _write(
        self,
        snapshot: Snapshot,
        sid: str,
        tables: Mapping[str, pa.Table],
        events: Sequence[EventRecord],
        written: list[Path],
    ) -> None:
        counts: dict[str, int] = {}
        content = dict(tables)
        if events:
            content["events"] = content_table("events", events)
        for name, rows in content.items():
            table = with_common_columns(
                rows, snapshot_id=sid, collected_at=snapshot.collected_at, cluster=snapshot.cluster
            )
            counts[name] = table.num_rows
            written += dataset.write_rows(self._table_path(name), table, tag(sid))
        index = index_row(snapshot, sid, counts)
        written += dataset.write_rows(self._table_path(INDEX), index, tag(sid))

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
            raise SnapshotError(
                f"could not write table {name!r} under {self.root}: {exc}",
                path=self.root,
                table=name,
            ) from exc

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
        index = index.filter(time_filter(since, until)) if since or until else index
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

    # -- reading ---------------------------------------------------------------------------

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Rows of a table, oldest first, from the given snapshots and/or time range.

        `since` and `until` bound `collected_at`, both inclusive. Unknown snapshot ids
        match nothing. `columns` reads only those (and `snapshot_id`, `collected_at` and
        `cluster`, which every read keeps), in the table's order: the others are not
        decoded. KeyError for a column the table does not have.
        """
        wanted = read_columns(name, columns)
        if snapshot_ids is None:
            return self._read(name, None, since, until, columns=wanted)
        found = self._locate(list(dict.fromkeys(snapshot_ids)), since, until)
        if name == INDEX:
            return found if wanted is None else found.select(wanted)
        return self._read_snapshots(name, found, columns=wanted)

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
        tags = {tag(sid) for sid in ids}
        parts: list[pa.Table] = []
        for day in reversed(dataset.list_days(self._table_path(INDEX))):
            if not wanted:
                break
            files = [
                f
                for f in dataset.day_files(self._table_path(INDEX), day)
                if f.overlaps(since, until) and (f.tag in tags or not is_snapshot_tag(f.tag))
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
            found = found.filter(time_filter(since, until))
        return found.sort_by([("collected_at", "ascending")])

    def _read_snapshots(
        self, name: str, index: pa.Table, *, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """The rows of the snapshots listed in index rows, opening only files that may hold them."""
        if index.num_rows == 0:
            empty = schema_for(name).empty_table()
            return empty if columns is None else empty.select(list(columns))
        times = sorted(index["collected_at"].to_pylist())
        ids = index["snapshot_id"].to_pylist()
        return self._read(name, ids, times[0], times[-1], at=times, columns=columns)

    def _read(
        self,
        name: str,
        ids: Sequence[str] | None,
        since: dt.datetime | None,
        until: dt.datetime | None,
        *,
        at: Sequence[dt.datetime] = (),
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Rows in [since, until], of ids if given; with `at`, only files spanning those times;
        of `columns` only when given."""
        schema = schema_for(name)
        expr = time_filter(since, until)
        if ids is not None:
            id_filter = pc.field("snapshot_id").isin(pa.array(ids, pa.string()))
            expr = id_filter if expr is None else expr & id_filter

        def read() -> pa.Table:
            if ids is None:
                files = self.live_files(name, since=since, until=until)
            else:  # rows of indexed polls only: no need to look the files up in the index
                files = dataset.list_files(self._table_path(name), since=since, until=until)
            if at:
                files = [f for f in files if spans_any(f, at)]
            return self._scan(files, schema, expr, columns)

        return by_time(self._listing_again(f"table {name!r}", read))

    def _listing_again(self, what: str, read: Callable[[], T]) -> T:
        """`read()`, listed and read again when a file it listed was gone by the time it was
        opened (a compaction replaced it, retention removed it), up to READ_ATTEMPTS times,
        with a doubling pause between tries so that a housekeeping round deleting files one
        by one can finish."""
        gone = ""
        for attempt in range(READ_ATTEMPTS):
            if attempt:
                self._pause(READ_RETRY_WAIT_S * 2 ** (attempt - 1))
            try:
                return read()
            except FileNotFoundError as exc:
                gone = str(exc.filename or exc)
                log.debug("retrying a read of %s (attempt %d): %s", what, attempt + 1, gone)
        raise SnapshotError(
            f"could not read {what} under {self.root}: files kept moving"
            f" ({READ_ATTEMPTS} tries; the last one missed {gone})",
            path=self.root,
        )

    _pause = staticmethod(time.sleep)


KEPT_COLUMNS = ("snapshot_id", "collected_at", "cluster")
"""Read with any choice of columns: what orders rows (`by_time`), cuts a read into
snapshots and keeps one cluster's rows."""


def read_columns(name: str, columns: Sequence[str] | None) -> list[str] | None:
    """The columns a read of `name` asking for `columns` reads, in the table's order (None:
    all of them); KeyError naming those the table lacks."""
    schema = schema_for(name)
    if columns is None:
        return None
    unknown = sorted(set(columns) - set(schema.names))
    if unknown:
        raise KeyError(f"table {name!r} has no column(s) {unknown}")
    keep = {*columns, *KEPT_COLUMNS}
    return [c for c in schema.names if c in keep]


def by_time(table: pa.Table) -> pa.Table:
    """`table` sorted by `collected_at`, stably; as it is when it already is (files are
    mostly scanned in time order), since the stable sort of a sorted table is the table:
    the sort's `take` of every column was most of a large read's CPU after the scan."""
    times = table["collected_at"]
    if times.null_count == 0:
        stamps = times.combine_chunks().cast(pa.int64()).to_numpy()
        if bool((stamps[1:] >= stamps[:-1]).all()):
            return table
    return table.sort_by([("collected_at", "ascending")])
