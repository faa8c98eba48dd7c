"""Loops of several clusters side by side: one store, named heartbeats, failures kept apart."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path

from pulsar_lens.collectors.heartbeat import Heartbeat
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.collectors.loop_group import LoopGroup
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from tests.core.snapshots import make_snapshot


def test_group_polls_every_cluster_into_one_store_despite_one_failing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    beats: list[Heartbeat] = []
    lock = threading.Lock()

    def record(beat: Heartbeat) -> None:
        with lock:
            beats.append(beat)

    def healthy(name: str, topics: int) -> Callable[[], Snapshot]:
        return lambda: make_snapshot(at=dt.datetime.now(dt.UTC), cluster=name, topics=topics)

    def broken() -> Snapshot:
        raise RuntimeError("this cluster's admin API is gone")

    polls = {"east": healthy("east", 2), "west": healthy("west", 5), "gone": broken}
    loops = [
        PollLoop(poll, store, interval=0.05, on_heartbeat=record, max_polls=3, cluster=name)
        for name, poll in polls.items()
    ]
    for loop in loops:
        loop.max_backoff = 0.05  # a failing loop retries quickly in this test
    LoopGroup(loops, join_timeout=30).run()
    assert [loop.polls for loop in loops] == [3, 3, 3]
    assert loops[2].last_success is None and loops[0].last_success is not None
    assert len(ClusterView(store, "east").snapshots()) == 3
    assert ClusterView(store, "west").read_latest("topics").num_rows == 5
    assert {b.cluster for b in beats} == {"east", "west", "gone"}
    gone = [b for b in beats if b.cluster == "gone"]
    assert all(not b.reachable for b in gone)
    assert " cluster=gone " in gone[0].line()


def polls_of(name: str) -> Callable[[], Snapshot]:
    return lambda: make_snapshot(at=dt.datetime.now(dt.UTC), cluster=name)


def test_group_stop_ends_every_loop(tmp_path: Path) -> None:
    store = Store(tmp_path)
    loops = [PollLoop(polls_of(n), store, interval=3600, cluster=n) for n in ("a", "b")]
    group = LoopGroup(loops, join_timeout=30)
    timer = threading.Timer(1.0, group.stop)
    timer.start()
    try:
        assert group.run() == 2  # one poll each, then asleep until stopped
    finally:
        timer.cancel()
    assert all(loop.stopped for loop in loops)
    assert group.stopped  # asked to stop: a bounded run's last work is skipped


def test_group_that_reaches_its_end_was_not_stopped(tmp_path: Path) -> None:
    store = Store(tmp_path)
    loops = [
        PollLoop(polls_of(n), store, interval=0.01, cluster=n, max_polls=2) for n in ("a", "b")
    ]
    group = LoopGroup(loops, join_timeout=30)
    assert group.run() == 4
    assert not group.stopped  # so `collect --max-polls` still stores its analyses
