"""Spark's own progress of one job: stages and tasks done, from the status tracker.

The code that runs a job does so inside `tracked(session, group, on_update)`: its Spark jobs
carry the job group `group` (a Spark Connect client tags its operations instead), and a
thread reads the session's status tracker every `every` seconds and calls `on_update` with
the stages and tasks done and known so far. Spark Connect has no status tracker on the
client: there the session's progress handler reports the same numbers.

The status tracker is fed by Spark's listener bus, which runs behind the jobs: an action can
return before the tracker has heard of its last tasks, or even of its job (seen on a loaded
machine: a finished job reported with 5 of its 7 tasks). So the report at the block's end first
waits, bounded, for the listener bus to deliver every event posted so far.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

DRAIN_SECONDS = 30.0  # how long the last report waits for Spark's listener bus


@dataclass(frozen=True, slots=True)
class Counts:
    stages_done: int = 0
    stages_total: int = 0
    tasks_done: int = 0
    tasks_total: int = 0


OnUpdate = Callable[[Counts], None]


@contextlib.contextmanager
def tracked(session: Any, group: str, on_update: OnUpdate, *, every: float = 0.5) -> Iterator[None]:
    """Report the progress of the Spark jobs started inside the block, and once at its end."""
    context = getattr(session, "_sc", None)
    if context is None:  # Spark Connect
        with _connect_tracked(session, group, on_update):
            yield
        return
    context.setJobGroup(group, f"pulsar-lens job {group}", interruptOnCancel=True)
    stop = threading.Event()
    seen: dict[int, tuple[int, int]] = {}  # stage id -> (tasks done, tasks) as last seen

    def poll() -> None:
        try:
            on_update(_classic_counts(context.statusTracker(), group, seen))
        except Exception as exc:  # progress is a display: never let it fail the job
            log.debug("reading Spark progress failed: %s", exc)

    def loop() -> None:
        while not stop.wait(every):
            poll()

    thread = threading.Thread(target=loop, name=f"progress-{group}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every * 4)
        _drain(context, DRAIN_SECONDS)
        poll()
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def _drain(context: Any, seconds: float) -> bool:
    """Wait until Spark's listener bus has delivered every event posted so far (the status
    tracker then knows every task that ended); False when it did not within `seconds`."""
    try:
        context._jsc.sc().listenerBus().waitUntilEmpty(int(seconds * 1000))
    except Exception as exc:  # a timeout, or a Spark without this (internal) call
        log.debug("Spark's listener bus did not drain: %s", exc)
        return False
    return True


def _classic_counts(tracker: Any, group: str, seen: dict[int, tuple[int, int]]) -> Counts:
    """Stages and tasks of every job of `group`. A stage the tracker has forgotten keeps the
    counts it had when last seen; a stage its finished job skipped (its shuffle output was
    reused) is not counted at all."""
    for job_id in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job_id)
        if info is None:
            continue
        finished = str(info.status) == "SUCCEEDED"
        for stage_id in info.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                seen[stage_id] = (stage.numCompletedTasks, stage.numTasks)
            else:
                seen.setdefault(stage_id, (0, 0))
            done, total = seen[stage_id]
            if finished and done < total:
                seen[stage_id] = (0, 0)  # skipped
    counted = [(done, total) for done, total in seen.values() if total]
    return Counts(
        stages_done=sum(1 for done, total in counted if done >= total),
        stages_total=len(counted),
        tasks_done=sum(done for done, _ in counted),
        tasks_total=sum(total for _, total in counted),
    )


@contextlib.contextmanager
def _connect_tracked(session: Any, group: str, on_update: OnUpdate) -> Iterator[None]:
    seen: dict[tuple[str, int], tuple[int, int]] = {}
    lock = threading.Lock()

    def handler(stages: Any, inflight_tasks: int, operation_id: str, done: bool) -> None:
        with lock:
            for stage in stages:
                seen[(operation_id, stage.stage_id)] = (stage.num_completed_tasks, stage.num_tasks)
            counts = Counts(
                stages_done=sum(1 for d, t in seen.values() if t and d >= t),
                stages_total=len(seen),
                tasks_done=sum(d for d, _ in seen.values()),
                tasks_total=sum(t for _, t in seen.values()),
            )
        with contextlib.suppress(Exception):
            on_update(counts)

    register = getattr(session, "registerProgressHandler", None)
    if register is None:
        yield
        return
    session.addTag(_tag(group))
    register(handler)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            session.removeProgressHandler(handler)
        with contextlib.suppress(Exception):
            session.removeTag(_tag(group))


def _tag(group: str) -> str:
    """A Spark Connect tag from a job id (tags may not contain commas)."""
    return "pulsar-lens-" + group.replace(",", "-")
