"""The Parquet store: layout readable by pyarrow.dataset, atomic files, reads, retention."""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import shutil
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pulsar_lens.core import dataset
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import SCHEMAS, TABLES, EventRecord
from pulsar_lens.core.store import INDEX_SCHEMA, Store
from tests.core.snapshots import T0, make_snapshot, unreachable_snapshot

S = dt.timedelta(seconds=1)


def visible_files(root: Path, table: str) -> list[Path]:
    return sorted(p for p in (root / table).rglob("*.parquet") if not p.name.startswith("."))


def fill(
    store: Store, count: int, *, start: dt.datetime = T0, step: dt.timedelta = 30 * S
) -> list[str]:
    return [store.write(make_snapshot(at=start + i * step, topics=i + 1)) for i in range(count)]


@pytest.mark.parametrize("name", [*TABLES, "snapshots"])
def test_store_empty_reads_return_empty_tables_with_the_schema(tmp_path: Path, name: str) -> None:
    store = Store(tmp_path / "store")
    expected = INDEX_SCHEMA if name == "snapshots" else SCHEMAS[name]
    for table in (
        store.read_latest(name),
        store.read_history(name, snapshots=5),
        store.read(name),
        store.read(name, snapshot_ids=["sha256:00"]),
    ):
        assert table.num_rows == 0
        assert table.schema == expected


