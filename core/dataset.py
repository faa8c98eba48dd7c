"""The on-disk layout of the store: day partitions, file names, atomic writes, compaction.

    <root>/<table>/date=YYYY-MM-DD/<last>-<first>-<tag>.parquet

`date=` folders are hive partitions (pyarrow.dataset and Spark read them as a `date` column);
the day is the UTC date of `collected_at`. `<last>` and `<first>` are the newest and oldest
`collected_at` in the file (`20261121T120000000000Z`), so a time filter picks files by name
without opening them and names sort by recency. A file is written under a hidden name
(leading `.`, which pyarrow and Spark both skip) and renamed into place, so readers never see
half a file. A compacted file lists the files it replaced in its Parquet metadata; until they
are deleted, listings leave them out. Listings and compaction also take a `keep` test: the
store leaves out the files of a poll whose index row is not written (a write under way, or
one that a crash cut short), so that compaction never folds them into a day for good.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import itertools
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pulsar_lens.core import links

log = logging.getLogger(__name__)

TS_FORMAT = "%Y%m%dT%H%M%S%fZ"
FILE_RE = re.compile(r"^(\d{8}T\d{12}Z)-(\d{8}T\d{12}Z)-([0-9a-z]+)\.parquet$")
DAY_PREFIX = "date="
COMPACT_TAG = "compact"
SOURCES_KEY = b"pulsar_lens.sources"
ROW_GROUP_ROWS = 65_536
COMPRESSION = "zstd"
STALE_TEMP_SECONDS = 3600.0
DAY = dt.timedelta(days=1)
ONE_US = dt.timedelta(microseconds=1)

Keep = Callable[["DataFile"], bool]


def format_ts(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime(TS_FORMAT)


def parse_ts(text: str) -> dt.datetime:
    """The inverse of format_ts (sliced by hand: strptime dominated listing big folders)."""
    return dt.datetime(
        int(text[0:4]),
        int(text[4:6]),
        int(text[6:8]),
        int(text[9:11]),
        int(text[11:13]),
        int(text[13:15]),
        int(text[15:21]),
        tzinfo=dt.UTC,
    )


def day_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class DataFile:
    """A visible Parquet file and the `collected_at` bounds its name and folder promise."""

    path: Path
    day: dt.date
    first: dt.datetime
    last: dt.datetime
    compacted: bool
    tag: str = ""  # the name's last part: a snapshot id prefix, "compact…", "w…"

    def overlaps(self, since: dt.datetime | None, until: dt.datetime | None) -> bool:
        return (since is None or self.last >= since) and (until is None or self.first <= until)


def partition_dir(table_dir: Path, day: dt.date) -> Path:
    return table_dir / f"{DAY_PREFIX}{day.isoformat()}"


def list_days(table_dir: Path) -> list[dt.date]:
    """The day partitions of a table folder, oldest first."""
    days = []
    for name in links.real_names(table_dir):
        entry = table_dir / name
        if name.startswith(DAY_PREFIX) and entry.is_dir():
            try:
                days.append(dt.date.fromisoformat(entry.name[len(DAY_PREFIX) :]))
            except ValueError:
                log.warning("ignoring folder %s: not a date partition", entry)
    return sorted(days)


def describe(path: Path, day: dt.date) -> DataFile:
    start = day_start(day)
    match = FILE_RE.match(path.name)
    if match is not None:
        try:
            last, first = parse_ts(match[1]), parse_ts(match[2])
        except ValueError:
            pass
        else:
            tag = match[3]
            return DataFile(path, day, first, last, tag.startswith(COMPACT_TAG), tag)
    # written by someone else (or misnamed): only the folder bounds its rows
    return DataFile(path, day, start, start + DAY - ONE_US, False)


def _visible(name: str) -> bool:
    return name.endswith(".parquet") and not name.startswith((".", "_"))


def day_files(table_dir: Path, day: dt.date, keep: Keep | None = None) -> list[DataFile]:
    """The live files of one day, oldest first; sources of a compaction are left out, and
    with `keep`, the files it refuses."""
    folder = partition_dir(table_dir, day)
    return _live(folder, day, [n for n in _listdir(folder) if _visible(n)], keep)


def _live(folder: Path, day: dt.date, names: Sequence[str], keep: Keep | None) -> list[DataFile]:
    files = [describe(folder / n, day) for n in names]
    if len(files) > 1 and any(f.compacted for f in files):
        replaced = superseded(files)
        files = [f for f in files if f.path.name not in replaced]
    if keep is not None:
        files = [f for f in files if keep(f)]
    return sorted(files, key=lambda f: (f.last, f.first, f.path.name))


def superseded(files: Sequence[DataFile]) -> set[str]:
    """Names that a compacted file among `files` already holds."""
    replaced: set[str] = set()
    for f in files:
        if f.compacted:
            try:
                metadata = pq.read_schema(f.path).metadata or {}
            except (OSError, pa.ArrowException):  # gone, or not Parquet: the scan says so
                continue
            replaced.update(json.loads(metadata.get(SOURCES_KEY, b"[]")))
    return replaced


def list_files(
    table_dir: Path,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    keep: Keep | None = None,
) -> list[DataFile]:
    """The live files whose rows may fall in [since, until], oldest first (see day_files)."""
    files: list[DataFile] = []
    for day in _days_within(table_dir, since, until):
        files.extend(f for f in day_files(table_dir, day, keep) if f.overlaps(since, until))
    return files


def _days_within(
    table_dir: Path, since: dt.datetime | None, until: dt.datetime | None
) -> Iterator[dt.date]:
    for day in list_days(table_dir):
        start = day_start(day)
        if (since is None or start + DAY > since) and (until is None or start <= until):
            yield day


def write_atomic(
    table: pa.Table, folder: Path, name: str, *, row_group_size: int | None = None
) -> Path:
    """Write table to folder/name through a hidden temporary file and an atomic rename."""

    def write(tmp: Path) -> None:
        pq.write_table(table, tmp, compression=COMPRESSION, row_group_size=row_group_size)

    return publish(folder, name, write)


def publish(folder: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Run write(tmp) on a hidden path in folder, fsync it, then rename it to folder/name."""
    folder.mkdir(parents=True, exist_ok=True)
    links.refuse_link(folder)  # a day folder linked elsewhere would take the rows out of the store
    tmp = folder / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    target = folder / name
    try:
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync(folder)
    return target


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_name(first: dt.datetime, last: dt.datetime, tag: str) -> str:
    return f"{format_ts(last)}-{format_ts(first)}-{tag}.parquet"


