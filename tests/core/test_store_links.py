"""Symbolic links below the store's root are never followed: retention, compaction, quarantine
and result pruning leave what a link points to alone, and reads leave the link out. The root
itself may be a link."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pulsar_lens.core.store import Store
from pulsar_lens.plugins.results import ResultStore
from tests.core.snapshots import T0, make_snapshot

OLD_DAY = T0.date().isoformat()  # rows retention removes: only linked folders hold them
NOW = T0 + dt.timedelta(days=3)  # the store's own polls
BROKEN = "20991231T000000000000Z-20991231T000000000000Z-w0000000000000000.parquet"


def fingerprint(top: Path) -> dict[str, bytes | str]:
    """Every file below `top` with its bytes, and every link with its target (never followed)."""
    seen: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder, name)
            key = str(path.relative_to(top))
            if path.is_symlink():
                seen[key] = f"-> {os.readlink(path)}"
            elif path.is_file():
                seen[key] = path.read_bytes()
    return seen


def old_store(root: Path) -> Path:
    """A store of old polls, as someone else's folder a link may point to."""
    store = Store(root)
    for i in range(2):
        store.write(make_snapshot(at=T0 + dt.timedelta(seconds=10 * i)))
    entry = root / "results" / "subscription-status" / "old-entry"
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text('{"snapshot_ids": ["sha256:gone"]}')
    return root


def one_file(folder: Path) -> Path:
    return sorted(folder.glob("*.parquet"))[0]


def linked_name(source: Path) -> str:
    """A name that reads would take without an index row (as for probes), so that only the
    link itself can keep its rows out."""
    return source.name.rsplit("-", 1)[0] + "-wlinked.parquet"


# each case plants one link in `store` and returns the folder that must stay as it was
Plant = Callable[[Path, Path], Path]


def day_folder_outside(store: Path, outside: Path) -> Path:
    (store / "topics" / f"date={OLD_DAY}").symlink_to(outside / "topics" / f"date={OLD_DAY}")
    return outside


def day_folder_inside(store: Path, outside: Path) -> Path:
    kept = store / "kept-by-hand"
    shutil.copytree(outside / "topics", kept)
    (store / "topics" / f"date={OLD_DAY}").symlink_to(kept / f"date={OLD_DAY}")
    return kept


def day_folder_dangling(store: Path, outside: Path) -> Path:
    (store / "topics" / f"date={OLD_DAY}").symlink_to(outside / "nothing-here")
    return outside


def file_outside(store: Path, outside: Path) -> Path:
    source = one_file(outside / "topics" / f"date={OLD_DAY}")
    folder = store / "topics" / f"date={OLD_DAY}"
    folder.mkdir()
    (folder / linked_name(source)).symlink_to(source)
    return outside


def file_inside(store: Path, outside: Path) -> Path:
    today = store / "topics" / f"date={NOW.date().isoformat()}"
    kept = store / "kept-by-hand"
    kept.mkdir()
    source = shutil.copy(one_file(outside / "topics" / f"date={OLD_DAY}"), kept)
    (today / linked_name(Path(source))).symlink_to(source)
    return kept


def file_dangling(store: Path, outside: Path) -> Path:
    today = store / "topics" / f"date={NOW.date().isoformat()}"
    name = linked_name(one_file(outside / "topics" / f"date={OLD_DAY}"))
    (today / name).symlink_to(outside / "no")
    return outside


def table_folder_outside(store: Path, outside: Path) -> Path:
    shutil.rmtree(store / "events", ignore_errors=True)
    (store / "events").symlink_to(outside / "topics")
    return outside


def quarantine_outside(store: Path, outside: Path) -> Path:
    (outside / "aside").mkdir()
    (store / "quarantine").symlink_to(outside / "aside")
    return outside


def results_outside(store: Path, outside: Path) -> Path:
    (store / "results").symlink_to(outside / "results")
    return outside


def results_plugin_outside(store: Path, outside: Path) -> Path:
    (store / "results").mkdir()
    mine = outside / "results" / "subscription-status"
    (store / "results" / "subscription-status").symlink_to(mine)
    return outside


