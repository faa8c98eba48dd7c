"""The Overview's and the sidebar's notices of the collect process's health: a store that
refuses writes, a poll over its interval and analyses that fall behind the polls, read from the
health file the collect process writes, shown even when no snapshot was ever stored, and not
once that file is stale."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from pulsar_lens.collectors.health import HealthRecorder
from pulsar_lens.collectors.loop import Heartbeat
from pulsar_lens.core.passes import PassProgress
from pulsar_lens.dashboard.health_notices import (
    compute_notices,
    compute_short_notices,
    current_lag,
    current_loop,
)
from tests.dashboard.scenario import write_scenario

AppRunner = Callable[..., AppTest]
EROFS = "could not write snapshot sha256:ab under /data/store: EROFS: Read-only file system"


def beat(*, duration: float = 0.5, write_error: str | None = None) -> Heartbeat:
    return Heartbeat(
        at=dt.datetime.now(dt.UTC),
        topics=3,
        subscriptions=2,
        requests=9,
        errors=0,
        duration=duration,
        snapshot_id=None if write_error else "sha256:ab",
        write_error=write_error,
    )


def refusing(root: Path, *, now: Callable[[], dt.datetime] | None = None) -> HealthRecorder:
    """The health of a collector whose store refused its last three writes, each poll 47 s."""
    root.mkdir(parents=True, exist_ok=True)
    clock = now or (lambda: dt.datetime.now(dt.UTC))
    health = HealthRecorder(root, interval=10.0, deadline=120.0, now=clock)
    health.record(beat())
    for _ in range(3):
        health.record(beat(duration=47.0, write_error=EROFS))
    return health


def texts(elements: object) -> list[str]:
    return [e.value.replace("\\", "") for e in elements]  # type: ignore[attr-defined]


def test_health_notices_overview_says_the_store_refuses_writes_and_the_poll_overran(
    store_dir: Path, app: AppRunner
) -> None:
    write_scenario(store_dir)
    refusing(store_dir)
    at = app()
    assert not at.exception
    since = dt.datetime.now(dt.UTC)  # the notice's HH:MM is of the first refused write
    (refused,) = [t for t in texts(at.main.error) if "refused" in t]
    found = re.fullmatch(r"The store refused the last 3 write\(s\) since (\S+) UTC: (.*)", refused)
    assert found, refused
    assert found[1] in {f"{since - dt.timedelta(minutes=m):%H:%M}" for m in (0, 1)}
    assert found[2] == f"{EROFS}; snapshots are kept in memory (up to 5) and retried."
    (overran,) = [t for t in texts(at.main.warning) if "poll took" in t]
    assert overran.startswith("The last poll took 47s, over the 10s interval, so polls run")
    assert any(t.startswith("Store refuses writes: 3 since") for t in texts(at.sidebar.error))
    short = "Last poll took 47s, over the 10s interval: poll every 2m or more."  # 2.5 x 47 s
    assert short in texts(at.sidebar.warning)


def test_health_notices_overview_says_what_to_change_with_the_measured_poll(
    store_dir: Path, app: AppRunner
) -> None:
    write_scenario(store_dir)
    health = HealthRecorder(store_dir, interval=30.0, deadline=120.0, detail_budget=500)
    health.record(dataclasses.replace(beat(duration=47.2), write_seconds=12.6))
    at = app()
    assert not at.exception
    (overran,) = [t for t in texts(at.main.warning) if "poll took" in t]
    assert overran.startswith("The last poll took 47s and storing it 13s, over the 30s interval")
    assert "every 3m or more (--interval or PULSAR_LENS_POLL_INTERVAL)" in overran
    assert "(PULSAR_LENS_DETAIL_BUDGET, now 500)" in overran
    assert "Last poll took 1m, over the 30s interval: poll every 3m or more." in texts(
        at.sidebar.warning
    )


def test_health_notices_show_on_a_store_that_never_took_a_snapshot(
    store_dir: Path, app: AppRunner
) -> None:
    refusing(store_dir)
    at = app()
    assert not at.exception
    assert any(t.startswith("The store refused the last 3 write(s)") for t in texts(at.error))
    assert any("No snapshots yet" in t for t in texts(at.info))


def test_health_notices_of_a_stale_health_file_are_not_shown(
    store_dir: Path, app: AppRunner
) -> None:
    write_scenario(store_dir)
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    refusing(store_dir, now=lambda: long_ago)
    at = app()
    assert not at.exception
    assert not [t for t in texts(at.error) + texts(at.warning) if "refuse" in t or "took" in t]


def test_health_notices_none_while_writes_succeed_on_time(tmp_path: Path) -> None:
    health = HealthRecorder(tmp_path, interval=10.0, deadline=120.0)
    health.record(beat(duration=9.9))
    now = dt.datetime.now(dt.UTC)
    loop = current_loop(health.report(), None, now=now)
    assert loop is not None
    assert compute_notices(loop) == compute_short_notices(loop) == []


def test_health_notices_follow_the_chosen_cluster(tmp_path: Path) -> None:
    health = HealthRecorder(tmp_path, interval=10.0, deadline=120.0, clusters=("east", "west"))
    health.record(beat())
    health.record(dataclasses.replace(beat(write_error=EROFS), cluster="west"))
    now = dt.datetime.now(dt.UTC)
    assert compute_notices(current_loop(health.report(), "east", now=now)) == []
    (notice,) = compute_notices(current_loop(health.report(), "west", now=now))
    assert notice[0] == "error" and "refused the last 1 write(s)" in notice[1]


def test_health_notices_timeline_page_says_the_store_refuses_writes(
    store_dir: Path, plugin_page: Callable[[str], AppTest]
) -> None:
    """The Incident timeline lays out stored polls; a write refused now left none, so its
    page shows the collector's own notice (its `collector-health` panel)."""
    write_scenario(store_dir)
    refusing(store_dir)
    at = plugin_page("incident-timeline")
    assert not at.exception
    assert any(t.startswith("The store refused the last 3 write(s)") for t in texts(at.main.error))
    assert "**Events over time**" in [m.value for m in at.markdown]