def test_store_empty_index_is_an_empty_frame(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.latest_snapshot_id() is None
    frame = store.snapshots()
    assert frame.empty
    assert list(frame.columns) == INDEX_SCHEMA.names


def test_store_write_returns_the_id_read_latest_finds(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 3)
    assert store.latest_snapshot_id() == ids[-1]
    latest = store.read_latest("topics")
    assert latest.num_rows == 3
    assert set(latest["snapshot_id"].to_pylist()) == {ids[-1]}
    assert latest.schema == SCHEMAS["topics"]


def test_store_read_latest_is_the_newest_collected_not_the_last_written(tmp_path: Path) -> None:
    store = Store(tmp_path)
    newest = store.write(make_snapshot(at=T0 + 60 * S, topics=2))
    store.write(make_snapshot(at=T0, topics=5))
    assert store.latest_snapshot_id() == newest
    assert store.read_latest("topics").num_rows == 2


def test_store_read_latest_of_a_table_the_newest_snapshot_lacks_is_empty(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fill(store, 2)
    store.write(make_snapshot(at=T0 + 3600 * S, topics=0))
    assert store.read_latest("topics").num_rows == 0
    assert store.read_latest("brokers").num_rows == 1


def test_store_read_history_returns_the_newest_snapshots_oldest_first(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 5)
    history = store.read_history("topics", snapshots=3)
    assert history.num_rows == 3 + 4 + 5
    seen = list(dict.fromkeys(history["snapshot_id"].to_pylist()))
    assert seen == ids[2:]


def test_store_read_history_spans_midnight(tmp_path: Path) -> None:
    store = Store(tmp_path)
    before = dt.datetime(2026, 11, 21, 23, 59, 50, tzinfo=dt.UTC)
    ids = fill(store, 4, start=before, step=5 * S)
    assert store.days("topics") == [dt.date(2026, 11, 21), dt.date(2026, 11, 22)]
    history = store.read_history("topics", snapshots=3)
    assert list(dict.fromkeys(history["snapshot_id"].to_pylist())) == ids[1:]


def test_store_read_time_range_is_inclusive(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 5)
    rows = store.read("brokers", since=T0 + 30 * S, until=T0 + 90 * S)
    assert rows["snapshot_id"].to_pylist() == ids[1:4]


def test_store_read_by_snapshot_ids(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 4)
    rows = store.read("topics", snapshot_ids=[ids[3], ids[0]])
    assert rows.num_rows == 1 + 4
    assert store.read("topics", snapshot_ids=["sha256:unknown"]).num_rows == 0


@pytest.mark.parametrize("how", ["ids", "time", "all"])
def test_store_read_of_some_columns_is_those_of_the_full_read(tmp_path: Path, how: str) -> None:
    store = Store(tmp_path)
    ids = fill(store, 4)
    window = {"ids": {"snapshot_ids": ids[1:3]}, "time": {"since": T0 + 30 * S}, "all": {}}[how]
    full = store.read("topics", **window)
    some = store.read("topics", columns=["msg_rate_in", "topic"], **window)
    # in the table's order, with the columns every read keeps
    kept = ["snapshot_id", "collected_at", "cluster", "topic", "msg_rate_in"]
    assert some.column_names == kept
    assert some.num_rows > 0
    assert some.equals(full.select(kept))


def test_store_read_of_some_columns_of_nothing_or_the_index(tmp_path: Path) -> None:
    store = Store(tmp_path)
    empty = store.read("consumers", snapshot_ids=["sha256:00"], columns=["consumer_name"])
    assert empty.num_rows == 0
    assert empty.column_names == ["snapshot_id", "collected_at", "cluster", "consumer_name"]
    ids = fill(store, 2)
    index = store.read("snapshots", snapshot_ids=ids, columns=["requests"])
    assert index.column_names == ["snapshot_id", "collected_at", "cluster", "requests"]
    assert index["snapshot_id"].to_pylist() == ids


def test_store_read_of_a_column_the_table_lacks_says_so(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match=r"no column\(s\) \['nope'\]"):
        Store(tmp_path).read("topics", columns=["topic", "nope"])


def test_store_index_row_describes_the_poll(tmp_path: Path) -> None:
    store = Store(tmp_path)
    failed = dataclasses.replace(unreachable_snapshot(at=T0 + S), requests=4)
    store.write(make_snapshot())
    store.write(failed)
    index = store.snapshots()
    assert index["partial"].tolist() == [False, True]
    assert index["requests"].tolist() == [9, 4]
    assert json.loads(index["errors_json"][1])[0]["message"] == "connection refused"
    assert json.loads(index["row_counts_json"][0])["topics"] == 3
    assert json.loads(index["durations_json"][0]) == {"topics": 0.25}


def test_store_snapshots_limit_keeps_the_newest(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 6)
    assert store.snapshots(limit=2)["snapshot_id"].tolist() == ids[4:]
    assert store.snapshots(limit=100)["snapshot_id"].tolist() == ids


def test_store_writes_events_with_their_snapshot(tmp_path: Path) -> None:
    store = Store(tmp_path)
    event = EventRecord(at=T0, kind="consumer_joined", subject="t0/sub/c1", consumer_name="c1")
    sid = store.write(make_snapshot(), events=[event])
    events = store.read_latest("events")
    assert events["snapshot_id"].to_pylist() == [sid]
    assert events["kind"].to_pylist() == ["consumer_joined"]


def test_store_rewriting_a_snapshot_replaces_it(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot())
    store.write(make_snapshot())
    assert len(store.snapshots()) == 1
    assert store.read("topics").num_rows == 3


def test_store_write_table_appends_probes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    rows = pa.table(
        {
            "snapshot_id": ["probe"],
            "collected_at": [T0],
            "cluster": ["standalone"],
            "probe": ["p1"],
            "topic": ["persistent://public/default/probe"],
            "namespace": ["public/default"],
            "bundle": ["0x00000000_0x40000000"],
            "seq": [0],
            "sent_at": [T0],
            "acked_at": [T0],
            "received_at": [T0],
            "publish_ms": [3.5],
            "e2e_ms": [4.0],
            "received": [1],
            "error": [None],
        }
    )
    store.write_table("probes", rows)
    probes = store.read("probes")
    assert probes.schema == SCHEMAS["probes"]
    assert probes["publish_ms"].to_pylist() == [3.5]


def test_store_write_table_refuses_the_wrong_columns(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing columns"):
        Store(tmp_path).write_table("probes", pa.table({"topic": ["x"]}))


def test_store_layout_is_a_hive_dataset_pyarrow_reads_directly(tmp_path: Path) -> None:
    store = Store(tmp_path)
    before = dt.datetime(2026, 11, 21, 23, 59, 30, tzinfo=dt.UTC)
    fill(store, 3, start=before)
    assert (tmp_path / "topics" / "date=2026-11-22").is_dir()
    table = ds.dataset(tmp_path / "topics", format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 1 + 2 + 3
    assert sorted(set(table["date"].to_pylist())) == ["2026-11-21", "2026-11-22"]
    assert set(SCHEMAS["topics"].names) < set(table.column_names)


def test_store_readers_ignore_a_half_written_temp_file(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fill(store, 2)
    folder = dataset.partition_dir(tmp_path / "topics", T0.date())
    real = visible_files(tmp_path, "topics")[0]
    # what a crash mid-write leaves: the hidden temp file, truncated
    (folder / f".{real.name}.deadbeef.tmp").write_bytes(real.read_bytes()[:100])
    (folder / "_partial.parquet").write_bytes(b"PAR1 garbage")
    assert store.read("topics").num_rows == 1 + 2
    direct = ds.dataset(tmp_path / "topics", format="parquet", partitioning="hive").to_table()
    assert direct.num_rows == 1 + 2


def test_store_an_interrupted_write_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path)

    def crash(src: object, dst: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(dataset.os, "replace", crash)
    with pytest.raises(SnapshotError, match="disk gone"):
        store.write(make_snapshot())
    monkeypatch.undo()
    assert list(tmp_path.rglob("*.parquet")) == []
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
    assert store.read("topics").num_rows == 0


def test_store_reads_files_that_lack_a_newer_column(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = pa.table(
        {
            "snapshot_id": ["s"],
            "collected_at": [T0],
            "cluster": ["c"],
            "topic": ["t"],
            "tenant": ["public"],
            "namespace": ["public/default"],
        }
    )
    folder = dataset.partition_dir(tmp_path / "topics", T0.date())
    folder.mkdir(parents=True)
    pq.write_table(old, folder / "old.parquet")
    table = store.read("topics")
    assert table.schema == SCHEMAS["topics"]
    assert table["backlog_size"].to_pylist() == [None]


def test_store_compact_merges_a_day_into_one_file_per_table(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 5)
    before = store.read("topics")
    replaced = store.compact(T0.date())
    assert replaced == 5 * 6  # brokers, bundles, topics, subscriptions, consumers, snapshots
    assert len(visible_files(tmp_path, "topics")) == 1
    assert store.read("topics").equals(before)
    assert store.latest_snapshot_id() == ids[-1]
    assert store.read_history("topics", snapshots=2).num_rows == 4 + 5
    assert store.compact(T0.date()) == 0


def test_store_compact_leaves_no_duplicates_when_interrupted_before_cleanup(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    fill(store, 3)
    saved = tmp_path.parent / "saved"
    shutil.copytree(tmp_path / "topics", saved)
    store.compact(T0.date())
    # a crash between the rename and the deletes leaves the sources beside the merged file
    shutil.copytree(saved, tmp_path / "topics", dirs_exist_ok=True)
    assert len(visible_files(tmp_path, "topics")) == 4
    assert store.read("topics").num_rows == 1 + 2 + 3
    assert store.compact(T0.date()) == 0
    assert len(visible_files(tmp_path, "topics")) == 1


def test_store_compact_merges_a_late_file_into_a_compacted_day(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fill(store, 3)
    store.compact(T0.date())
    store.write(make_snapshot(at=T0 + 5 * S, topics=7))
    assert store.read("topics").num_rows == 1 + 7 + 2 + 3
    store.compact(T0.date())
    table = store.read("topics")
    assert table.num_rows == 13
    assert table["collected_at"].to_pylist() == sorted(table["collected_at"].to_pylist())
    assert len(visible_files(tmp_path, "topics")) == 1


def test_store_compact_closed_leaves_today_alone(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fill(store, 3)
    fill(store, 3, start=T0 + dt.timedelta(days=1))
    assert store.compact_closed(before=T0.date() + dt.timedelta(days=1)) == 3 * 6
    assert len(visible_files(tmp_path, "topics")) == 1 + 3


def test_store_snapshots_limit_across_compacted_and_single_files(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 4)
    store.compact(T0.date())
    ids += fill(store, 2, start=T0 + dt.timedelta(days=1))
    assert store.snapshots(limit=3)["snapshot_id"].tolist() == ids[3:]
    assert store.snapshots(limit=5)["snapshot_id"].tolist() == ids[1:]


def test_store_retention_removes_old_days_and_their_index_rows(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fill(store, 2, start=T0 - dt.timedelta(days=10))
    kept = fill(store, 2)
    removed = store.apply_retention(max_age=dt.timedelta(days=7), now=T0 + 60 * S)
    assert removed == 2 * 6
    assert store.snapshots()["snapshot_id"].tolist() == kept
    assert store.days("topics") == [T0.date()]
    assert store.read("topics").num_rows == 1 + 2


def test_store_retention_removes_whole_files_inside_the_cutoff_day(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 4, step=3600 * S)
    store.apply_retention(max_age=dt.timedelta(hours=2), now=T0 + 3 * 3600 * S)
    assert store.snapshots()["snapshot_id"].tolist() == ids[1:]


def test_store_retention_cleans_stale_temp_files(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fill(store, 1)
    folder = dataset.partition_dir(tmp_path / "topics", T0.date())
    stale = folder / ".x.parquet.0000.tmp"
    stale.write_bytes(b"half")
    old = dt.datetime.now().timestamp() - 2 * dataset.STALE_TEMP_SECONDS
    os.utime(stale, (old, old))
    store.apply_retention(max_age=dt.timedelta(days=7), now=T0)
    assert not stale.exists()


def scans_first_missing(monkeypatch: pytest.MonkeyPatch, why: str) -> list[int]:
    """Make the store's first file scan find its file gone (`why`); the calls made."""
    real_scan = dataset.scan
    calls: list[int] = []

    def scan(*args: object) -> pa.Table:
        calls.append(1)
        if len(calls) == 1:
            raise FileNotFoundError(why)
        return real_scan(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(dataset, "scan", scan)
    return calls


def test_store_read_lists_again_when_a_compaction_moved_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path)
    fill(store, 2)
    calls = scans_first_missing(monkeypatch, "replaced by a compaction")
    assert store.read("topics").num_rows == 1 + 2
    assert len(calls) == 2


@pytest.mark.parametrize("limit", [None, 2])
def test_store_index_lists_again_when_retention_removed_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    fill(Store(tmp_path), 3)
    store = Store(tmp_path)  # a reader that has not cached the index files yet
    calls = scans_first_missing(monkeypatch, "removed by retention")
    assert len(store.snapshots(limit=limit)) == (limit or 3)
    assert len(calls) >= 2


def test_store_read_by_snapshot_ids_across_compacted_and_open_days(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = fill(store, 3, start=T0 - dt.timedelta(days=3))
    store.compact((T0 - dt.timedelta(days=3)).date())
    new = fill(store, 3)
    rows = store.read("topics", snapshot_ids=[new[2], old[1]])
    assert rows["snapshot_id"].to_pylist() == [old[1]] * 2 + [new[2]] * 3
    index = store.read("snapshots", snapshot_ids=[new[0], old[0], "sha256:ffff"])
    assert index["snapshot_id"].to_pylist() == [old[0], new[0]]


def test_store_read_by_snapshot_ids_within_a_time_range(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = fill(store, 4)
    rows = store.read("brokers", snapshot_ids=ids, since=T0 + 45 * S)
    assert rows["snapshot_id"].to_pylist() == ids[2:]


def test_store_a_failed_write_says_why_in_one_line_without_the_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    store = Store(tmp_path)

    def full(src: object, dst: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(src))

    monkeypatch.setattr(dataset.os, "replace", full)
    with pytest.raises(SnapshotError) as raised:
        store.write(make_snapshot())
    message = str(raised.value)
    assert message.endswith(f"under {tmp_path}: EROFS: Read-only file system")
    assert ".tmp" not in message and "\n" not in message
    monkeypatch.undo()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (OSError(28, "No space left on device", "/x/.a.parquet.1234.tmp"), "ENOSPC: "),
        (ValueError("year 10000 is out of range\n"), "ValueError: year 10000 is out of range"),
        (OSError("[Errno 28] only in the text"), "OSError: [Errno 28] only in the text"),
    ],
)
def test_store_write_failure_names_the_errno(error: BaseException, said: str) -> None:
    from pulsar_lens.core.store import write_failure

    assert write_failure(error).startswith(said)
    assert ".tmp" not in write_failure(error)


def _pyarrow_write_error(path: Path) -> OSError:
    with pytest.raises(OSError) as raised:
        pq.write_table(pa.table({"a": list(range(1000))}), path)
    return raised.value


def test_store_write_failure_reads_the_errno_pyarrow_sets_when_it_cannot_open(
    tmp_path: Path,
) -> None:
    from pulsar_lens.core.store import write_failure

    error = _pyarrow_write_error(tmp_path)  # a directory where the file would go
    assert write_failure(error) == f"EISDIR: {os.strerror(errno.EISDIR)}"


def test_store_write_failure_reads_the_errno_pyarrow_sets_when_the_disk_is_full(
    tmp_path: Path,
) -> None:
    from pulsar_lens.core.store import write_failure

    full = tmp_path / "full.parquet"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode), "/dev/full is not the full device"
    full.symlink_to("/dev/full")  # pyarrow deletes a file it failed to write: the link only
    assert write_failure(_pyarrow_write_error(full)) == "ENOSPC: No space left on device"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode), "the write removed /dev/full"


def test_store_a_write_cut_by_a_read_only_disk_says_erofs_and_its_retry_replaces_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    store = Store(tmp_path)
    snapshot = make_snapshot()
    real_write_rows = dataset.write_rows
    calls = {"n": 0}

    def write_rows(table_dir: Path, table: pa.Table, tag: str) -> list[Path]:
        calls["n"] += 1
        if calls["n"] > 1:  # the disk turned read-only after the first table
            raise OSError(errno.EROFS, "Read-only file system", str(table_dir))
        return real_write_rows(table_dir, table, tag)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(dataset, "write_rows", write_rows)
    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(SnapshotError, match=r"EROFS: Read-only file system$"):
        store.write(snapshot)
    monkeypatch.undo()
    assert store.snapshots().empty  # no index row: the snapshot is not there for readers
    sid = store.write(snapshot)  # the retry, once the disk is writable again
    assert store.read("brokers", snapshot_ids=[sid]).num_rows == len(snapshot.brokers)
    assert len(visible_files(tmp_path, "brokers")) == 1


def test_store_read_waits_out_a_housekeeping_round_that_keeps_deleting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that meets a file deleted after its listing lists again, pausing longer each
    time; it gives up with SnapshotError only after READ_ATTEMPTS tries, naming the file."""
    store = Store(tmp_path / "s")
    store.write(make_snapshot(at=T0, topics=2))
    pauses: list[float] = []
    monkeypatch.setattr(store, "_pause", pauses.append)
    real = store._index_tables
    misses = iter(range(5))

    def flaky(**kw: object) -> list[pa.Table]:
        if next(misses, None) is not None:
            raise FileNotFoundError(2, "No such file", str(tmp_path / "gone.parquet"))
        return real(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_index_tables", flaky)
    assert len(store.snapshots()) == 1  # the sixth try
    assert pauses == [0.02, 0.04, 0.08, 0.16, 0.32]

    misses = iter(range(100))
    with pytest.raises(SnapshotError, match=r"files kept moving \(6 tries.*gone\.parquet"):
        store.snapshots()