def split_by_day(table: pa.Table) -> Iterator[tuple[dt.date, pa.Table]]:
    """The rows of table grouped by the UTC day of `collected_at`."""
    if table.num_rows == 0:
        return
    days = pc.cast(table["collected_at"], pa.date32())
    unique = pc.unique(days).to_pylist()
    if len(unique) == 1:  # a poll's rows: no filtered copy of the whole table
        yield unique[0], table
        return
    for day in unique:
        yield day, table.filter(pc.equal(days, pa.scalar(day, pa.date32())))


def time_bounds(table: pa.Table) -> tuple[dt.datetime, dt.datetime]:
    bounds = pc.min_max(table["collected_at"]).as_py()
    return bounds["min"], bounds["max"]


def write_rows(table_dir: Path, table: pa.Table, tag: str) -> list[Path]:
    """Write table's rows into their day partitions, one new file per day."""
    written = []
    for day, rows in split_by_day(table):
        first, last = time_bounds(rows)
        folder = partition_dir(table_dir, day)
        written.append(write_atomic(rows, folder, file_name(first, last, tag)))
    return written


def scan(
    files: Sequence[DataFile],
    schema: pa.Schema,
    expr: pc.Expression | None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read files (missing columns become nulls) with expr pushed down to row groups; of
    `columns` only (in that order) when given, the others never decoded."""
    if not files:
        empty = schema.empty_table()
        return empty if columns is None else empty.select(list(columns))
    dataset = ds.dataset([str(f.path) for f in files], schema=schema, format="parquet")
    return dataset.to_table(filter=expr, columns=None if columns is None else list(columns))


def read_newest(
    files: Sequence[DataFile], limit: int, read: Callable[[DataFile], pa.Table]
) -> list[pa.Table]:
    """Read files newest first until `limit` rows are surely the newest of all files.

    Rows of an unread file are never newer than its `last`, rows of a read file never older
    than its `first`: once `limit` read rows are newer than the next file's `last`, stop.
    """
    ordered = sorted(files, key=lambda f: (f.last, f.first, f.path.name), reverse=True)
    tables: list[pa.Table] = []
    pending: list[tuple[float, int]] = []
    sure = 0
    for i, f in enumerate(ordered):
        table = read(f)
        tables.append(table)
        heapq.heappush(pending, (-f.first.timestamp(), table.num_rows))
        if i + 1 < len(ordered):
            bound = ordered[i + 1].last.timestamp()
            while pending and -pending[0][0] > bound:
                sure += heapq.heappop(pending)[1]
            if sure >= limit:
                break
    return tables


def compact_day(
    table_dir: Path, day: dt.date, schema: pa.Schema, *, keep: Keep | None = None
) -> int:
    """Merge a day's files into one; return how many files it replaced (0: nothing to do).

    Files whose time ranges do not overlap are streamed in order, one row group at a time;
    overlapping ones are loaded and sorted by `collected_at`. Files `keep` refuses stay as
    they are, outside the merged file.
    """
    remove_replaced(table_dir, day)
    files = day_files(table_dir, day, keep)
    if len(files) < 2:
        return 0
    tag = f"{COMPACT_TAG}{uuid.uuid4().hex[:12]}"
    name = file_name(min(f.first for f in files), max(f.last for f in files), tag)
    sources = json.dumps(sorted(f.path.name for f in files)).encode()
    target_schema = schema.with_metadata({SOURCES_KEY: sources})
    disjoint = all(a.last < b.first for a, b in itertools.pairwise(files))

    def write(tmp: Path) -> None:
        with pq.ParquetWriter(tmp, target_schema, compression=COMPRESSION) as writer:
            if disjoint:
                for chunk in _row_groups(files, schema):
                    writer.write_table(chunk, row_group_size=ROW_GROUP_ROWS)
            else:
                merged = scan(files, schema, None).sort_by([("collected_at", "ascending")])
                writer.write_table(merged, row_group_size=ROW_GROUP_ROWS)

    publish(partition_dir(table_dir, day), name, write)
    remove_replaced(table_dir, day)
    return len(files)


def _row_groups(files: Sequence[DataFile], schema: pa.Schema) -> Iterator[pa.Table]:
    """The rows of files in order, regrouped into tables of about ROW_GROUP_ROWS rows."""
    buffered: list[pa.Table] = []
    size = 0
    for f in files:
        table = scan([f], schema, None)
        buffered.append(table)
        size += table.num_rows
        if size >= ROW_GROUP_ROWS:
            yield pa.concat_tables(buffered)
            buffered, size = [], 0
    if size:
        yield pa.concat_tables(buffered)


def remove_replaced(table_dir: Path, day: dt.date) -> int:
    """Delete files a finished compaction already holds (left behind by a crash)."""
    folder = partition_dir(table_dir, day)
    names = [n for n in _listdir(folder) if _visible(n)]
    files = [describe(folder / n, day) for n in names]
    if not any(f.compacted for f in files):
        return 0
    removed = 0
    for name in superseded(files) & set(names):
        (folder / name).unlink(missing_ok=True)
        removed += 1
    return removed


def remove_before(table_dir: Path, cutoff: dt.datetime) -> int:
    """Delete whole files whose every row is older than cutoff; drop emptied day folders."""
    removed = 0
    for day in list_days(table_dir):
        if day_start(day) >= cutoff:
            break
        folder = partition_dir(table_dir, day)
        for f in (describe(folder / n, day) for n in _listdir(folder) if _visible(n)):
            if f.last < cutoff:
                f.path.unlink(missing_ok=True)
                removed += 1
        if day_start(day) + DAY <= cutoff:
            remove_temps(folder, older_than=0.0)
        with contextlib.suppress(OSError):  # not empty: some rows are young enough to keep
            folder.rmdir()
    return removed


def remove_temps(folder: Path, *, older_than: float = STALE_TEMP_SECONDS) -> int:
    """Delete temporary files that interrupted writes left behind, if older_than seconds."""
    removed = 0
    now = time.time()
    for name in _listdir(folder):
        if name.startswith(".") and name.endswith(".tmp"):
            path = folder / name
            with contextlib.suppress(FileNotFoundError):
                if now - path.stat().st_mtime >= older_than:
                    path.unlink()
                    removed += 1
                    log.info("removed a temporary file an interrupted write left: %s", path)
    return removed


def _listdir(folder: Path) -> list[str]:
    """The names in `folder` but its symbolic links: what they point to is not the store's."""
    return links.real_names(folder)


def count_files(table_dir: Path, day: dt.date) -> int:
    return sum(1 for n in _listdir(partition_dir(table_dir, day)) if _visible(n))
