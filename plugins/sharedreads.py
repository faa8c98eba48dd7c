"""One read of each table's window per results pass, shared by the plugins that declare it.

After a poll the collect process runs every light plugin on one pinned view of the store
(`plugins.precompute`). Several read the same table over the same snapshots (the newest
poll of `subscriptions` and of `consumers`, read by most of them); reading it from Parquet
once saves the others that read. `SharedReads` is the view those plugins read through, for
one pass (a step's reads, `plugins.steps`, are not planned: they go to the store):

- it keeps the Arrow table a read returned (immutable) only while a plugin still to run in
  the pass declares the same read (`planned_reads`), and drops it once the last of them got
  it, so no table outlives the pass nor the plugins that want it;
- it keeps at most `max_bytes` of tables at once: a read that would go beyond is handed on
  and not kept, and each plugin wanting it reads it again, as without sharing;
- a window inside a longer one of the same table that is kept (the newest poll of
  `consumers` inside the 60 polls an earlier plugin read) is cut from it (`cut`: its rows of
  those snapshots) instead of read; the longer table is then kept while a plugin still to
  run declares it or a window inside it. A longer window is never read for a shorter one;
- a shared read reads the columns every plugin sharing it declares in `columns_of`
  together, or all of them when one declares none: a plugin gets at least its own columns
  and `window.read_tables` keeps only those. A window is cut from a longer one only when the
  longer one reads its columns anyway; otherwise it is read on its own, since widening the
  longer read would read those columns over each of its polls;
- each plugin still gets pandas frames of its own: `window.read_tables` converts the shared
  table per plugin, so a plugin changing its frames (in place, nested values included)
  changes no other plugin's. A third-party plugin runs in a worker process that receives,
  pickled, the frames of the tables it declared, as before.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.plugins.window import (
    ReadKey,
    SnapshotStore,
    read_key,
    snapshot_window,
    table_reads,
)

MAX_SHARED_BYTES = 2 << 30
"""Arrow bytes a pass keeps for later plugins at most (30 polls of `subscriptions` at
100,000 topics, every column, are about 0.9 GB)."""


Columns = frozenset[str] | None
"""The columns a read needs (None: all)."""


def planned_reads(plugin: AnalysisPlugin, store: SnapshotStore) -> dict[ReadKey, Columns]:
    """The store reads loading `plugin`'s declared tables on `store` makes (not those of the
    plugins it requires, which read their stored results), each with the columns it reads."""
    window = snapshot_window(plugin, store)
    return {
        key: None if read.columns is None else frozenset(read.columns)
        for read in table_reads(plugin, window)
        if (key := read.key) is not None
    }


def _union(a: Columns, b: Columns) -> Columns:
    return None if a is None or b is None else a | b


def _covers(kept: Columns, asked: Columns) -> bool:
    """Whether a table read with the columns `kept` holds every column `asked`: a read no
    plugin planned (a step's two polls) may ask for columns the planned readers did not."""
    return kept is None or (asked is not None and asked <= kept)


class SharedReads:
    """`store` for one pass of `plugins`, run in that order, one `advance()` before each:
    a table read is kept while a plugin after the one running declares the same read, or a
    read of some of its snapshots (`containing_reads`)."""

    def __init__(
        self,
        store: SnapshotStore,
        planned: Sequence[Iterable[ReadKey] | Mapping[ReadKey, Columns]],
        *,
        max_bytes: int = MAX_SHARED_BYTES,
    ) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.reads = 0  # tables read from `store`
        self.shared = 0  # reads answered with a kept table
        self.cut = 0  # reads answered with a part of a kept table
        self._planned = deque(set(keys) for keys in planned)
        self._wanted: Counter[ReadKey] = Counter(k for keys in self._planned for k in keys)
        # per read: the columns of all its readers
        self._columns: dict[ReadKey, Columns] = {}
        for keys in planned:
            for key in keys:
                wanted = keys[key] if isinstance(keys, Mapping) else None
                self._columns[key] = _union(self._columns.get(key, frozenset()), wanted)
        # a read is cut from a longer one only when that one reads its columns anyway:
        # widening 30 polls by the columns of a read of 5 (or 1) reads them 30 times over
        self._within = {
            key: longer
            for key, longer in containing_reads(self._wanted).items()
            if _covers(self._columns[longer], self._columns[key])
        }
        # per read: the reads still to come that could be cut from it
        self._inside: Counter[ReadKey] = Counter(
            self._within[k] for keys in self._planned for k in keys if k in self._within
        )
        self._kept: dict[ReadKey, pa.Table] = {}

    def __repr__(self) -> str:
        return f"SharedReads({self.store!r})"

    @property
    def root(self) -> Path | None:
        """The store's folder, where its results are (None for a store without one)."""
        root = getattr(self.store, "root", None)
        return Path(root) if root is not None else None

    @property
    def cluster(self) -> str | None:
        return getattr(self.store, "cluster", None)

    @property
    def kept_bytes(self) -> int:
        return sum(table.nbytes for table in self._kept.values())

    def advance(self) -> None:
        """The next plugin of the pass starts: the tables no plugin from it on wants are
        dropped, and its own reads no longer count as to come."""
        self._kept = {key: table for key, table in self._kept.items() if self._still(key)}
        for key in self._planned.popleft() if self._planned else ():
            self._wanted[key] -= 1
            if key in self._within:
                self._inside[self._within[key]] -= 1

    def _still(self, key: ReadKey) -> bool:
        """Whether a plugin still to come wants this read, or a read cut from it."""
        return self._wanted[key] > 0 or self._inside[key] > 0

    def close(self) -> None:
        """The pass is over (or stopped): drop every table kept."""
        self._kept.clear()
        self._planned.clear()
        self._wanted.clear()
        self._inside.clear()

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame:
        return self.store.snapshots(limit=limit)

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The read, with at least `columns` (all when None): a planned read has the columns
        of every plugin sharing it."""
        key = read_key(name, snapshot_ids=snapshot_ids, since=since)
        asked: Columns = None if columns is None else frozenset(columns)
        table = self._kept.get(key)
        if table is not None and _covers(self._columns.get(key), asked):
            self.shared += 1
            if not self._still(key):  # its last reader: nobody after it declares it
                del self._kept[key]
            return table
        longer = self._within.get(key)
        if (
            longer is not None
            and longer in self._kept
            and _covers(self._columns.get(longer), asked)
        ):
            self.cut += 1
            table = self._kept[longer]
            if not self._still(longer):
                del self._kept[longer]
            return cut(table, key)
        shared = _union(self._columns[key], asked) if key in self._columns else asked
        wanted = None if shared is None else sorted(shared)
        table = self.store.read(name, snapshot_ids=snapshot_ids, since=since, columns=wanted)
        self.reads += 1
        if self._still(key) and self.kept_bytes + table.nbytes <= self.max_bytes:
            self._kept[key] = table
        return table


def containing_reads(keys: Iterable[ReadKey]) -> dict[ReadKey, ReadKey]:
    """For each read of snapshot ids among `keys` whose every snapshot a longer read of the
    same table among them reads too: the longest such read (of equal ones, the first by ids)."""
    by_table: dict[str, list[ReadKey]] = {}
    for key in keys:
        if key[1] is not None and key[2] is None and key[3] is None:
            by_table.setdefault(key[0], []).append(key)
    found: dict[ReadKey, ReadKey] = {}
    for reads in by_table.values():
        reads.sort(key=lambda k: (-len(k[1] or ()), k[1]))
        for key in reads:
            ids = set(key[1] or ())
            for other in reads:
                if len(other[1] or ()) > len(ids) and ids <= set(other[1] or ()):
                    found[key] = other
                    break
    return found


def cut(table: pa.Table, key: ReadKey) -> pa.Table:
    """The rows of `key`'s snapshots in a read of more of them, in its order (by time, as
    `Store.read` returns them): what reading `key` returns."""
    ids = pa.array(list(key[1] or ()), pa.string())
    return table.filter(pc.is_in(table["snapshot_id"], value_set=ids))
