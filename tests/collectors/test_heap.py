"""The heap a collect process freezes after each stored snapshot: only when its entry point
allows it, swept at most once every SWEEP_EVERY seconds, a reference cycle freed late but
never lost."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_lens.collectors import heap
from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.heartbeat import Heartbeat
from tests.collectors.test_loop import FakeTime, make_loop, ok


class Node:
    """An object that can sit in a reference cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def freezing() -> Iterator[None]:
    heap.allow_freezing()
    try:
        yield
    finally:
        heap.allow_freezing(False)
        gc.unfreeze()  # the test process's heap as it was


def linked() -> Node:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a


def cycle() -> weakref.ref[Node]:
    return weakref.ref(linked())


@pytest.mark.usefixtures("freezing")
def test_a_cycle_the_poll_dropped_is_freed_before_the_freeze() -> None:
    gc.collect()
    gc.disable()  # as during a poll: the cycle is garbage, not yet collected
    try:
        garbage = cycle()
    finally:
        gc.enable()
    assert garbage() is not None
    assert heap.settle_after_poll()
    assert garbage() is None
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("freezing")
def test_a_frozen_cycle_dropped_later_is_freed_by_the_next_sweep() -> None:
    now = [0.0]
    held = linked()  # alive when frozen
    kept = weakref.ref(held)
    assert heap.settle_after_poll(lambda: now[0])  # the count starts here
    del held  # garbage now, but frozen: the collector's passes skip it
    gc.collect()
    assert kept() is not None
    now[0] += heap.SWEEP_EVERY - 1
    assert heap.settle_after_poll(lambda: now[0])
    assert kept() is not None  # no sweep yet
    now[0] += 1
    assert heap.settle_after_poll(lambda: now[0])  # the sweep: unfrozen, collected, frozen
    assert kept() is None


@pytest.mark.usefixtures("freezing")
def test_nothing_is_frozen_while_the_collector_is_held_off() -> None:
    with collection_paused():
        assert not heap.settle_after_poll()
    assert gc.get_freeze_count() == 0


def test_nothing_is_frozen_unless_the_entry_point_allows_it() -> None:
    assert not heap.settle_after_poll()
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("freezing")
def test_the_loop_freezes_the_heap_after_each_stored_snapshot_before_its_heartbeat(
    tmp_path: Path,
) -> None:
    frozen: list[int] = []

    def on_heartbeat(beat: Heartbeat) -> None:
        frozen.append(gc.get_freeze_count())

    loop, _ = make_loop(tmp_path, FakeTime(), [ok, ok], on_heartbeat=on_heartbeat)
    assert loop.run() == 2
    assert len(frozen) == 2
    assert all(count > 0 for count in frozen)


def test_the_loop_in_process_leaves_the_heap_unfrozen(tmp_path: Path) -> None:
    loop, _ = make_loop(tmp_path, FakeTime(), [ok])
    assert loop.run() == 1
    assert gc.get_freeze_count() == 0
