"""What a collect process keeps between polls, taken out of the cyclic garbage collector's
passes: `settle_after_poll` freezes the heap once a snapshot is stored.

A collect process holds the newest snapshot (the next poll is diffed against it): at 100,000
topics some millions of records, none of them garbage until the next poll replaces them. Each
full pass of Python's cyclic collector walked all of them again, and the analyses of every
snapshot, run in the same process, set off a few such passes: with the heap frozen after the
write (`gc.freeze`), a poll's analyses at 100,000 topics took 3.8-4.8 s instead of 5.1-6.7 s
(docs/performance.md). Before it freezes, the objects made since the last freeze are
collected (the poll's own: 0.2-0.4 s at 100,000 topics), so a reference cycle the poll made
and dropped (a failed call's exception and its frames) is freed at once. Frozen objects still
leave by reference count as before; only a cycle among objects that were alive when frozen and
dropped later waits, for the next sweep (`gc.unfreeze` and a full collection, at most once
every `SWEEP_EVERY` seconds): late by at most that, never lost.

Only a process's own entry point may freeze its heap (`allow_freezing`, from
`pulsar_lens.cli.main.run`): a loop run in-process, as the tests run it, leaves the heap of
its host alone.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

SWEEP_EVERY = 3600.0  # seconds between full collections of the frozen heap

_lock = threading.Lock()
_allowed = False
_last_sweep: float | None = None


def allow_freezing(allowed: bool = True) -> None:
    """Let `settle_after_poll` freeze this process's heap (only the process's entry point)."""
    global _allowed, _last_sweep
    with _lock:
        _allowed = allowed
        _last_sweep = None


def settle_after_poll(clock: Callable[[], float] = time.monotonic) -> bool:
    """Collect what is not frozen and freeze the heap after a stored snapshot; the collection
    sweeps the whole heap when SWEEP_EVERY has passed since the last sweep (the first call only
    starts the count). Nothing unless freezing is allowed, nor while the collector is held off;
    True when it froze. The loops of one process (one per cluster) share its heap and sweeps."""
    global _last_sweep
    with _lock:
        if not _allowed or not gc.isenabled():
            return False
        now = clock()
        if _last_sweep is None:
            _last_sweep = now
        elif now - _last_sweep >= SWEEP_EVERY:
            gc.unfreeze()  # the collection below then walks the whole heap
            _last_sweep = now
        gc.collect()  # what is not frozen: the poll's own cycles (a failed call's traceback)
        gc.freeze()
        return True
