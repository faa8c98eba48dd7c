"""The results worker's count of its passes: when the last ended, how long it took, and how
many snapshots coalescing left unanalysed (`ResultsWorker.progress()`)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

from pulsar_lens.core.passes import PassProgress
from pulsar_lens.plugins.precompute import ResultsWorker


class HeldPass:
    """A compute function whose first pass waits for `release`: what is submitted meanwhile
    piles up behind it, as polls do behind a long pass."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.passes = 0

    def __call__(self, stop: Callable[[], bool]) -> None:
        self.passes += 1
        if self.passes == 1:
            self.started.set()
            self.release.wait(60)


def run_held(submit_first: str | None, meanwhile: list[str | None]) -> list[PassProgress]:
    """The progress each pass's `then` saw: one submission, `meanwhile` during its pass."""
    compute = HeldPass()
    seen: list[PassProgress] = []
    worker = ResultsWorker(compute, then=lambda: seen.append(worker.progress()))
    try:
        worker.submit(submit_first)
        assert compute.started.wait(60), "the first pass never started"
        for cluster in meanwhile:
            worker.submit(cluster)
        compute.release.set()
        assert worker.drain(timeout=60), f"the passes did not end; seen {seen}"
    finally:
        compute.release.set()
        worker.stop()
    return seen


def test_progress_before_any_pass_counts_nothing() -> None:
    worker = ResultsWorker(lambda stop: None)
    try:
        assert worker.progress() == PassProgress()
    finally:
        worker.stop()


def test_progress_a_long_pass_counts_the_snapshots_written_meanwhile_but_the_newest() -> None:
    before = dt.datetime.now(dt.UTC)
    first, second = run_held(None, [None, None, None, None])
    # four polls behind the first pass: the second analyses the newest, three never are
    assert (first.passes, first.skipped, first.skipped_total) == (1, 3, 3)
    assert (second.passes, second.skipped, second.skipped_total) == (2, 0, 3)
    assert first.seconds > 0
    assert first.finished_at is not None and second.finished_at is not None
    assert before <= first.finished_at <= second.finished_at <= dt.datetime.now(dt.UTC)


def test_progress_a_snapshot_is_replaced_only_by_one_of_its_own_cluster() -> None:
    first, second = run_held("east", ["east", "west", "west", "west"])
    # east's one and west's newest are analysed by the second pass: two of west's are not
    assert (first.skipped, first.skipped_total) == (2, 2)
    assert (second.skipped, second.skipped_total) == (0, 2)


def test_progress_submissions_while_the_last_pass_is_told_count_with_the_next() -> None:
    seen: list[PassProgress] = []

    def then() -> None:
        seen.append(worker.progress())
        if len(seen) == 1:  # two polls written while the first pass's `then` runs
            worker.submit()
            worker.submit()

    worker = ResultsWorker(lambda stop: None, then=then)
    try:
        worker.submit()
        assert worker.drain(timeout=60), f"the passes did not end; seen {seen}"
    finally:
        worker.stop()
    assert [(p.passes, p.skipped, p.skipped_total) for p in seen] == [(1, 0, 0), (2, 1, 1)]


def test_progress_counts_a_failed_pass() -> None:
    def compute(stop: Callable[[], bool]) -> None:
        raise RuntimeError("no luck")

    worker = ResultsWorker(compute)
    try:
        worker.submit()
        assert worker.drain(timeout=60)
        progress = worker.progress()
    finally:
        worker.stop()
    assert progress.passes == 1 and progress.finished_at is not None
