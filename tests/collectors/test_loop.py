"""The polling loop, driven by a fake poll and a fake clock: cadence, backoff, storage."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.collectors.heartbeat import Heartbeat, is_unreachable
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.core.model import EndpointError, EventRecord, Snapshot
from pulsar_lens.core.store import Store
from tests.core.snapshots import T0, make_snapshot, unreachable_snapshot

POLL_SECONDS = 0.42


class FakeTime:
    """A monotonic clock that only moves when the loop sleeps or a poll takes time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return False

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.now - 1000.0)


def scripted_poll(
    fake: FakeTime,
    script: Sequence[Callable[[dt.datetime], Snapshot]],
    before: Callable[[], object] = lambda: None,
) -> Callable[[], Snapshot]:
    """A poll that returns script[i](now) on call i, taking POLL_SECONDS each time; it calls
    `before()` first."""
    calls = iter(script)

    def poll() -> Snapshot:
        before()
        at = fake.wall()
        fake.now += POLL_SECONDS
        return next(calls)(at)

    return poll


def ok(at: dt.datetime) -> Snapshot:
    return make_snapshot(at=at)


def down(at: dt.datetime) -> Snapshot:
    return unreachable_snapshot(at=at)


def make_loop(
    tmp_path: Path,
    fake: FakeTime,
    script: Sequence[Callable[[dt.datetime], Snapshot]],
    before: Callable[[], object] = lambda: None,
    **kw: object,
) -> tuple[PollLoop, list[Heartbeat]]:
    beats: list[Heartbeat] = []
    options: dict[str, object] = {
        "interval": 30.0,
        "jitter": 0.0,
        "max_polls": len(script),
        "clock": fake.clock,
        "sleep": fake.sleep,
        "now": fake.wall,
        "on_heartbeat": beats.append,
    }
    options.update(kw)
    loop = PollLoop(scripted_poll(fake, script, before), Store(tmp_path / "store"), **options)  # type: ignore[arg-type]
    return loop, beats


def test_loop_stores_each_poll_until_max_polls(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [ok, ok, ok])
    assert loop.run() == 3
    assert len(loop.store.snapshots()) == 3
    assert [b.snapshot_id for b in beats] == loop.store.snapshots()["snapshot_id"].tolist()
    assert len(fake.sleeps) == 2  # no sleep after the last poll


