"""The collect process's health: the verdict /health answers with, the notices' words, and the
health file written whole, beside the store and in a spare copy a refusing store cannot stop."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest

from pulsar_lens.collectors.health import (
    HEALTH_FILE,
    HealthRecorder,
    analyses_notice,
    health_paths,
    judge,
    overrun_notice,
    read_health,
    to_json,
    write_notice,
)
from pulsar_lens.collectors.heartbeat import Heartbeat
from pulsar_lens.collectors.loop import MAX_UNWRITTEN
from pulsar_lens.core.passes import PassProgress

T0 = dt.datetime(2026, 3, 4, 12, 5, tzinfo=dt.UTC)
EROFS = "could not write snapshot sha256:ab under /data/store: EROFS: Read-only file system"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def beat(
    *,
    duration: float = 0.5,
    write_error: str | None = None,
    cluster: str | None = None,
    reachable: bool = True,
    retry_in: float | None = None,
) -> Heartbeat:
    return Heartbeat(
        at=T0,
        topics=3,
        subscriptions=2,
        requests=9,
        errors=0 if reachable else 9,
        duration=duration,
        snapshot_id=None if write_error or not reachable else "sha256:ab",
        write_error=write_error,
        cluster=cluster,
        reachable=reachable,
        retry_in=retry_in,
    )


def recorder(root: Path, clock: Clock, **kwargs: object) -> HealthRecorder:
    return HealthRecorder(root, interval=30.0, deadline=120.0, now=clock, **kwargs)  # type: ignore[arg-type]


def test_health_polls_on_time_and_stored_are_healthy(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    clock.advance(30)
    health.record(beat())
    status, body = health.answer()
    assert status == 200
    assert json.loads(body) == {"status": "ok", "problems": [], "notes": []}


def test_health_refused_writes_fail_it_counting_them_since_the_first(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    clock.advance(30)
    for _ in range(3):
        health.record(beat(write_error=EROFS))
        clock.advance(30)
    status, body = health.answer()
    assert status == 503
    (problem,) = json.loads(body)["problems"]
    assert problem == (
        f"the store refused the last 3 write(s) since 12:05 UTC: {EROFS}; snapshots are "
        f"kept in memory (up to {MAX_UNWRITTEN}) and retried"
    )
    health.record(beat())  # the store takes writes again
    assert health.answer()[0] == 200


def test_health_a_silent_loop_fails_it_after_three_intervals_and_the_deadline(
    tmp_path: Path,
) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    clock.advance(3 * 30 + 120 - 1)
    assert health.answer()[0] == 200
    clock.advance(2)
    status, body = health.answer()
    assert status == 503
    assert json.loads(body)["problems"] == [
        "no poll has ended for 3m31s; one is expected every 30s"
    ]


def test_health_no_poll_past_the_start_grace_fails_it(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    clock.advance(3 * 30 + 120 - 1)
    assert health.answer()[0] == 200
    clock.advance(2)
    status, body = health.answer()
    assert status == 503
    assert "no poll has ended in the 3m31s since the start" in body


def test_health_the_backoff_of_an_unreachable_cluster_is_not_silence(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat(reachable=False, retry_in=120.0))
    clock.advance(120 + 2 * 30 + 120 - 1)
    status, body = health.answer()
    assert status == 200  # restarting would not bring the cluster back
    assert json.loads(body)["notes"] == ["the last poll reached no admin endpoint"]


def test_health_an_overrun_is_a_note_saying_what_to_change(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat(duration=47.2))
    status, body = health.answer()
    assert status == 200
    (note,) = json.loads(body)["notes"]
    assert note.startswith("the last poll took 47s, over the 30s interval, so polls run back")
    assert "PULSAR_LENS_POLL_INTERVAL" in note and "--namespace" in note


def test_health_overrun_names_the_poll_its_write_and_the_settings_to_change(
    tmp_path: Path,
) -> None:
    health = HealthRecorder(tmp_path, interval=30.0, deadline=120.0, detail_budget=500, now=Clock())
    health.record(dataclasses.replace(beat(duration=47.2), write_seconds=12.6))
    notice = overrun_notice(health.report().loops[0])
    assert notice is not None
    assert notice.startswith("the last poll took 47s and storing it 13s, over the 30s interval")
    # 2.5 x (47.2 + 12.6) s = 149.5 s, rounded up to a minute
    assert "poll less often, every 3m or more (--interval or PULSAR_LENS_POLL_INTERVAL)" in notice
    assert "fewer per-topic calls (PULSAR_LENS_DETAIL_BUDGET, now 500)" in notice
    assert "PULSAR_LENS_POLL_DEADLINE" not in notice  # the poll did not reach it


def test_health_overrun_that_reached_the_deadline_says_to_raise_it(tmp_path: Path) -> None:
    health = HealthRecorder(tmp_path, interval=30.0, deadline=120.0, now=Clock())
    health.record(beat(duration=121.0))
    notice = str(overrun_notice(health.report().loops[0]))
    assert "reached its 2m deadline and its last calls were cut" in notice
    assert "raise PULSAR_LENS_POLL_DEADLINE with it" in notice


def test_health_overrun_fields_survive_the_health_file(tmp_path: Path) -> None:
    health = HealthRecorder(tmp_path, interval=30.0, deadline=120.0, detail_budget=200, now=Clock())
    health.record(dataclasses.replace(beat(duration=47.2), write_seconds=12.6))
    (loop,) = read_health(tmp_path).loops  # type: ignore[union-attr]
    assert (loop.write_seconds, loop.detail_budget) == (12.6, 200)
    assert overrun_notice(loop) == overrun_notice(health.report().loops[0])


@pytest.mark.parametrize(
    ("duration", "interval", "said"),
    [(1.4, 1.0, "took 1.4s, over the 1s interval"), (30.0, 30.0, None), (0.2, 1.0, None)],
)
def test_health_overrun_notice_only_past_the_interval(
    tmp_path: Path, duration: float, interval: float, said: str | None
) -> None:
    health = HealthRecorder(tmp_path, interval=interval, deadline=5.0, now=Clock())
    health.record(beat(duration=duration))
    notice = overrun_notice(health.report().loops[0])
    assert (notice is None) if said is None else (said in str(notice))


def test_health_several_clusters_each_judged_and_named(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock, clusters=("east", "west"))
    health.record(beat(cluster="east"))
    health.record(beat(cluster="west", write_error=EROFS))
    verdict = judge(health.report(), now=clock())
    assert [p.split(":")[0] for p in verdict.problems] == ["cluster west"]
    assert write_notice(health.report().loop_of("east")) is None  # type: ignore[arg-type]


def test_health_file_is_written_in_the_store_and_read_back(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat(write_error=EROFS))
    assert (tmp_path / HEALTH_FILE).is_file()
    assert read_health(tmp_path) == health.report()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_health_file_of_a_store_that_refuses_writes_is_read_from_the_spare_copy(
    tmp_path: Path,
) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    in_store, spare = health_paths(tmp_path)
    # a folder where the file belongs: refused even to root, like a read-only store
    in_store.unlink()
    in_store.mkdir()
    clock.advance(30)
    health.record(beat(write_error=EROFS))
    assert spare.is_file()
    report = read_health(tmp_path)
    assert report is not None and report.loops[0].failed_writes == 1


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", '{"loops": 3}', '{"loops": [{"interval": "x"}]}', '{"started_at": "now"}'],
)
def test_health_file_unreadable_is_no_report(tmp_path: Path, text: str) -> None:
    for path in health_paths(tmp_path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert read_health(tmp_path) is None


def long_pass(clock: Clock) -> PassProgress:
    """A results pass of 20 s that left 2 polls unanalysed, 8 since the start."""
    return PassProgress(passes=61, finished_at=clock(), seconds=20.0, skipped=2, skipped_total=8)


def test_health_file_keeps_the_results_passes_and_reads_them_back(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    clock.advance(20)
    health.record_analyses(long_pass(clock))
    report = read_health(tmp_path)
    assert report == health.report()
    assert report is not None and report.analyses == long_pass(clock)
    assert report.written_at == clock()  # a pass rewrites the file, not only a poll


def test_health_file_without_the_results_passes_still_reads(tmp_path: Path) -> None:
    """A file an older collect process wrote has no `analyses`: nothing is known of them."""
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    health.record_analyses(long_pass(clock))
    written = to_json(health.report())
    del written["analyses"]
    for path in health_paths(tmp_path):
        path.write_text(json.dumps(written))
    report = read_health(tmp_path)
    assert report is not None and report.analyses is None
    assert report.loops == health.report().loops
    assert analyses_notice(report) is None


def test_health_analyses_behind_the_polls_are_a_note_saying_what_to_change(
    tmp_path: Path,
) -> None:
    clock = Clock()
    health = HealthRecorder(tmp_path, interval=8.0, deadline=120.0, now=clock)
    health.record(beat())
    health.record_analyses(long_pass(clock))
    status, body = health.answer()
    assert status == 200  # a note, not a problem: restarting would not help
    (note,) = json.loads(body)["notes"]
    assert note.startswith("the analyses of the newest poll took 20s, over the 8s interval")
    assert "2 poll(s) written meanwhile went unanalysed" in note
    assert "every 30s or more (--interval or PULSAR_LENS_POLL_INTERVAL)" in note


def test_health_analyses_that_keep_up_are_no_note(tmp_path: Path) -> None:
    clock = Clock()
    health = recorder(tmp_path, clock)
    health.record(beat())
    health.record_analyses(
        PassProgress(passes=3, finished_at=clock(), seconds=12.0, skipped=0, skipped_total=4)
    )
    assert analyses_notice(health.report()) is None  # past skips alone say nothing now
    assert json.loads(health.answer()[1])["notes"] == []
