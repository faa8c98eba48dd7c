"""Several polling loops, one per cluster, run side by side into one store.

Each loop runs on its own thread: one cluster's failures (its backoff, a poll that raises)
never delay or stop another's. `LoopGroup` offers what the CLI needs of one `PollLoop`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from pulsar_lens.collectors.loop import PollLoop

log = logging.getLogger(__name__)


class LoopGroup:
    """Several loops (one per cluster) run side by side, each on its own thread, until all
    end or `stop()`; the interface of one PollLoop where the CLI needs it."""

    def __init__(self, loops: Sequence[PollLoop], *, join_timeout: float = 60.0) -> None:
        if not loops:
            raise ValueError("a loop group needs at least one loop")
        self.loops = tuple(loops)
        self.join_timeout = join_timeout
        self._stopped = False

    def stop(self) -> None:
        """Ask every loop to stop (SIGTERM, Ctrl-C); `stopped` then tells so."""
        self._stopped = True
        self._stop_loops()

    def _stop_loops(self) -> None:
        for loop in self.loops:
            loop.stop()

    @property
    def stopped(self) -> bool:
        """True when asked to stop, not when every loop reached its end by itself."""
        return self._stopped

    @property
    def polls(self) -> int:
        return sum(loop.polls for loop in self.loops)

    def run(self) -> int:
        """Run every loop until each ends; return the polls made. Ctrl-C stops them all."""
        if len(self.loops) == 1:
            return self.loops[0].run()
        threads = [
            threading.Thread(target=_run_logged, args=(loop,), name=f"poll-{loop.cluster}")
            for loop in self.loops
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.5)
        except KeyboardInterrupt:
            self._stopped = True
            log.info("polling interrupted after %d polls", self.polls)
        finally:
            self._stop_loops()
            for thread in threads:
                thread.join(self.join_timeout)
        return self.polls


def _run_logged(loop: PollLoop) -> None:
    """One loop's thread: whatever ends it is logged, and the other loops go on."""
    try:
        loop.run()
    except Exception:
        log.exception("the polling loop of %s stopped", loop.cluster or "the cluster")