def test_loop_waits_the_interval_minus_the_poll_time(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, _ = make_loop(tmp_path, fake, [ok, ok, ok])
    loop.run()
    assert fake.sleeps == pytest.approx([30.0 - POLL_SECONDS] * 2)


class SlowStore(Store):
    """A store whose every write takes `WRITE_SECONDS` of the fake clock."""

    fake: FakeTime

    def write(self, *args: Any, **kw: Any) -> str:
        self.fake.now += WRITE_SECONDS
        return super().write(*args, **kw)


WRITE_SECONDS = 8.0


def slow_store_loop(tmp_path: Path, fake: FakeTime, polls: int, **kw: Any) -> PollLoop:
    store = SlowStore(tmp_path / "store")
    store.fake = fake
    loop, _ = make_loop(tmp_path, fake, [ok] * polls, **kw)
    loop.store = store
    return loop


def test_loop_waits_the_interval_minus_the_poll_and_its_write(tmp_path: Path) -> None:
    fake = FakeTime()
    slow_store_loop(tmp_path, fake, 3).run()
    assert fake.sleeps == pytest.approx([30.0 - POLL_SECONDS - WRITE_SECONDS] * 2)


def test_loop_heartbeat_says_a_poll_and_its_write_overran_the_interval(tmp_path: Path) -> None:
    fake = FakeTime()
    beats: list[Heartbeat] = []
    loop = slow_store_loop(
        tmp_path,
        fake,
        2,
        interval=5.0,
        deadline=120.0,
        detail_budget=500,
        on_heartbeat=beats.append,
    )
    loop.run()
    assert fake.sleeps == [0.0]  # back to back
    overrun = beats[0].overrun
    assert overrun is not None
    assert (overrun.took, overrun.wrote, overrun.interval) == pytest.approx(
        (POLL_SECONDS, WRITE_SECONDS, 5.0)
    )
    assert (overrun.deadline, overrun.detail_budget) == (120.0, 500)
    assert overrun.needed_interval == 30.0  # 2.5 x 8.42 s, rounded up to 10 s
    assert beats[0].interval == 5.0
    line = beats[0].line()
    assert " over_interval=5s needs_interval=30s " in line
    assert "(raise PULSAR_LENS_POLL_INTERVAL, or lower PULSAR_LENS_DETAIL_BUDGET)" in line


def test_loop_heartbeat_of_a_poll_within_its_interval_has_no_overrun(tmp_path: Path) -> None:
    fake = FakeTime()
    beats: list[Heartbeat] = []
    slow_store_loop(tmp_path, fake, 1, on_heartbeat=beats.append).run()
    assert beats[0].overrun is None
    assert "over_interval" not in beats[0].line()


def test_loop_jitters_within_ten_percent(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, _ = make_loop(tmp_path, fake, [ok] * 40, jitter=0.1, rng=random.Random(7))
    loop.run()
    waits = [s + POLL_SECONDS for s in fake.sleeps]
    assert all(27.0 <= w <= 33.0 for w in waits)
    assert len({round(w, 3) for w in waits}) > 10


def test_loop_backs_off_exponentially_while_unreachable(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [down] * 5 + [ok, ok], max_backoff=300.0)
    loop.run()
    assert fake.sleeps[:5] == [60.0, 120.0, 240.0, 300.0, 300.0]
    assert fake.sleeps[5] == pytest.approx(30.0 - POLL_SECONDS)
    assert [b.reachable for b in beats] == [False] * 5 + [True] * 2
    assert len(loop.store.snapshots()) == 2  # unreachable polls are not stored


def test_loop_backoff_by_default_stops_at_four_intervals(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, _ = make_loop(tmp_path, fake, [down] * 4 + [ok])  # interval 30 s
    loop.run()
    assert fake.sleeps[:4] == [60.0, 120.0, 120.0, 120.0]  # back within 2 min, not 5


def test_loop_backoff_resets_after_a_success(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, _ = make_loop(tmp_path, fake, [down, down, ok, down, ok])
    loop.run()
    assert fake.sleeps[:4] == pytest.approx([60.0, 120.0, 30.0 - POLL_SECONDS, 60.0])


def test_loop_stores_partial_snapshots_without_backing_off(tmp_path: Path) -> None:
    fake = FakeTime()
    error = EndpointError("GET /admin/v2/x", 500, "boom")

    def partial(at: dt.datetime) -> Snapshot:
        return dataclasses.replace(make_snapshot(at=at), errors=(error,))

    loop, beats = make_loop(tmp_path, fake, [partial, ok])
    loop.run()
    assert not is_unreachable(partial(T0))
    assert beats[0].errors == 1 and beats[0].reachable
    assert loop.store.snapshots()["partial"].tolist() == [True, False]
    assert fake.sleeps == pytest.approx([30.0 - POLL_SECONDS])


def test_loop_exposes_the_last_successful_poll(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [down, ok, down, down])
    assert loop.last_success is None and loop.staleness() is None
    loop.run()
    assert loop.last_success == beats[1].at
    assert loop.consecutive_failures == 2
    assert loop.staleness(beats[1].at + dt.timedelta(minutes=3)) == dt.timedelta(minutes=3)


def test_loop_diffs_each_snapshot_against_the_previous(tmp_path: Path) -> None:
    fake = FakeTime()
    pairs: list[tuple[dt.datetime, dt.datetime]] = []

    def diff(previous: Snapshot, current: Snapshot) -> list[EventRecord]:
        pairs.append((previous.collected_at, current.collected_at))
        return [EventRecord(at=current.collected_at, kind="consumer_joined", subject="t0/sub/c1")]

    loop, beats = make_loop(tmp_path, fake, [ok, down, ok, ok], diff=diff)
    loop.run()
    assert pairs == [(beats[0].at, beats[2].at), (beats[2].at, beats[3].at)]
    events = loop.store.read("events")
    assert events["snapshot_id"].to_pylist() == [beats[2].snapshot_id, beats[3].snapshot_id]
    assert [b.events for b in beats] == [0, 0, 1, 1]


def test_loop_holds_the_garbage_collector_off_from_the_poll_to_the_stored_snapshot(
    tmp_path: Path,
) -> None:
    assert gc.isenabled()
    seen: list[tuple[str, bool]] = []

    def diff(previous: Snapshot, current: Snapshot) -> list[EventRecord]:
        seen.append(("diff", gc.isenabled()))
        return []

    def on_heartbeat(beat: Heartbeat) -> None:  # the analyses start here: collected again
        seen.append(("heartbeat", gc.isenabled()))

    loop, _ = make_loop(
        tmp_path,
        FakeTime(),
        [ok, ok],
        before=lambda: seen.append(("poll", gc.isenabled())),
        diff=diff,
        on_heartbeat=on_heartbeat,
    )
    write = loop.store.write

    def watched_write(snapshot: Snapshot, **kw: Any) -> str:
        seen.append(("write", gc.isenabled()))
        return write(snapshot, **kw)

    loop.store.write = watched_write  # type: ignore[method-assign]
    loop.run()
    first = [("poll", False), ("write", False), ("heartbeat", True)]
    then = [("poll", False), ("diff", False), ("write", False), ("heartbeat", True)]
    assert seen == first + then
    assert gc.isenabled()


def test_loop_heartbeat_line(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [ok, down, down])
    loop.run()
    assert beats[0].line() == (
        "poll 2026-11-21T12:00:00Z topics=3 subs=3 requests=9 errors=0 duration=0.42s write=0.00s"
    )
    refused = "first_error: GET /admin/v2/clusters: connection refused"
    said = "topics=0 subs=0 requests=1 errors=1 duration=0.42s unreachable retry_in=60.0s"
    assert beats[1].line().endswith(f"{said} {refused}")
    assert beats[1].problems == ("GET /admin/v2/clusters: connection refused",)
    assert beats[2].line().endswith(f"errors=1 duration=0.42s unreachable {refused}")  # done


def test_loop_heartbeat_says_how_long_storing_the_snapshot_took(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [ok, down])
    write = loop.store.write

    def slow_write(snapshot: Snapshot, **kw: Any) -> str:
        fake.now += 1.25  # the store takes its time; the poll's own duration stays apart
        return write(snapshot, **kw)

    loop.store.write = slow_write  # type: ignore[method-assign]
    loop.run()
    assert beats[0].write_seconds == pytest.approx(1.25)
    assert beats[0].duration == pytest.approx(POLL_SECONDS)
    assert beats[0].line().endswith("duration=0.42s write=1.25s")
    assert beats[1].write_seconds is None  # nothing stored: no write figure
    assert "write=" not in beats[1].line()


def test_loop_heartbeat_line_says_partial_when_some_endpoints_failed(tmp_path: Path) -> None:
    def partial(at: dt.datetime) -> Snapshot:
        error = EndpointError(endpoint="GET /admin/v2/brokers", status=503, message="busy")
        return dataclasses.replace(make_snapshot(at=at), errors=(error,))

    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [partial])
    loop.run()
    said = "duration=0.42s write=0.00s partial first_error: GET /admin/v2/brokers (HTTP 503): busy"
    assert beats[0].line().endswith(said)
    assert beats[0].snapshot_id is not None


def test_loop_a_raising_poll_counts_as_a_failure(tmp_path: Path) -> None:
    fake = FakeTime()

    def broken(at: dt.datetime) -> Snapshot:
        raise RuntimeError("parser bug")

    loop, beats = make_loop(tmp_path, fake, [broken, ok])
    assert loop.run() == 2
    assert beats[0].errors == 1 and not beats[0].reachable
    assert len(loop.store.snapshots()) == 1


def test_loop_keyboard_interrupt_stops_cleanly(tmp_path: Path) -> None:
    fake = FakeTime()

    def interrupted(at: dt.datetime) -> Snapshot:
        raise KeyboardInterrupt

    loop, _ = make_loop(tmp_path, fake, [ok, interrupted, ok], max_polls=None)
    assert loop.run() == 1
    assert len(loop.store.snapshots()) == 1


def test_loop_stop_wakes_a_sleeping_loop(tmp_path: Path) -> None:
    stored = threading.Event()

    def poll() -> Snapshot:
        return make_snapshot(at=dt.datetime.now(dt.UTC))

    loop = PollLoop(poll, Store(tmp_path), interval=3600.0, on_heartbeat=lambda beat: stored.set())
    thread = threading.Thread(target=loop.run)
    thread.start()
    assert stored.wait(10)
    loop.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert loop.polls == 1


def test_loop_compacts_the_closed_day_when_the_day_changes(tmp_path: Path) -> None:
    fake = FakeTime()
    fake.now += (dt.datetime(2026, 11, 21, 23, 59, 0, tzinfo=dt.UTC) - T0).total_seconds()
    loop, _ = make_loop(tmp_path, fake, [ok, ok, ok])
    loop.run()
    store = loop.store
    day, next_day = dt.date(2026, 11, 21), dt.date(2026, 11, 22)
    assert store.days("topics") == [day, next_day]
    topic_files = list((tmp_path / "store" / "topics" / f"date={day}").glob("*.parquet"))
    assert len(topic_files) == 1 and "compact" in topic_files[0].name
    assert len(store.snapshots()) == 3


def test_loop_applies_retention_when_due(tmp_path: Path) -> None:
    fake = FakeTime()
    loop, _ = make_loop(
        tmp_path,
        fake,
        [ok, ok, ok],
        max_polls=1,
        retention=dt.timedelta(days=7),
        housekeeping_every=50.0,
    )
    store = loop.store
    store.write(make_snapshot(at=T0 - dt.timedelta(days=10)))
    loop.run()
    assert len(store.snapshots()) == 1  # the first poll applied retention
    store.write(make_snapshot(at=T0 - dt.timedelta(days=9)))
    loop.run()
    assert len(store.snapshots()) == 3  # not due yet
    fake.now += 50.0
    loop.run()
    assert store.snapshots()["collected_at"].min() >= T0
    assert len(store.snapshots()) == 3


def test_loop_a_write_error_keeps_polling_and_writes_the_kept_snapshots_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_lens.core.errors import SnapshotError

    fake = FakeTime()
    loop, beats = make_loop(tmp_path, fake, [ok, ok, ok, ok])
    real_write = loop.store.write
    failing = {"left": 2}

    def write(snapshot: Snapshot, **kw: object) -> str:
        if failing["left"]:
            failing["left"] -= 1
            raise SnapshotError("No space left on device")
        return real_write(snapshot, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(loop.store, "write", write)
    assert loop.run() == 4  # the loop went on through two failed writes
    assert [b.write_error for b in beats] == [
        "No space left on device",
        "No space left on device",
        None,
        None,
    ]
    assert "not_stored (No space left on device)" in beats[0].line()
    assert len(loop.store.snapshots()) == 4  # the two kept back were written at the retry
    assert loop.write_failures == 2 and loop.last_success == beats[-1].at


def changed(at: dt.datetime) -> Snapshot:
    """make_snapshot a while later: t0's consumer left, t1's hash ranges and the bundle's
    owner changed."""
    base = make_snapshot(at=at)
    bundle = dataclasses.replace(base.bundles[0], owner_broker="127.0.0.2:8080")
    consumers = [c for c in base.consumers if c.topic != "persistent://public/default/t0"]
    consumers[0] = dataclasses.replace(consumers[0], hash_ranges=((0, 32767),))
    return dataclasses.replace(base, bundles=(bundle,), consumers=tuple(consumers))


def event_keys(events: Sequence[EventRecord]) -> list[tuple[object, ...]]:
    return sorted((e.kind, e.subject, e.before, e.after) for e in events)


def stored_event_keys(store: Store) -> list[tuple[object, ...]]:
    rows = store.read("events").to_pylist()
    return sorted((r["kind"], r["subject"], r["before"], r["after"]) for r in rows)


def test_loop_after_a_restart_diffs_the_first_poll_against_the_stored_snapshot(
    tmp_path: Path,
) -> None:
    from pulsar_lens.collectors.events import diff

    fake = FakeTime()
    before = make_snapshot(at=T0 - dt.timedelta(minutes=5))
    Store(tmp_path / "store").write(before)  # what the collector stored before it stopped
    loop, beats = make_loop(tmp_path, fake, [changed], diff=diff)
    loop.run()
    expected = diff(before, changed(beats[0].at))
    assert {e.kind for e in expected} == {
        "bundle_owner_changed",
        "consumer_left",
        "hash_ranges_changed",
    }
    assert beats[0].events == len(expected)
    assert stored_event_keys(loop.store) == event_keys(expected)


def test_loop_restores_the_newest_snapshot_of_its_own_cluster(tmp_path: Path) -> None:
    from pulsar_lens.collectors.events import diff

    fake = FakeTime()
    store = Store(tmp_path / "store")
    mine = make_snapshot(at=T0 - dt.timedelta(minutes=5), cluster="west")
    store.write(make_snapshot(at=T0 - dt.timedelta(minutes=9), cluster="west", topics=1))
    store.write(mine)
    store.write(changed(T0 - dt.timedelta(minutes=1)))  # a newer one, of another cluster

    def west(at: dt.datetime) -> Snapshot:
        return dataclasses.replace(changed(at), cluster="west")

    loop, beats = make_loop(tmp_path, fake, [west], diff=diff, cluster="west")
    loop.run()
    assert stored_event_keys(store) == event_keys(diff(mine, west(beats[0].at)))


def test_loop_restore_keeps_the_partial_rules_of_the_stored_snapshot(tmp_path: Path) -> None:
    from pulsar_lens.collectors.events import DIFF_COLUMNS, diff
    from pulsar_lens.collectors.restore import restore_latest
    from pulsar_lens.core.tablerows import columns_of

    fake = FakeTime()
    failed = EndpointError(
        "GET http://127.0.0.1:8080/admin/v2/namespaces/public/default/bundles", 500, "boom"
    )
    before = make_snapshot(at=T0 - dt.timedelta(minutes=5), errors=(failed,))
    Store(tmp_path / "store").write(before)
    restored = restore_latest(Store(tmp_path / "store"), "standalone")
    assert restored is not None
    held = {name: restored.records(name) for name in DIFF_COLUMNS}
    # brokers, bundles, the errors, the durations and requests; of the other tables, what the
    # diff reads
    assert restored == dataclasses.replace(before, **held)
    for name, columns in DIFF_COLUMNS.items():
        assert columns_of(held[name], columns) == columns_of(before.records(name), columns)
    loop, beats = make_loop(tmp_path, fake, [changed], diff=diff)
    loop.run()
    kinds = {e.kind for e in diff(before, changed(beats[0].at))}
    assert kinds == {"consumer_left", "hash_ranges_changed"}  # the bundles failed before
    assert stored_event_keys(loop.store) == event_keys(diff(before, changed(beats[0].at)))


def test_loop_a_stored_snapshot_that_cannot_be_read_back_costs_only_the_first_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import pyarrow as pa

    from pulsar_lens.collectors.events import diff
    from pulsar_lens.core.store import INDEX_SCHEMA

    fake = FakeTime()
    store = Store(tmp_path / "store")
    store.write(make_snapshot(at=T0 - dt.timedelta(minutes=5)))
    row = store.read_latest("snapshots").to_pylist()[0]
    row.update(snapshot_id="sha256:" + "ab" * 32, errors_json="{not json")
    row["collected_at"] = T0 - dt.timedelta(minutes=1)
    store.write_table("snapshots", pa.Table.from_pylist([row], schema=INDEX_SCHEMA))
    loop, beats = make_loop(tmp_path, fake, [changed, ok], diff=diff)
    with caplog.at_level("WARNING", logger="pulsar_lens.collectors.loop"):
        assert loop.run() == 2
    assert beats[0].events == 0 and beats[0].snapshot_id is not None
    assert beats[1].events > 0  # the second poll diffs against the first as always
    assert "could not read back the last stored snapshot of standalone" in caplog.text
    assert all(r.exc_info is None for r in caplog.records)


def test_loop_keeps_the_newest_unwritten_snapshots_and_says_which_it_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from pulsar_lens.collectors.loop import MAX_UNWRITTEN
    from pulsar_lens.core.errors import SnapshotError

    fake = FakeTime()
    polls = MAX_UNWRITTEN + 3
    loop, beats = make_loop(tmp_path, fake, [ok] * polls)
    real_write = loop.store.write

    def write(snapshot: Snapshot, **kw: object) -> str:
        if loop.polls < polls:  # the disk is full until the last poll
            raise SnapshotError("ENOSPC: No space left on device")
        return real_write(snapshot, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(loop.store, "write", write)
    with caplog.at_level("ERROR", logger="pulsar_lens.collectors.loop"):
        loop.run()
    stored = loop.store.snapshots()["collected_at"].tolist()
    assert stored == [b.at for b in beats[-MAX_UNWRITTEN:]]  # the newest, the last included
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("dropped")]
    assert len(dropped) == polls - MAX_UNWRITTEN
    assert dropped[0].startswith("dropped the snapshot of 2026-11-21T12:00:00")
