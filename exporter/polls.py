"""The collect loop's own polls as /metrics reports them: a thread-safe tally, read at each
scrape (per cluster when one collector polls several), and the results passes that analyse
them (for the whole process)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from pulsar_lens.core.passes import PassProgress
from pulsar_lens.exporter.families import PollStats


class PollRecorder:
    """Thread-safe tally of the loop's polls, read by the collector at scrape time; given
    `clusters` (one collector polling several), a tally per cluster, each from zero."""

    def __init__(self, clusters: Sequence[str] = ()) -> None:
        self._lock = threading.Lock()
        self._stats = PollStats()
        self._of: dict[str, PollStats] = {name: PollStats() for name in clusters}
        self._passes: PassProgress | None = None
        self._listeners: list[Callable[[], None]] = []

    def on_record(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after each poll is recorded (in the recording thread)."""
        with self._lock:
            self._listeners.append(listener)

    def record(
        self,
        *,
        at: dt.datetime,
        duration: float,
        requests: int,
        errors: int,
        failed: bool,
        not_stored: bool = False,
        cluster: str | None = None,
        write_seconds: float | None = None,
        interval: float | None = None,
        overran: bool | None = None,
    ) -> None:
        """One poll; `overran`: it took, with its write, longer than the `interval` (None:
        not known, as for a poll that reached nothing)."""
        with self._lock:
            stats = self._of.get(cluster, PollStats()) if cluster else self._stats
            stats = replace(
                stats,
                polls=stats.polls + 1,
                failed_polls=stats.failed_polls + int(failed),
                failed_writes=stats.failed_writes + int(not_stored),
                last_poll_at=at,
                last_duration_s=duration,
                last_requests=requests,
                last_errors=errors,
                last_write_s=write_seconds,
                interval_s=interval if interval is not None else stats.interval_s,
                overran=overran,
                overrun_polls=stats.overrun_polls + int(bool(overran)),
            )
            if cluster:
                self._of[cluster] = stats
            else:
                self._stats = stats
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def record_passes(self, progress: PassProgress) -> None:
        """The results passes of this process so far (no listener is called: a pass stores
        no snapshot)."""
        with self._lock:
            self._passes = progress

    def passes(self) -> PassProgress | None:
        """The results passes recorded last; None in a process that runs none."""
        with self._lock:
            return self._passes

    def stats(self) -> PollStats:
        with self._lock:
            return self._stats

    def by_cluster(self) -> dict[str, PollStats]:
        """The tally of each cluster; {} when the polls name no cluster."""
        with self._lock:
            return dict(self._of)
