"""`pulsar-lens collect` on a store that fills up or turns read-only, on a real (small) tmpfs:
each poll's heartbeat says in one line that its snapshot was not written and why, polling goes
on, no half-written file is left for readers, and once the disk takes writes again the
snapshots kept in memory meanwhile are written."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pulsar_lens.core.store import Store
from tests.collecting import Collector, mounted_tmpfs, remount, run, stored
from tests.fake_admin import FakeAdmin
from tests.lens_cli import run_lens


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs of its own, unmounted after the test (writable again first)."""
    with mounted_tmpfs(tmp_path / "disk") as mount:
        yield mount


def fill(mount: Path) -> Path:
    """Write a filler file until the disk says it is full."""
    filler = mount / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def temporaries(store: Path) -> set[Path]:
    """Hidden *.tmp files (a table file being written) and hidden folders (a result being
    staged): readers skip them; a failed write must remove its own."""
    return {p for p in store.rglob(".*") if p.name.endswith(".tmp") or p.is_dir()}


def assert_readers_see_whole_files(store: Path, *, settle: float = 0.0) -> None:
    """Every Parquet file a reader lists opens; no temporary file is left behind (one that
    a write under way holds is gone within `settle` seconds)."""
    visible = [p for p in store.rglob("*.parquet") if not p.name.startswith((".", "_"))]
    assert visible
    for path in visible:
        pq.read_table(path)  # raises on a truncated or half-written file
    left = temporaries(store)
    deadline = time.monotonic() + settle
    while left and time.monotonic() < deadline:  # each gone, or still held past `settle`
        time.sleep(0.2)
        left &= temporaries(store)
    assert left == set(), f"temporary files left behind: {sorted(left)}"
    for table in ("brokers", "topics", "consumers", "snapshots"):
        Store(store).read(table)


def outage(mount: Path, begin: Callable[[], None], end: Callable[[], None], why: str) -> None:
    """Collect, `begin` the fault, see three polls not stored and why, `end` it, see the
    kept snapshots written."""
    store = mount / "store"
    with FakeAdmin() as fake, Collector(store, fake.url) as collector:
        collector.beats(1, stored)
        begin()
        seen = collector.beats(3, lambda line: "not_stored" in line)
        failed = [line for line in seen if "not_stored" in line]
        for line in failed:
            assert " not_stored (could not write snapshot " in line
            assert line.endswith(f" under {store}: {why})"), line
        assert_readers_see_whole_files(store, settle=60.0)  # the analyses may be writing
        ended = time.monotonic()
        end()
        collector.beats(1, stored)
        resumed = time.monotonic() - ended
        polls = len(collector.lines)
    stderr = collector.stderr
    assert collector.proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert f"{why}" in stderr  # the log line of each failed write
    index = Store(store).snapshots()
    # every poll stored, the kept ones at the first poll after the fault
    assert len(index) == len(collector.lines) >= polls
    written = {t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in index["collected_at"]}
    assert {line.split()[1] for line in failed} <= written
    assert_readers_see_whole_files(store)
    print(f"{why}: writes resumed {resumed:.2f}s after the fault ended; {polls} polls")


def test_collect_on_a_full_disk_says_enospc_and_writes_the_kept_snapshots_after(
    tmpfs: Path,
) -> None:
    filler: list[Path] = []
    outage(
        tmpfs,
        lambda: filler.append(fill(tmpfs)),
        lambda: filler[0].unlink(),
        "ENOSPC: No space left on device",
    )


def test_collect_on_a_read_only_store_says_erofs_and_writes_the_kept_snapshots_after(
    tmpfs: Path,
) -> None:
    outage(
        tmpfs,
        lambda: remount(tmpfs, "ro"),
        lambda: remount(tmpfs, "rw"),
        "EROFS: Read-only file system",
    )


def test_collect_once_on_a_read_only_store_refuses_in_one_line_before_polling(
    tmpfs: Path,
) -> None:
    """A store that cannot be written when collect starts is a setting to fix, said at once
    (exit 2), not a poll made only to be lost; a store that turns read-only later is the
    outage above, kept in memory and retried."""
    store = tmpfs / "store"
    done = run("mount", "-o", "remount,ro", str(tmpfs))
    assert done.returncode == 0, done.stderr
    with FakeAdmin() as fake:
        env = {"PULSAR_ADMIN_URL": fake.url}
        once = run_lens("collect", "--once", "--store", str(store), env=env)
        asked = list(fake.requests)
    assert once.returncode == 2, once.stderr
    assert "Traceback" not in once.stderr and not once.stdout
    (line,) = once.stderr.strip().splitlines()
    assert line == (
        f"pulsar-lens: cannot create the store {store}: {tmpfs} is not writable; "
        "point --store or PULSAR_LENS_STORE at a folder"
    )
    assert asked == []
