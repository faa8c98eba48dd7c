"""kill -9 of the collector at random points, day compaction included: nothing written is
lost, nothing half-written shows.

tests/faults/crash_writer.py (the real PollLoop and Store on recorded polls, 3 to 6 virtual
hours apart, so a day closes every few polls and is compacted) is started again and again on
one store and SIGKILLed at a seeded random point: a random delay after its 0th to 4th
completed write, or, one run in three, right after a random compaction step (the writer
prints each step; a kill counts as inside a compaction when the writer printed its start and
not its end). The last run is killed after a compaction renamed its file and before it
deleted the files it replaced (a 1 s pause there), so the final store surely holds both
copies of a day. After each kill inside a compaction (and every fifth kill) the store must
read cleanly through the Store API; at the end also through Spark, as Spark plugins read it:

(a) every *.parquet file opens with pyarrow, every table reads through the Store and Spark;
(b) every poll whose write returned is in the index, with the rows its index row counts;
(c) no reader shows rows of a poll without an index row, nor a poll's rows twice (a
    compaction killed before it deleted its sources leaves them on disk);
(d) the hidden temp files of killed writes are never read.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import queue
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pulsar_lens.core import dataset
from pulsar_lens.core.model import TABLES
from pulsar_lens.core.store import INDEX, STORE_TABLES, Store
from tests.faults.crash_writer import PAUSE_ENV, save_recorded

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SEED = 20261126
MIN_COMPLETED = 50
MIN_KILLS = 25
MIN_COMPACTION_KILLS = 6
MAX_RUNS = 90
PAUSE = 0.02  # seconds the writer waits after each compaction step: a wider window to hit
MAX_WRITES_BEFORE_KILL = 4
KILL_WITHIN = 0.06  # seconds after the chosen write or compaction step: a write takes ~0.03
MARKERS = ("compact-begin", "compact-temp", "compact-published")
LAST_PAUSE = 1.0  # the last run's pause: its kill lands before the compaction's cleanup
READY_TIMEOUT = 30.0
RECORDED = "recorded-polls.pickle"  # next to the store: the writer's polls, replayed once
COMPACTION_TIMEOUT = 30.0  # for the last run to reach a compaction
DEADLINE = 240.0  # the whole kill loop, a bound against a hang, not a timing


@dataclass
class Run:
    """One start of the writer: what it printed before it died."""

    lines: list[str] = field(default_factory=list)
    killed: bool = False

    @property
    def completed(self) -> list[str]:
        return [line.split()[1] for line in self.lines if line.startswith("completed ")]

    @property
    def compaction_phase(self) -> str | None:
        """The last compaction step it printed, if it died inside a compaction."""
        open_steps: dict[str, str] = {}
        for line in self.lines:
            word, _, where = line.partition(" ")
            if word in MARKERS:
                open_steps[where] = word
            elif word == "compact-end":
                open_steps.pop(where.rsplit(" ", 1)[0], None)
        return next(iter(open_steps.values()), None)


@dataclass
class Tally:
    runs: int = 0
    kills: int = 0
    completed: list[str] = field(default_factory=list)
    phases: collections.Counter[str] = field(default_factory=collections.Counter)
    targeted: int = 0

    @property
    def compaction_kills(self) -> int:
        return sum(n for phase, n in self.phases.items() if phase != "writing")


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for raw in stream:
        into.put(raw.decode().rstrip("\n"))
    into.put(None)


def _next_line(lines: queue.Queue[str | None], run: Run, timeout: float) -> str | None:
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        return None
    if line is not None:
        run.lines.append(line)
    return line


def crash_once(
    root: Path,
    number: int,
    rng: random.Random,
    *,
    target: str | None,
    pause: float = PAUSE,
    late: float = KILL_WITHIN,
) -> Run:
    """Start the writer, kill it up to `late` seconds after its 0th to 4th completed write
    (or after the compaction step `target`), as `rng` says."""
    env = {**os.environ, PAUSE_ENV: str(pause)}
    command = [sys.executable, "-m", "tests.faults.crash_writer", str(root)]
    command += ["--seed", f"{SEED}-{number}", "--max-polls", "200"]
    command += ["--polls", str(root.parent / RECORDED)]
    errors = root.parent / f"writer-{number}.stderr"
    with errors.open("wb") as stderr:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr)
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    run = Run()
    try:
        ready = time.monotonic() + READY_TIMEOUT
        while _next_line(lines, run, max(0.0, ready - time.monotonic())) not in ("ready", None):
            pass
        if not run.lines or run.lines[-1] != "ready":
            pytest.fail(f"writer not ready: {run.lines[-5:]} {errors.read_text()[-2000:]}")
        writes = rng.randint(0, MAX_WRITES_BEFORE_KILL)
        until = time.monotonic() + COMPACTION_TIMEOUT
        while target is not None or len(run.completed) < writes:
            line = _next_line(lines, run, max(0.0, until - time.monotonic()))
            if line is None or (target is not None and line.startswith(target)):
                break
        time.sleep(rng.uniform(0.0, late))
        run.killed = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    while (line := _next_line(lines, run, 0.0)) is not None:
        pass
    return run


def crash_many(root: Path) -> Tally:
    rng = random.Random(SEED)
    tally = Tally()
    save_recorded(root.parent / RECORDED)
    deadline = time.monotonic() + DEADLINE
    while (
        len(tally.completed) < MIN_COMPLETED
        or tally.kills < MIN_KILLS
        or tally.compaction_kills < MIN_COMPACTION_KILLS
    ):
        assert tally.runs < MAX_RUNS and time.monotonic() < deadline, f"gave up: {tally}"
        target = rng.choice(MARKERS) if rng.random() < 1 / 3 else None
        run = crash_once(root, tally.runs, rng, target=target)
        tally.runs += 1
        tally.completed += run.completed
        if run.killed:
            tally.kills += 1
            tally.targeted += target is not None
            tally.phases[run.compaction_phase or "writing"] += 1
            if run.compaction_phase or tally.kills % 5 == 0:
                check_store(Store(root), tally.completed)
    last = crash_once(root, tally.runs, rng, target="compact-published", pause=LAST_PAUSE, late=0.0)
    assert last.killed and last.compaction_phase == "compact-published", last.lines[-5:]
    tally.runs += 1
    tally.kills += 1
    tally.targeted += 1
    tally.phases["compact-published"] += 1
    tally.completed += last.completed
    return tally


# -- the checks ----------------------------------------------------------------------------


def expected_rows(index: Any) -> dict[str, dict[str, int]]:
    """{table: {snapshot id: rows}} as the index rows count them (absent: none)."""
    expected: dict[str, dict[str, int]] = {name: {} for name in TABLES}
    for sid, counts in zip(index["snapshot_id"], index["row_counts_json"], strict=True):
        for name, rows in json.loads(counts).items():
            if rows:
                expected[name][sid] = rows
    return expected


def check_store(store: Store, completed: list[str]) -> dict[str, dict[str, int]]:
    """(b), (c) and (d) through the Store API; returns the expected rows per table."""
    index = store.snapshots()
    ids = index["snapshot_id"].tolist()
    duplicated = [sid for sid, n in collections.Counter(ids).items() if n > 1]
    assert not duplicated, f"polls listed twice in the index: {duplicated}"
    lost = sorted(set(completed) - set(ids))
    assert not lost, f"{len(lost)} polls whose write returned are not in the index: {lost}"
    expected = expected_rows(index)
    for name in TABLES:
        by_id = store.read(name, snapshot_ids=ids)
        assert _counts(by_id["snapshot_id"].to_pylist()) == expected[name], name
        whole = store.read(name)  # every row the store shows, index or not
        assert _counts(whole["snapshot_id"].to_pylist()) == expected[name], name
    for name in STORE_TABLES:
        for f in store.live_files(name):
            assert not f.path.name.startswith("."), f"a reader lists a temp file: {f.path}"
    return expected


def _counts(ids: list[str]) -> dict[str, int]:
    return dict(collections.Counter(ids))


def on_disk(root: Path) -> Mapping[str, int]:
    """What the kills left: Parquet files, temps, the sources of a compaction not deleted
    yet, and files of polls without an index row."""
    store = Store(root)
    left_sources = unindexed = 0
    for name in STORE_TABLES:
        table_dir = store.table_dir(name)
        visible = {p.name for p in table_dir.glob("date=*/*.parquet")}
        listed = {f.path.name for f in dataset.list_files(table_dir)}
        left_sources += len(visible - listed)
        unindexed += len(listed - {f.path.name for f in store.live_files(name)})
    return {
        "parquet": sum(1 for _ in root.rglob("*.parquet")),
        "temps": sum(1 for _ in root.rglob(".*.tmp")),
        "left_sources": left_sources,
        "unindexed": unindexed,
    }


def check_spark(root: Path, expected: dict[str, dict[str, int]], index_ids: list[str]) -> None:
    """(a), (b), (c), (d) through the reader Spark plugins use, in one Spark job."""
    from pyspark.sql import functions as F

    from pulsar_lens.plugins.spark import reader, session

    spark = session.get("local[2]")
    union = None
    for name in STORE_TABLES:
        if (root / name).is_dir():
            part = reader.read(spark, root, name).select(F.lit(name).alias("table"), "snapshot_id")
            union = part if union is None else union.unionByName(part)
    assert union is not None
    for path in union.inputFiles():
        assert not Path(path).name.startswith("."), f"Spark reads a temp file: {path}"
    rows = union.groupBy("table", "snapshot_id").count().collect()
    seen: dict[str, dict[str, int]] = {name: {} for name in STORE_TABLES}
    for row in rows:
        seen[row["table"]][row["snapshot_id"]] = row["count"]
    assert seen[INDEX] == dict.fromkeys(index_ids, 1)
    for name in TABLES:
        assert seen[name] == expected[name], f"Spark reads {name} unlike the index says"


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _descendants_cpu() -> float:
    """CPU seconds of this process's live descendants (Spark's JVM), from /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
            ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    mine = {os.getpid()}
    for _ in range(8):
        mine |= {pid for pid, parent in parents.items() if parent in mine}
    return sum(ticks[pid] for pid in mine - {os.getpid()}) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def spark_started() -> Iterator[threading.Thread]:
    """Spark's JVM starts while the writer is being killed, not after."""
    from pulsar_lens.plugins.spark import session

    os.environ.setdefault("SPARK_TESTING", "1")
    starting = threading.Thread(target=session.get, args=("local[2]",), daemon=True)
    starting.start()
    yield starting
    starting.join(timeout=120)


