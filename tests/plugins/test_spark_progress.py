"""A Spark job's last progress report waits for Spark's listener bus, which runs behind the
jobs: a status tracker that has not yet heard of a job's last tasks is not its final word.

Spark's own session is in tests/spark/test_engine.py; here the tracker and its bus are
stand-ins, so the lag (seen on a loaded machine) happens every time."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from pulsar_lens.plugins.spark import progress


@dataclass
class LaggingBus:
    """A status tracker of one job of 2 stages (5 tasks and 2) that hears of the second
    stage's tasks, and of the job's end, only once its listener bus drains."""

    drained: bool = False
    waited_ms: list[int] = field(default_factory=list)

    # the listener bus
    def waitUntilEmpty(self, millis: int) -> None:
        self.waited_ms.append(millis)
        self.drained = True

    # the status tracker
    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [0]

    def getJobInfo(self, job_id: int) -> Any:
        return SimpleNamespace(status="SUCCEEDED" if self.drained else "RUNNING", stageIds=[0, 1])

    def getStageInfo(self, stage_id: int) -> Any:
        done = 5 if stage_id == 0 else (2 if self.drained else 0)
        return SimpleNamespace(numCompletedTasks=done, numTasks=5 if stage_id == 0 else 2)


class Context:
    """The parts of a SparkContext `tracked` uses."""

    def __init__(self, bus: LaggingBus) -> None:
        self.bus = bus
        self._jsc = SimpleNamespace(sc=lambda: SimpleNamespace(listenerBus=lambda: bus))
        self.properties: dict[str, str | None] = {}

    def statusTracker(self) -> LaggingBus:
        return self.bus

    def setJobGroup(self, group: str, description: str, interruptOnCancel: bool) -> None:
        self.properties["spark.jobGroup.id"] = group

    def setLocalProperty(self, key: str, value: str | None) -> None:
        self.properties[key] = value


def test_the_last_report_counts_every_task_after_the_listener_bus_drains() -> None:
    bus = LaggingBus()
    seen: list[progress.Counts] = []
    with progress.tracked(SimpleNamespace(_sc=Context(bus)), "job-1", seen.append, every=3600):
        pass  # the job's action returned; its listener events are still queued
    assert bus.waited_ms == [int(progress.DRAIN_SECONDS * 1000)]
    assert seen == [progress.Counts(stages_done=2, stages_total=2, tasks_done=7, tasks_total=7)]


def test_a_bus_that_does_not_drain_still_ends_the_block_with_what_is_known() -> None:
    class Stuck(LaggingBus):
        def waitUntilEmpty(self, millis: int) -> None:
            raise TimeoutError(f"the listener bus was not empty within {millis} ms")

    seen: list[progress.Counts] = []
    with progress.tracked(SimpleNamespace(_sc=Context(Stuck())), "job-2", seen.append, every=3600):
        pass
    assert seen == [progress.Counts(stages_done=1, stages_total=2, tasks_done=5, tasks_total=7)]
