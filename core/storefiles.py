"""The files of a store: where each table's folder is, which files a read opens, the quarantine
of what does not belong, compaction and retention. `core.store.Store` adds writing and reading.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core import dataset, links
from pulsar_lens.core.dataset import DataFile
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import TABLES
from pulsar_lens.core.storelayout import (
    INDEX,
    INDEX_SCHEMA,
    MAX_CACHED_INDEX_FILES,
    QUARANTINE,
    QUARANTINED,
    STORE_SCHEMAS,
    is_snapshot_tag,
    readable,
    schema_for,
    tag,
)

log = logging.getLogger(__name__)


class StoreFiles:
    """The files under one store's root; see `core.store` for the layout."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._index_cache: dict[Path, pa.Table] = {}

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def table_dir(self, name: str) -> Path:
        schema_for(name)
        return self.root / name

    def _index_file(self, f: DataFile) -> pa.Table:
        """One index file; files never change once named, so each is read once."""
        cached = self._index_cache.get(f.path)
        if cached is None:
            if len(self._index_cache) >= MAX_CACHED_INDEX_FILES:
                self._index_cache.clear()  # compaction and retention leave dead entries
            cached = self._scan([f], INDEX_SCHEMA, None)
            self._index_cache[f.path] = cached
        return cached

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
            if not is_snapshot_tag(f.tag):
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
            if is_snapshot_tag(f.tag):
                tags.add(f.tag)
            else:  # a compacted index file: its rows name the polls it holds
                tags.update(tag(sid) for sid in self._index_file(f)["snapshot_id"].to_pylist())
        return tags

    def _scan(
        self,
        files: Sequence[DataFile],
        schema: pa.Schema,
        expr: pc.Expression | None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Read files (of `columns` only, when given); one that cannot be read as this table
        (random bytes, empty, another schema, a folder) is moved to quarantine/ and the read
        goes on without it."""
        try:
            return dataset.scan(files, schema, expr, columns)
        except (FileNotFoundError, MemoryError):
            raise  # a moved file, or a reader short of memory: no file here is foreign
        except (OSError, pa.ArrowException) as exc:
            bad = [f for f in files if not readable(f.path, schema)]
            if not bad:
                where = ", ".join(str(f.path) for f in files[:3])
                raise SnapshotError(
                    f"unreadable Parquet file among {where}: {exc}", path=files[0].path
                ) from exc
            for f in bad:
                try:
                    self.quarantine(f.path, f"{type(exc).__name__}: {exc}")
                except SnapshotError as refused:  # it stays, and reads go on without it
                    log.warning("%s; reading on without it", refused)
            return self._scan([f for f in files if f not in bad], schema, expr, columns)

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
            raise SnapshotError(f"could not move {path} to quarantine: {exc}", path=path) from exc
        target = folder / f"{relative.name}.{stamp}"
        os.replace(path, target)  # a link is moved itself, never what it points to
        log.warning("moved %s out of the store to %s: %s", path, target, why)
        return target

    def quarantined_files(self) -> int:
        """How many files and folders were moved to quarantine/ so far."""
        folder = self.root / QUARANTINE
        if folder.is_symlink() or not folder.is_dir():
            return 0
        return sum(1 for p in folder.rglob("*") if QUARANTINED.search(p.name))

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
