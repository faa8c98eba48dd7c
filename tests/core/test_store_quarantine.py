"""A file named like a store file that is not one (random bytes, empty, another schema, a
folder, a file where a table's folder belongs) is moved to quarantine/, and reads go on."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pulsar_lens.core import dataset
from pulsar_lens.core.store import Store
from tests.core.snapshots import T0, make_snapshot
from tests.lens_cli import run_lens

FOREIGN = "20991231T000000000000Z-20991231T000000000000Z-w0000000000000000.parquet"


def two_polls(root: Path) -> Store:
    store = Store(root)
    for i in range(2):
        store.write(make_snapshot(at=T0.replace(second=i * 10)))
    return store


def day_dir(root: Path, table: str) -> Path:
    (day,) = [p for p in (root / table).iterdir() if p.name.startswith("date=")]
    return day


def spoil(root: Path) -> None:
    (day_dir(root, "topics") / FOREIGN).write_bytes(os.urandom(256))
    (day_dir(root, "subscriptions") / FOREIGN).write_bytes(b"")
    pq.write_table(pa.table({"topic": [[1], [2]]}), day_dir(root, "consumers") / FOREIGN)
    (day_dir(root, "bundles") / FOREIGN).mkdir()
    (day_dir(root, "snapshots") / FOREIGN).write_bytes(b"PAR1 not really")
    (root / "events").write_text("a file where a folder belongs")


def test_foreign_files_are_quarantined_and_every_read_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = two_polls(root)
    spoil(root)
    fresh = Store(root)
    assert len(fresh.snapshots()) == 2
    for table in ("topics", "subscriptions", "consumers", "bundles", "events"):
        fresh.read(table)  # every file of the table is opened; no exception
    assert fresh.read_latest("topics").num_rows == store.read_latest("topics").num_rows > 0
    assert fresh.quarantined_files() == 6
    assert not (day_dir(root, "topics") / FOREIGN).exists()
    assert (root / "events").is_dir() or not (root / "events").exists()
    fresh.write(make_snapshot(at=T0.replace(second=30)))  # and writing works again too
    assert len(Store(root).snapshots()) == 3


def test_analyze_runs_on_a_store_with_foreign_files(tmp_path: Path) -> None:
    root = tmp_path / "store"
    two_polls(root)
    spoil(root)
    done = run_lens("analyze", "subscription-status", "--store", str(root), "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "moved" in done.stderr
    assert Store(root).quarantined_files() >= 1  # what it read; the rest waits for a reader


def test_metrics_count_the_quarantined_files(tmp_path: Path) -> None:
    from pulsar_lens.exporter.collector import LensCollector
    from pulsar_lens.exporter.families import exposition

    root = tmp_path / "store"
    two_polls(root)
    spoil(root)
    store = Store(root)
    store.read("topics")
    store.snapshots()
    assert store.quarantined_files() == 2
    text = exposition(list(LensCollector(store).collect()))
    assert "pulsar_lens_store_quarantined_files 2.0" in text


def test_a_read_short_of_memory_moves_nothing_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow's out-of-memory error is an ArrowException too; it must not make good files
    look foreign (a reader under a memory limit once emptied a store this way)."""
    root = tmp_path / "store"
    two_polls(root)

    def short_of_memory(*_args: object, **_kwargs: object) -> pa.Table:
        raise pa.ArrowMemoryError("malloc of size 1048576 failed")

    monkeypatch.setattr(dataset, "scan", short_of_memory)
    store = Store(root)
    with pytest.raises(MemoryError):
        store.read("topics")
    assert store.quarantined_files() == 0
    monkeypatch.undo()
    assert Store(root).read("topics").num_rows > 0