def test_kill_9_at_random_points_loses_nothing_and_shows_nothing_half_written(
    tmp_path: Path, spark_started: threading.Thread
) -> None:
    root = tmp_path / "store"
    started = time.monotonic()
    tally = crash_many(root)
    killing = time.monotonic() - started
    left = on_disk(root)
    assert left["left_sources"] > 0, "the last kill was to leave a compaction's sources"
    assert left["unindexed"] > 0, "no kill left the files of a poll without its index row"
    for path in root.rglob("*.parquet"):
        pq.read_table(path)  # (a): complete files only, whatever the kill interrupted
    store = Store(root)
    expected = check_store(store, tally.completed)
    assert store.quarantined_files() == 0
    checked = time.monotonic()
    spark_started.join(timeout=120)
    spark_ready = time.monotonic()
    check_spark(root, expected, store.snapshots()["snapshot_id"].tolist())
    print(
        f"\ncrash safety: {tally.runs} runs, {tally.kills} kills ({tally.targeted} aimed at a "
        f"compaction step), {tally.compaction_kills} inside a compaction "
        f"{dict(tally.phases)}, {len(tally.completed)} writes completed, "
        f"{len(store.snapshots())} polls indexed; left on disk {dict(left)}; "
        f"kill loop {killing:.1f}s, checks {checked - started - killing:.1f}s, waiting for "
        f"Spark {spark_ready - checked:.1f}s, Spark reads {time.monotonic() - spark_ready:.1f}s; "
        f"CPU: writers {_cpu(resource.RUSAGE_CHILDREN):.1f}s, "
        f"this process {_cpu(resource.RUSAGE_SELF):.1f}s, Spark's JVM {_descendants_cpu():.1f}s"
    )


def test_retention_cut_short_leaves_no_poll_without_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector killed while retention deletes old files: the polls still indexed keep
    all their rows, whichever table's files went first."""
    from tests.core.snapshots import T0, make_snapshot

    store = Store(tmp_path / "store")
    for hours in range(0, 72, 6):
        store.write(make_snapshot(at=T0 + dt.timedelta(hours=hours)))
    files = sum(1 for _ in store.root.rglob("*.parquet"))
    delete = dataset.remove_before
    calls: list[str] = []

    def killed_after_one_table(table_dir: Path, cutoff: dt.datetime) -> int:
        if calls:
            raise KeyboardInterrupt("killed")  # what is on disk now is what a kill leaves
        calls.append(table_dir.name)
        return delete(table_dir, cutoff)

    monkeypatch.setattr(dataset, "remove_before", killed_after_one_table)
    with pytest.raises(KeyboardInterrupt):
        store.apply_retention(max_age=dt.timedelta(days=1), now=T0 + dt.timedelta(days=3))
    monkeypatch.undo()
    assert sum(1 for _ in store.root.rglob("*.parquet")) < files, "killed before deleting"
    check_store(Store(tmp_path / "store"), [])
