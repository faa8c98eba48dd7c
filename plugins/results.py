"""Stored analysis results: each plugin's `Result` for one snapshot, computed once, read by all.

After each poll the collect process runs every loaded plugin with its default parameters and
writes what came out here (`plugins.precompute`); the dashboard, `/metrics` and `pulsar-lens
analyze` then read it instead of analysing the cluster again. A failed run is stored too, as
that plugin's failure for that snapshot.

Layout, inside the snapshot store: `results/<slug>/<key>/` holding `meta.json`, one
`<frame>.parquet` per output frame (`<frame>.arrow`, an Arrow IPC file, in a store of
`frame_format` "arrow": meta.json's `format` says which) and, when a param has more than
INLINE_CHOICES allowed values, `param.choices.parquet` with those lists. `key` is
`pulsar_lens.core.digest.cache_key(slug, version, params, snapshot ids)`, so a new plugin
version, other parameters or another snapshot window never read a stale result. Each entry is
written into a hidden sibling folder and renamed into place: a reader sees a whole entry or
none. Entries whose newest snapshot has left the store (retention) are pruned.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pulsar_lens.api import Result
from pulsar_lens.core import links
from pulsar_lens.core.digest import cache_key
from pulsar_lens.core.secrets import redact

log = logging.getLogger(__name__)

RESULTS_DIR = "results"
META = "meta.json"
CHOICES = "param.choices.parquet"  # a frame's file name never holds a "." before ".parquet"
INLINE_CHOICES = 100
"""The most allowed values of one param that meta.json keeps itself. Longer lists (every topic
of a cluster: a million names, 40 MB of JSON) go to CHOICES and are read only when asked for:
meta.json is read for every listing, pruning and `/metrics` scrape, and a page needs only the
count of a list too long for a select box."""
Status = Literal["ok", "failed"]
FrameFormat = Literal["parquet", "arrow"]
ARROW_WRITE = pa.ipc.IpcWriteOptions(compression="zstd")


@dataclass(frozen=True)
class StoredResult:
    """One stored run: what it was computed from, and its result or its failure."""

    plugin: str
    version: str
    params: Mapping[str, Any]
    snapshot_ids: tuple[str, ...]
    status: Status
    seconds: float
    result: Result | None = None  # set when status is "ok"
    error: str | None = None  # set when status is "failed"
    failure: Mapping[str, Any] | None = None  # its fields (`PluginError.to_json`), if any
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)  # param_choices()
    computed_at: str | None = None  # ISO time the entry was written (set by `write`)
    choices_error: str | None = None  # why param_choices() failed, when it did


def result_key(
    plugin: str, version: str, params: Mapping[str, Any], snapshot_ids: Sequence[str]
) -> str:
    """The key of a stored result (the same key as the runner's in-memory cache)."""
    return cache_key(plugin, version, dict(params), snapshot_ids)


class ResultStore:
    """The `results/` folder of a snapshot store."""

    def __init__(
        self,
        store_root: str | os.PathLike[str],
        *,
        folder: str = RESULTS_DIR,
        frame_format: FrameFormat = "parquet",
    ) -> None:
        """`folder`: another folder of the store in this layout (`plugins.steps`).
        `frame_format`: how the frames this store writes are kept; "arrow" (zstd-compressed
        Arrow IPC) reads small frames in half the time Parquet takes or less, and writes them
        no slower, for a store read back whole every pass (the steps); every entry is read in
        the format it was written in."""
        self.folder = folder
        self.root = Path(store_root) / folder
        self.frame_format = frame_format

    def __repr__(self) -> str:
        return f"ResultStore({str(self.root)!r})"

    def _entry(self, plugin: str, key: str) -> Path:
        return self.root / plugin / key

    def write(self, stored: StoredResult) -> Path:
        """Write one entry atomically (replacing an older copy of the same key)."""
        key = result_key(stored.plugin, stored.version, stored.params, stored.snapshot_ids)
        final = self._entry(stored.plugin, key)
        # made level by level: a linked results/ or plugin folder would take it out of the store
        folder = links.real_folder(self.root.parent, Path(self.folder, stored.plugin))
        staging = folder / f".{key}.{os.urandom(6).hex()}"
        staging.mkdir()
        try:
            frames = stored.result.frames if stored.result is not None else {}
            for name, frame in frames.items():
                table = pa.Table.from_pandas(_without_attrs(frame))
                _write_table(table, staging, name, self.frame_format)
            meta = _meta(stored, list(frames))
            meta["format"] = self.frame_format
            _write_choices(staging / CHOICES, stored.choices, meta)
            meta["computed_at"] = stored.computed_at or dt.datetime.now(dt.UTC).isoformat()
            (staging / META).write_text(json.dumps(meta, default=_plain))
            if final.is_symlink():
                final.unlink()  # the link only: what it points to is not the store's
            elif final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return final

    def read(
        self,
        plugin: str,
        version: str,
        params: Mapping[str, Any],
        snapshot_ids: Sequence[str],
        *,
        lazy: bool = False,
    ) -> StoredResult | None:
        """The stored entry for exactly these inputs, or None (absent, unreadable, or behind
        a symbolic link). `lazy`: each frame is read when it is first used (`StoredFrames`)."""
        entry = self._unlinked_entry(plugin, result_key(plugin, version, params, snapshot_ids))
        return None if entry is None else _load(entry, lazy=lazy)

    def read_tables(
        self, plugin: str, version: str, params: Mapping[str, Any], snapshot_ids: Sequence[str]
    ) -> dict[str, pa.Table] | None:
        """The frames of the stored entry for exactly these inputs as Arrow tables, as they
        were written, or None (absent, unreadable, behind a symbolic link, or failed): for a
        reader that puts many entries' frames together before converting them once."""
        entry = self._unlinked_entry(plugin, result_key(plugin, version, params, snapshot_ids))
        if entry is None:
            return None
        try:
            meta = json.loads((entry / META).read_text())
            if meta["status"] != "ok":
                return None
            return {name: _table(entry, meta, name) for name in map(str, meta["frames"])}
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged entry is a miss, recomputed, never a crash
            log.warning("stored result %s is unreadable (%s); it will be recomputed", entry, exc)
            return None

    def _unlinked_entry(self, plugin: str, key: str) -> Path | None:
        """The folder of entry `key`, or None when a symbolic link is on its way (warned)."""
        try:
            links.refuse_links_below(self.root.parent, Path(self.folder, plugin, key))
        except links.LinkRefused as exc:
            links.warn_link(exc.path)
            return None
        return self._entry(plugin, key)

    def newest(
        self,
        plugin: str,
        version: str,
        params: Mapping[str, Any],
        *,
        among: Collection[str] | None = None,
        lazy: bool = False,
    ) -> StoredResult | None:
        """The most recently computed entry of `plugin` at `version` with `params`, whatever
        snapshots it read (a Spark job's result stays shown until the next one lands); given
        `among` (one cluster's snapshot ids), of those snapshots only. `lazy` as for `read`."""
        wanted = None if among is None else set(among)
        mine = [
            (str(meta.get("computed_at") or ""), entry)
            for entry, meta in self.entries(plugin)
            if meta.get("version") == version
            and meta.get("params") == dict(params)
            and _read_from(meta, wanted)
        ]
        for _, entry in sorted(mine, key=lambda pair: pair[0], reverse=True):
            stored = _load(entry, lazy=lazy)
            if stored is not None:
                return stored
        return None

    def keep_newest(self, plugin: str, keep: int, *, among: Collection[str] | None = None) -> int:
        """Delete all but the `keep` most recently computed entries of `plugin` for each
        (version, params); how many went. Spark jobs read every poll, so each run is a new
        entry: this bounds them. Given `among` (one cluster's snapshot ids), only the entries
        of those snapshots count, so one cluster's runs never push out another's."""
        wanted = None if among is None else set(among)
        groups: dict[str, list[tuple[str, Path]]] = {}
        for entry, meta in self.entries(plugin):
            if not _read_from(meta, wanted):
                continue
            group = json.dumps([meta.get("version"), meta.get("params")], sort_keys=True)
            groups.setdefault(group, []).append((str(meta.get("computed_at") or ""), entry))
        removed = 0
        for entries in groups.values():
            for _, entry in sorted(entries, key=lambda pair: pair[0], reverse=True)[keep:]:
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
        return removed

    def entries(self, plugin: str | None = None) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """Every readable entry (of `plugin`, when given) with its metadata (hidden staging
        folders and symbolic links skipped)."""
        for plugin_name in sorted(links.real_names(self.root)):
            plugin_dir = self.root / plugin_name
            if not plugin_dir.is_dir() or plugin_name.startswith("."):
                continue
            if plugin is not None and plugin_name != plugin:
                continue
            # links are left out: pruning deletes entries, and never what a link points to
            for name in sorted(links.real_names(plugin_dir)):
                entry = plugin_dir / name
                if name.startswith("."):
                    continue
                try:
                    yield entry, json.loads((entry / META).read_text())
                except (OSError, ValueError):
                    continue

    def prune(self, live_snapshot_ids: Collection[str], *, plugin: str | None = None) -> int:
        """Delete entries (of `plugin`, when given) whose newest snapshot is not among
        `live_snapshot_ids`; how many went."""
        removed = 0
        for entry, meta in list(self.entries(plugin)):
            ids = meta.get("snapshot_ids") or []
            if ids and ids[-1] not in live_snapshot_ids:
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
        return removed


def _without_attrs(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` without `attrs` (a Spark Connect frame carries its plan metrics there, which
    Arrow cannot store and warns about)."""
    if not frame.attrs:
        return frame
    bare = frame.copy(deep=False)
    bare.attrs = {}
    return bare


def _write_table(table: pa.Table, folder: Path, name: str, frame_format: FrameFormat) -> None:
    if frame_format == "arrow":
        path = str(folder / f"{_safe(name)}.arrow")
        with (
            pa.OSFile(path, "wb") as sink,
            pa.ipc.new_file(sink, table.schema, options=ARROW_WRITE) as writer,
        ):
            writer.write_table(table)
    else:
        pq.write_table(table, folder / f"{_safe(name)}.parquet")


def _table(entry: Path, meta: Mapping[str, Any], name: str) -> pa.Table:
    """Frame `name` of the entry in folder `entry` (`meta`: its meta.json) as its Arrow table,
    in the format meta.json names (Parquet when it names none: entries written before there
    was a choice). A Parquet frame stored empty is read from its schema alone (a schema reads
    in a fifth of a table's time), and read as one file, not as a dataset of one file
    (`pq.read_table`), which costs more than most small files take to read."""
    if meta.get("format") == "arrow":
        with pa.OSFile(str(entry / f"{_safe(name)}.arrow")) as source:
            return pa.ipc.open_file(source).read_all()
    with pq.ParquetFile(entry / f"{_safe(name)}.parquet") as stored:
        if (meta.get("rows") or {}).get(name) == 0:
            return stored.schema_arrow.empty_table()
        return stored.read()


def _load(entry: Path, *, lazy: bool = False) -> StoredResult | None:
    """The entry in folder `entry`, or None (absent or unreadable); with `lazy`, its frames
    are read when first used (a frame unreadable by then raises `StoredFrameError`)."""
    try:
        meta = json.loads((entry / META).read_text())
        names = [str(name) for name in meta["frames"]]
        frames: Mapping[str, pd.DataFrame] = (
            StoredFrames(entry, meta)
            if lazy
            else {name: _table(entry, meta, name).to_pandas() for name in names}
        )
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged entry is a miss, recomputed, never a crash
        log.warning("stored result %s is unreadable (%s); it will be recomputed", entry, exc)
        return None
    ok = meta["status"] == "ok"
    return StoredResult(
        plugin=str(meta["plugin"]),
        version=str(meta["version"]),
        params=meta["params"],
        snapshot_ids=tuple(meta["snapshot_ids"]),
        status="ok" if ok else "failed",
        seconds=float(meta["seconds"]),
        result=Result(frames=frames, summary=meta["summary"]) if ok else None,
        error=None if ok else str(meta["error"]),
        failure=None if ok or not isinstance(meta.get("failure"), dict) else meta["failure"],
        choices=_choices_of(entry, meta),
        computed_at=meta.get("computed_at"),
        choices_error=_text_or_none(meta.get("choices_error")),
    )


class StoredFrameError(RuntimeError):
    """A frame of a stored result read lazily was gone or unreadable when first used."""


class StoredFrames(Mapping[str, pd.DataFrame]):
    """A stored entry's frames, each read from its file the first time it is used, then
    kept: a reader that uses a few frames of a large result (a `/metrics` hook reading the
    groups of failover-assignment, whose timeline holds every partition of 30 polls; a
    plugin reading the events of a result it requires) reads those only. Pickled (to a
    plugin's worker), it is a plain dict of every frame."""

    def __init__(self, entry: Path, meta: Mapping[str, Any]) -> None:
        self._entry, self._meta = entry, meta
        self._names = [str(name) for name in meta["frames"]]
        self._read: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            try:
                self._read[name] = _table(self._entry, self._meta, name).to_pandas()
            except Exception as exc:  # pruned since, or damaged
                raise StoredFrameError(
                    f"frame {name!r} of the stored result {self._entry.name} could not be "
                    f"read ({type(exc).__name__}: {exc}); it is computed again on the next pass"
                ) from exc
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self.items()),))


def _meta(stored: StoredResult, frames: list[str]) -> dict[str, Any]:
    return {
        "plugin": stored.plugin,
        "version": stored.version,
        "params": dict(stored.params),
        "snapshot_ids": list(stored.snapshot_ids),
        "status": stored.status,
        "seconds": stored.seconds,
        # a plugin's words: redacted like every text this product writes
        "error": redact(stored.error) if stored.error is not None else None,
        "failure": _redacted(dict(stored.failure)) if stored.failure is not None else None,
        "summary": _redacted(dict(stored.result.summary)) if stored.result is not None else {},
        "frames": frames,
        "rows": {name: len(frame) for name, frame in stored.result.frames.items()}
        if stored.result is not None
        else {},
        "choices": {},  # `_write_choices` fills it
        "choices_error": redact(stored.choices_error) if stored.choices_error else None,
    }


def _write_choices(path: Path, choices: Mapping[str, Sequence[str]], meta: dict[str, Any]) -> None:
    """Each param's allowed values into `meta["choices"]`, or, when there are more than
    INLINE_CHOICES of them, None there, their count in `meta["choice_counts"]` and the values
    in the file `path` (param and value columns)."""
    inline: dict[str, list[str] | None] = {}
    counts: dict[str, int] = {}
    params: list[str] = []
    values: list[str] = []
    for name, listed in choices.items():
        texts = [str(v) for v in listed]
        if len(texts) <= INLINE_CHOICES:
            inline[str(name)] = texts
            continue
        inline[str(name)], counts[str(name)] = None, len(texts)
        params += [str(name)] * len(texts)
        values += texts
    meta["choices"] = inline
    if counts:
        meta["choice_counts"] = counts
        param_column = pa.array(params, pa.string()).dictionary_encode()
        pq.write_table(
            pa.table({"param": param_column, "value": pa.array(values, pa.string())}), path
        )


def _choices_of(entry: Path, meta: Mapping[str, Any]) -> dict[str, Sequence[str]]:
    """The choices meta.json lists, those kept in CHOICES as `StoredValues` (read on use)."""
    counts = meta.get("choice_counts") or {}
    return {
        str(name): [str(v) for v in listed]
        if listed is not None
        else StoredValues(entry / CHOICES, str(name), int(counts.get(name, 0)))
        for name, listed in (meta.get("choices") or {}).items()
    }


class StoredValues(Sequence[str]):
    """The allowed values of one param kept in an entry's CHOICES file: its length is known
    from meta.json, its values are read the first time they are used. An entry gone since
    (pruned) or damaged gives no values, logged, never a crash, and is `lost`: a caller that
    checks a value against them knows the check cannot be made."""

    def __init__(self, path: Path, param: str, count: int) -> None:
        self._path, self._param, self._count = path, param, count
        self._values: list[str] | None = None
        self.lost = False

    def values(self) -> list[str]:
        if self._values is None:
            try:
                table = pq.read_table(self._path, filters=[("param", "==", self._param)])
                self._values = [str(v) for v in table.column("value").to_pylist()]
            except Exception as exc:
                log.warning("the stored choices %s are unreadable (%s)", self._path, exc)
                self._values, self.lost = [], True
            self._count = len(self._values)
        return self._values

    def __len__(self) -> int:
        return self._count if self._values is None else len(self._values)

    def __getitem__(self, index: Any) -> Any:
        return self.values()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values())

    def __contains__(self, value: object) -> bool:
        return value in self.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredValues | list | tuple):
            return self.values() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which have none

    def __repr__(self) -> str:
        return f"StoredValues({self._param!r}, {len(self):,} values)"


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _redacted(summary: dict[str, Any]) -> dict[str, Any]:
    """Its texts redacted, those of the mappings it holds too (a failure's origin)."""
    return {
        k: redact(v) if isinstance(v, str) else _redacted(v) if isinstance(v, dict) else v
        for k, v in summary.items()
    }


def _plain(value: Any) -> Any:
    """JSON for the numpy scalars and timestamps a summary may hold."""
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _safe(name: str) -> str:
    """A frame name as a file name (frame names are plugin-chosen strings)."""
    return "".join(c if c.isalnum() or c in "-_" else f"%{ord(c):02x}" for c in name)


def _read_from(meta: Mapping[str, Any], wanted: set[str] | None) -> bool:
    """Whether the entry read any of the `wanted` snapshots (always, when None)."""
    return wanted is None or not wanted.isdisjoint(meta.get("snapshot_ids") or ())