CASES: dict[str, Plant] = {
    "day folder to outside": day_folder_outside,
    "day folder to inside": day_folder_inside,
    "dangling day folder": day_folder_dangling,
    "file to outside": file_outside,
    "file to inside": file_inside,
    "dangling file": file_dangling,
    "table folder to outside": table_folder_outside,
    "quarantine folder to outside": quarantine_outside,
    "results folder to outside": results_outside,
    "results plugin folder to outside": results_plugin_outside,
}


def own_polls(root: Path) -> Store:
    store = Store(root)
    for i in range(2):
        store.write(make_snapshot(at=NOW + dt.timedelta(seconds=10 * i)))
    # a broken file of the store's own, which the first read moves to quarantine/ (alone in
    # its day: compaction has nothing to merge it with, and its name is too young to expire)
    day = root / "subscriptions" / f"date={OLD_DAY}"
    day.mkdir()
    (day / BROKEN).write_bytes(b"PAR1 not really")
    return store


def housekeep(store: Store) -> None:
    """Everything that deletes, merges or moves files, as the collect process runs it."""
    store.compact_closed(before=NOW.date() + dt.timedelta(days=1))
    store.apply_retention(max_age=dt.timedelta(days=1), now=NOW + dt.timedelta(hours=1))
    results = ResultStore(store.root)
    results.prune({str(s) for s in store.snapshots()["snapshot_id"]})
    results.keep_newest("subscription-status", 0)


@pytest.mark.parametrize("plant", CASES.values(), ids=list(CASES))
def test_housekeeping_never_reaches_through_a_link(tmp_path: Path, plant: Plant) -> None:
    outside = old_store(tmp_path / "outside")
    root = tmp_path / "store"
    store = own_polls(root)
    expected = store.read("topics").num_rows
    kept = plant(root, outside)
    before = fingerprint(kept)
    for table in ("topics", "subscriptions", "events"):
        assert Store(root).read(table).num_rows >= 0  # reads go on, links left out
    assert Store(root).read("topics").num_rows == expected  # no rows from behind a link
    housekeep(Store(root))
    assert fingerprint(kept) == before
    assert Store(root).read("topics").num_rows == expected
    assert len(Store(root).snapshots()) == 2


def test_a_store_whose_root_is_a_link_is_housekept_as_usual(tmp_path: Path) -> None:
    real = tmp_path / "volume"
    own_polls(real)
    old = Store(real)
    old.write(make_snapshot(at=T0))  # retention's to remove
    (tmp_path / "store").symlink_to(real)
    store = Store(tmp_path / "store")
    store.read("subscriptions")  # the broken file goes to quarantine/ through the root link
    assert store.quarantined_files() == 1
    housekeep(store)
    assert len(store.snapshots()) == 2
    assert not (real / "topics" / f"date={OLD_DAY}").exists()
    assert len(list((real / "topics" / f"date={NOW.date().isoformat()}").iterdir())) == 1


def test_a_write_never_goes_through_a_linked_day_folder(tmp_path: Path) -> None:
    from pulsar_lens.core.errors import SnapshotError

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "store"
    (root / "topics").mkdir(parents=True)
    (root / "topics" / f"date={NOW.date().isoformat()}").symlink_to(outside)
    with pytest.raises(SnapshotError, match="is a symbolic link"):
        Store(root).write(make_snapshot(at=NOW))
    assert list(outside.iterdir()) == []
    assert Store(root).snapshots().empty  # all or nothing: the other tables' files went too


def test_a_result_is_never_written_through_a_linked_results_folder(tmp_path: Path) -> None:
    from pulsar_lens.api import Result
    from pulsar_lens.plugins.results import StoredResult

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "store"
    root.mkdir()
    (root / "results").symlink_to(outside)
    stored = StoredResult("p", "1", {}, ("sha256:a",), "ok", 0.1, result=Result(frames={}))
    with pytest.raises(OSError, match="is a symbolic link"):
        ResultStore(root).write(stored)
    assert list(outside.iterdir()) == []
