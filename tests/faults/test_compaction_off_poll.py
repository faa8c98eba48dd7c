"""Compaction of closed days and retention run beside the polls, not inside them: a slow
compaction never delays the next poll's heartbeat, still happens, and never runs twice at
once, for one loop or for several loops sharing a store."""

from __future__ import annotations

import datetime as dt
import errno
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pulsar_lens.collectors.heartbeat import Heartbeat
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from tests.core.snapshots import make_snapshot

DAY = dt.date(2026, 11, 21)
LATE = dt.datetime(2026, 11, 22, 23, 59, 58, tzinfo=dt.UTC)  # the day after DAY, near its end
HUNG = 60.0  # how long a held compaction waits at most: far beyond any poll


class HeldStore(Store):
    """A real store whose compaction waits for `release` and counts how many run at once."""

    def __init__(self, root: Path, gauge: Gauge) -> None:
        super().__init__(root)
        self.gauge = gauge

    def compact_closed(self, *, before: dt.date, stop: Callable[[], bool] | None = None) -> int:
        with self.gauge:
            self.gauge.release.wait(HUNG)
            return super().compact_closed(before=before, stop=stop)


class Gauge:
    """Compactions started, running and the most that ran at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self._lock = threading.Lock()
        self.calls = 0
        self.running = 0
        self.most = 0

    def __enter__(self) -> None:
        with self._lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        self.started.set()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.running -= 1


class Clock:
    """Wall time that moves one second per poll, from LATE: the third poll is the next day."""

    def __init__(self) -> None:
        self.at = LATE

    def now(self) -> dt.datetime:
        return self.at

    def poll(self) -> Snapshot:
        snapshot = make_snapshot(at=self.at)
        self.at += dt.timedelta(seconds=1)
        return snapshot


def closed_day(root: Path) -> None:
    """Three snapshots on DAY, one file each per table: a day to compact."""
    store = Store(root)
    for minute in range(3):
        store.write(make_snapshot(at=dt.datetime(2026, 11, 21, 8, minute, tzinfo=dt.UTC)))


def day_files(root: Path, day: dt.date) -> list[Path]:
    return sorted((root / "topics" / f"date={day}").glob("*.parquet"))


def timed_poll(loop: PollLoop) -> tuple[Heartbeat, float]:
    started = time.monotonic()
    beat = loop.poll_once()
    return beat, time.monotonic() - started


def test_a_held_compaction_delays_no_poll_and_runs_once_at_a_time(tmp_path: Path) -> None:
    closed_day(tmp_path)
    gauge = Gauge()
    clock = Clock()
    beats: list[Heartbeat] = []
    loop = PollLoop(
        clock.poll, HeldStore(tmp_path, gauge), on_heartbeat=beats.append, now=clock.now
    )
    try:
        first, first_took = timed_poll(loop)
        assert gauge.started.wait(10)  # the first poll started compacting the closed day
        later = [timed_poll(loop) for _ in range(3)]  # the day changes at the third poll
        assert [b.snapshot_id is not None for b in beats] == [True] * 4
        # held for up to a minute, yet every poll and its heartbeat came at once
        assert max(took for _, took in [(first, first_took), *later]) < HUNG / 4
        assert gauge.calls == 1 and gauge.running == 1  # the new day's waits its turn
        assert len(day_files(tmp_path, DAY)) == 3
    finally:
        gauge.release.set()
        assert loop.wait_housekeeping(30)
    compacted = day_files(tmp_path, DAY)
    assert len(compacted) == 1 and "compact" in compacted[0].name
    loop.poll_once()  # after the held run: the new day's compaction starts
    assert loop.wait_housekeeping(30)
    assert gauge.calls == 2 and gauge.most == 1
    assert len(day_files(tmp_path, dt.date(2026, 11, 22))) == 1
    assert len(Store(tmp_path).snapshots()) == 3 + 5


class WatchedLock:
    """A housekeeping lock that tells when a caller found it taken and waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting = threading.Event()

    def __enter__(self) -> WatchedLock:
        if not self._lock.acquire(blocking=False):
            self.waiting.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_loops_sharing_a_store_compact_one_at_a_time(tmp_path: Path) -> None:
    closed_day(tmp_path)
    gauge = Gauge()
    lock = WatchedLock()
    clocks = {"east": Clock(), "west": Clock()}
    loops = [
        PollLoop(
            clock.poll,
            HeldStore(tmp_path, gauge),
            on_heartbeat=lambda beat: None,
            cluster=name,
            housekeeping_lock=lock,
            now=clock.now,
        )
        for name, clock in clocks.items()
    ]
    try:
        for loop in loops:
            _, took = timed_poll(loop)
            assert took < HUNG / 4
        assert gauge.started.wait(10)
        assert lock.waiting.wait(10)  # the second loop's housekeeping came, and was held back
        assert gauge.calls == 1
    finally:
        gauge.release.set()
        assert all(loop.wait_housekeeping(30) for loop in loops)
    assert gauge.calls == 2 and gauge.most == 1  # the second ran after, finding nothing left
    assert len(day_files(tmp_path, DAY)) == 1