def passes(seconds: float, skipped: int, total: int) -> PassProgress:
    return PassProgress(
        passes=61,
        finished_at=dt.datetime.now(dt.UTC),
        seconds=seconds,
        skipped=skipped,
        skipped_total=total,
    )


def lagging(root: Path, progress: PassProgress, *, interval: float = 8.0) -> HealthRecorder:
    """The health of a collector polling on time whose results passes are `progress`."""
    root.mkdir(parents=True, exist_ok=True)
    health = HealthRecorder(root, interval=interval, deadline=120.0)
    health.record(beat())
    health.record_analyses(progress)
    return health


def test_health_notices_overview_says_the_analyses_fall_behind_and_what_to_set(
    store_dir: Path, app: AppRunner
) -> None:
    write_scenario(store_dir)
    lagging(store_dir, passes(20.0, skipped=2, total=8))
    at = app()
    assert not at.exception
    (behind,) = [t for t in texts(at.main.warning) if "analyses" in t]
    assert behind.startswith(
        "The analyses of the newest poll took 20s, over the 8s interval, so 2 poll(s) written "
        "meanwhile went unanalysed, replaced by a newer one (8 since the collect process "
        "started): poll less often, every 30s or more (--interval or PULSAR_LENS_POLL_INTERVAL)"
    )
    short = (
        "Analyses took 20s against the 8s interval, 2 poll(s) unanalysed: poll every 30s or more."
    )
    assert short in texts(at.sidebar.warning)


def test_health_notices_analyses_that_keep_up_say_nothing(tmp_path: Path) -> None:
    health = lagging(tmp_path, passes(7.9, skipped=0, total=8))
    report = health.report()
    loop = current_loop(report, None, now=dt.datetime.now(dt.UTC))
    lag = current_lag(report, loop)
    assert lag is None
    assert compute_notices(loop, lag) == compute_short_notices(loop, lag) == []


def test_health_notices_analyses_that_left_polls_out_are_said_within_the_interval(
    tmp_path: Path,
) -> None:
    health = lagging(tmp_path, passes(6.5, skipped=1, total=1))
    report = health.report()
    loop = current_loop(report, None, now=dt.datetime.now(dt.UTC))
    (notice,) = compute_notices(loop, current_lag(report, loop))
    assert notice[0] == "warning"
    assert notice[1].startswith("The analyses of the newest poll took 6.5s, within the 8s")
    assert "1 poll(s) written meanwhile went unanalysed" in notice[1]
    assert "PULSAR_LENS_POLL_INTERVAL" in notice[1]


def test_health_notices_of_analyses_in_a_stale_health_file_are_not_shown(tmp_path: Path) -> None:
    health = lagging(tmp_path, passes(20.0, skipped=2, total=8))
    report = health.report()
    later = report.written_at + dt.timedelta(hours=2)
    loop = current_loop(report, None, now=later)
    assert loop is None and current_lag(report, loop) is None