def test_run_waits_for_the_housekeeping_under_way_before_it_returns(tmp_path: Path) -> None:
    closed_day(tmp_path)
    gauge = Gauge()
    clock = Clock()
    loop = PollLoop(
        clock.poll, HeldStore(tmp_path, gauge), interval=0.01, max_polls=2, now=clock.now
    )
    threading.Timer(0.5, gauge.release.set).start()
    started = time.monotonic()
    assert loop.run() == 2
    assert time.monotonic() - started >= 0.4  # it waited for the held compaction
    assert gauge.running == 0 and len(day_files(tmp_path, DAY)) == 1


class FullStore(Store):
    """A real store on a disk too full for a compaction's new file."""

    compactions = 0
    retentions = 0

    def compact_closed(self, *, before: dt.date, stop: Callable[[], bool] | None = None) -> int:
        self.compactions += 1
        raise OSError(errno.ENOSPC, "No space left on device", "/store/.x.parquet.1.tmp")

    def apply_retention(self, *, max_age: dt.timedelta, now: dt.datetime | None = None) -> int:
        self.retentions += 1
        return super().apply_retention(max_age=max_age, now=now)


def test_a_failing_compaction_is_one_log_line_and_polling_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    beats: list[Heartbeat] = []
    store = FullStore(tmp_path)
    clock = Clock()  # its time, for retention too: else it deletes the polls as they are written
    loop = PollLoop(
        clock.poll, store, interval=0.01, max_polls=3, on_heartbeat=beats.append, now=clock.now
    )
    with caplog.at_level(logging.INFO, logger="pulsar_lens.collectors.loop"):
        assert loop.run() == 3
    assert all(b.snapshot_id for b in beats)
    failures = [r for r in caplog.records if "failed; polling goes on" in r.getMessage()]
    assert [r.getMessage() for r in failures] == [
        "compacting the closed days failed; polling goes on: ENOSPC: No space left on device"
    ]
    assert all(r.exc_info is None for r in failures)
    # retention still ran (it frees space); the compaction waits an hour, not the next poll
    assert store.retentions == 1 and store.compactions == 1


def test_a_stopped_loop_leaves_the_days_not_yet_compacted_for_its_next_start(
    tmp_path: Path,
) -> None:
    for day in (19, 20, 21):  # three closed days, each with several files per table
        store = Store(tmp_path)
        for minute in range(2):
            store.write(make_snapshot(at=dt.datetime(2026, 11, day, 8, minute, tzinfo=dt.UTC)))
    gauge = Gauge()
    clock = Clock()
    loop = PollLoop(clock.poll, HeldStore(tmp_path, gauge), now=clock.now, max_polls=5)
    loop.poll_once()
    assert gauge.started.wait(10)
    loop.stop()  # while the compaction is held: it finishes the day it is on, no more
    gauge.release.set()
    assert loop.wait_housekeeping(30)
    compacted = [
        day for day in (19, 20, 21) if len(day_files(tmp_path, dt.date(2026, 11, day))) == 1
    ]
    assert compacted == []  # the stop came before the first day's turn
    assert len(list((tmp_path / "brokers").glob("date=2026-11-19/*.parquet"))) == 2
    restarted = PollLoop(clock.poll, Store(tmp_path), now=clock.now, max_polls=1)
    restarted.run()
    assert all(len(day_files(tmp_path, dt.date(2026, 11, d))) == 1 for d in (19, 20, 21))
