"""The polling loop: poll, diff against the previous snapshot, store, report, sleep.

Polls every `interval` seconds (±`jitter`, so many collectors do not beat in step). While
the admin API is unreachable (a poll in which every endpoint failed) nothing is stored and
the wait doubles up to `max_backoff` (by default four intervals, at most five minutes, never
less than one interval: a cluster that comes back is seen again soon). Closed day
partitions are compacted when the day changes, and retention runs every
`housekeeping_every` seconds, or every quarter of the retention (at least one interval)
when that is sooner, so a short retention holds. Both run on a background thread (one run
at a time), so that a long compaction never delays a poll or its heartbeat.

After a restart, the first poll is diffed against the newest snapshot of its cluster that the
store already holds (`collectors.restore`), so a change made while the collector was down
still yields its events.

What one poll did is its `Heartbeat` (`collectors.heartbeat`); several clusters' loops run
side by side in a `LoopGroup` (`collectors.loop_group`).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.heap import settle_after_poll
from pulsar_lens.collectors.heartbeat import Heartbeat, HeartbeatFn, beat_of, is_unreachable
from pulsar_lens.collectors.overrun import overrun_of
from pulsar_lens.collectors.restore import restore_latest
from pulsar_lens.core.digest import format_timestamp
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import EndpointError, EventRecord, Snapshot
from pulsar_lens.core.store import Store, write_failure
from pulsar_lens.core.values import DEFAULT_RETENTION

log = logging.getLogger(__name__)

PollFn = Callable[[], Snapshot]
DiffFn = Callable[[Snapshot, Snapshot], Sequence[EventRecord]]
CarryFn = Callable[[Snapshot | None, Snapshot], Snapshot]
BACKOFF_INTERVALS = 4  # the default longest wait while unreachable, in intervals ...
MAX_BACKOFF = 300.0  # ... and in seconds
MAX_UNWRITTEN = 5  # snapshots kept in memory while the store cannot be written


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def log_heartbeat(beat: Heartbeat) -> None:
    log.info("%s", beat.line())


class PollLoop:
    """Runs polls into a store until stopped, `max_polls` is reached or Ctrl-C.

    `poll` returns a Snapshot (it should not raise; if it does, the poll counts as failed).
    `diff(previous, current)` yields the events stored with each snapshot. `cluster` names
    the loop in its heartbeats and logs; loops sharing a store share `housekeeping_lock`, so
    that only one compacts or applies retention at a time. With `restore` (and a `diff`),
    the first poll is diffed against the newest stored snapshot of its cluster.
    `carry(previous, current)` gives what the next poll is diffed against (what a partial
    poll left unknown kept from before; `previous` is None at first). `deadline` (seconds)
    and `detail_budget`, the poll's own limits, only word a poll that overran the interval
    (`Heartbeat.overrun`). `clock`, `sleep`, `now` and `rng` are injectable for tests;
    `sleep(seconds)` returns True when stopped.
    """

    def __init__(
        self,
        poll: PollFn,
        store: Store,
        *,
        interval: float = 30.0,
        jitter: float = 0.1,
        max_backoff: float | None = None,
        retention: dt.timedelta = DEFAULT_RETENTION,
        housekeeping_every: float = 3600.0,
        diff: DiffFn | None = None,
        carry: CarryFn | None = None,
        on_heartbeat: HeartbeatFn = log_heartbeat,
        max_polls: int | None = None,
        cluster: str | None = None,
        deadline: float | None = None,
        detail_budget: int | None = None,
        housekeeping_lock: threading.Lock | None = None,
        restore: bool = True,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool] | None = None,
        now: Callable[[], dt.datetime] = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self._poll = poll
        self.store = store
        self.interval = interval
        self.jitter = min(max(jitter, 0.0), 1.0)
        if max_backoff is None:
            max_backoff = min(BACKOFF_INTERVALS * interval, MAX_BACKOFF)
        self.max_backoff = max(max_backoff, interval)
        self.retention = retention
        # an hour's wait under a one-minute retention would keep 60 times what it should
        self.housekeeping_every = min(
            housekeeping_every, max(interval, retention.total_seconds() / 4)
        )
        self._diff = diff
        self._carry = carry
        self._on_heartbeat = on_heartbeat
        self.max_polls = max_polls
        self.cluster = cluster
        self.deadline = deadline
        self.detail_budget = detail_budget
        self._housekeeping_lock = housekeeping_lock or threading.Lock()
        self._clock = clock
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait
        self._now = now
        self._rng = rng or random.Random()
        self._previous: Snapshot | None = None
        self._restore_pending = restore and diff is not None
        self._housekeeper: threading.Thread | None = None
        self._last_success: dt.datetime | None = None
        self._failures = 0
        self._compacted_for: dt.date | None = None
        self._compaction_retry_at = 0.0
        self._housekeeping_due = 0.0
        self._unwritten: collections.deque[tuple[Snapshot, Sequence[EventRecord]]] = (
            collections.deque(maxlen=MAX_UNWRITTEN)
        )
        self.polls = 0
        self.write_failures = 0

    @property
    def last_success(self) -> dt.datetime | None:
        """`collected_at` of the newest snapshot stored by this loop."""
        return self._last_success

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def staleness(self, now: dt.datetime | None = None) -> dt.timedelta | None:
        """How old the newest stored snapshot is; None before the first success."""
        if self._last_success is None:
            return None
        return (now or self._now()) - self._last_success

    def stop(self) -> None:
        """Ask the loop to stop; a sleeping loop wakes at once."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run(self) -> int:
        """Poll until stopped; return the number of polls made. Housekeeping under way is
        waited for before returning; after `stop()`, a compaction stops once the day it is on
        is done (a bounded run lets it finish, so `--once` from cron still compacts)."""
        try:
            while not self._stop.is_set():
                beat = self.poll_once()
                if self._last_poll():
                    break
                delay = beat.retry_in if beat.retry_in is not None else self._wait(beat)
                if self._sleep(delay):
                    break
        except KeyboardInterrupt:
            self._stop.set()
            log.info("polling interrupted after %d polls", self.polls)
        finally:
            self.wait_housekeeping()
            if self._unwritten:
                log.warning(
                    "stopping with snapshots the store could not take, now lost: %d",
                    len(self._unwritten),
                )
        return self.polls

    def wait_housekeeping(self, timeout: float | None = None) -> bool:
        """Wait for the housekeeping under way, if any; True when none is left running."""
        thread = self._housekeeper
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def poll_once(self) -> Heartbeat:
        """One poll: store it (unless unreachable), housekeep, report the heartbeat."""
        with collection_paused():  # see `_poll_and_store`
            beat = self._poll_and_store()
        if beat.snapshot_id is not None:
            settle_after_poll()  # the analyses of it then skip what the heap holds
        self._on_heartbeat(beat)
        return beat

    def _poll_and_store(self) -> Heartbeat:
        """`poll_once` up to its heartbeat, with Python's cyclic garbage collector held off:
        a poll makes millions of records, their tables, their digest and the diff, and almost
        none of it is garbage (see `collectors.heap`)."""
        started = self._clock()
        snapshot = self._safe_poll()
        duration = self._clock() - started
        self.polls += 1
        if is_unreachable(snapshot):
            self._failures += 1
            retry_in = None if self._last_poll() else self._backoff()
            beat = beat_of(snapshot, duration, None, 0, reachable=False, retry_in=retry_in)
        else:
            writing = self._clock()  # the diff counts as storing: at scale it takes seconds
            events = self._events(snapshot)
            self._previous = self._carried(snapshot)
            self._failures = 0
            sid, write_error = self._store(snapshot, events)
            written = self._clock() - writing if sid is not None else None
            if sid is not None:
                self._last_success = snapshot.collected_at
                self._housekeep(snapshot.collected_at.astimezone(dt.UTC).date())
            beat = beat_of(
                snapshot,
                duration,
                sid,
                len(events),
                write_error=write_error,
                write_seconds=written,
            )
            overrun = overrun_of(
                duration,
                written,
                self.interval,
                deadline=self.deadline,
                detail_budget=self.detail_budget,
            )
            beat = dataclasses.replace(beat, overrun=overrun)
        beat = dataclasses.replace(beat, interval=self.interval)
        if self.cluster:
            beat = dataclasses.replace(beat, cluster=self.cluster)
        return beat

    def _store(
        self, snapshot: Snapshot, events: Sequence[EventRecord]
    ) -> tuple[str | None, str | None]:
        """Write the snapshots a failing store kept back, then this one. A write error never
        ends the loop: the snapshot waits in memory (the newest MAX_UNWRITTEN) for a retry."""
        if len(self._unwritten) == self._unwritten.maxlen:
            dropped = self._unwritten[0][0]
            log.error(
                "dropped the snapshot of %s: %d already wait for the store",
                format_timestamp(dropped.collected_at),
                len(self._unwritten),
            )
        self._unwritten.append((snapshot, events))
        sid = None
        while self._unwritten:
            pending, pending_events = self._unwritten[0]
            try:
                written = self.store.write(pending, events=pending_events)
            except Exception as exc:  # disk full, permissions, a value the store refuses
                self.write_failures += 1
                log.error(
                    "could not store the snapshot of %s (%d waiting for a retry): %s",
                    format_timestamp(pending.collected_at),
                    len(self._unwritten),
                    exc,
                )
                return None, str(exc)
            self._unwritten.popleft()
            if pending is snapshot:
                sid = written
        return sid, None

    def _last_poll(self) -> bool:
        return self.max_polls is not None and self.polls >= self.max_polls

    def _safe_poll(self) -> Snapshot:
        try:
            return self._poll()
        except Exception as exc:  # a poll must not end the loop; it counts as a failure
            log.exception("poll failed")
            error = EndpointError(endpoint="poll", status=None, message=str(exc))
            return Snapshot(cluster="", collected_at=self._now(), errors=(error,))

    def _events(self, snapshot: Snapshot) -> Sequence[EventRecord]:
        if self._previous is None and self._restore_pending:
            self._restore_pending = False
            self._previous = self._restored(snapshot)
        if self._diff is None or self._previous is None:
            return ()
        try:
            return tuple(self._diff(self._previous, snapshot))
        except Exception:  # events are a bonus; the snapshot is still worth storing
            log.exception("diffing two snapshots failed; storing the snapshot without events")
            return ()

    def _carried(self, snapshot: Snapshot) -> Snapshot:
        """What the next poll is diffed against: this one, with what its failed calls left
        unknown carried from the one before (`carry`)."""
        if self._carry is None:
            return snapshot
        try:
            return self._carry(self._previous, snapshot)
        except Exception:  # like the diff: events are a bonus
            log.exception("carrying the last known state forward failed; diffing from this poll")
            return snapshot

    def _restored(self, snapshot: Snapshot) -> Snapshot | None:
        """The newest stored snapshot of this poll's cluster, from before a restart."""
        try:
            restored = restore_latest(self.store, snapshot.cluster, before=snapshot.collected_at)
        except Exception as exc:  # an unreadable store costs the first poll's events, no more
            log.warning(
                "could not read back the last stored snapshot of %s; the first poll has no "
                "events: %s: %s",
                snapshot.cluster or "the cluster",
                type(exc).__name__,
                exc,
            )
            return None
        if restored is not None:
            log.info(
                "diffing the first poll against the snapshot of %s stored before",
                format_timestamp(restored.collected_at),
            )
        return restored

    def _wait(self, beat: Heartbeat) -> float:
        """The jittered interval, minus the time the poll and its write took (storing a poll
        of 100,000 topics takes a third of it: the interval is from poll start to start)."""
        return max(0.0, self._jittered(self.interval) - beat.duration - (beat.write_seconds or 0))

    def _backoff(self) -> float:
        return self._jittered(min(self.max_backoff, self.interval * 2 ** min(self._failures, 30)))

    def _jittered(self, seconds: float) -> float:
        return seconds * self._rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)

    def _housekeep(self, today: dt.date) -> None:
        """Start compacting closed days (once per day change) and retention (when due) on a
        background thread, unless the previous run is still going: it runs again at a later
        poll."""
        due = self._compaction_due(today) or self._clock() >= self._housekeeping_due
        if not due or (self._housekeeper is not None and self._housekeeper.is_alive()):
            return
        name = f"housekeeping-{self.cluster}" if self.cluster else "housekeeping"
        thread = threading.Thread(target=self._housekeep_locked, args=(today,), name=name)
        self._housekeeper = thread
        thread.start()

    def _housekeep_locked(self, today: dt.date) -> None:
        with self._housekeeping_lock:
            self._housekeep_store(today)

    def _compaction_due(self, today: dt.date) -> bool:
        return self._compacted_for != today and self._clock() >= self._compaction_retry_at

    def _housekeep_store(self, today: dt.date) -> None:
        """Compaction, then retention, each on its own: retention still frees space when a
        full disk fails the compaction, which is tried again `housekeeping_every` later."""
        if self._compaction_due(today):
            try:
                replaced = self.store.compact_closed(before=today, stop=self._stop.is_set)
            except Exception as exc:
                self._compaction_retry_at = self._clock() + self.housekeeping_every
                _housekeeping_failed("compacting the closed days", exc)
            else:
                if not self._stop.is_set():  # else the days left wait for the next start
                    self._compacted_for = today
                if replaced:
                    log.info("compacted %d files of days before %s", replaced, today)
        if self._clock() >= self._housekeeping_due:
            self._housekeeping_due = self._clock() + self.housekeeping_every
            try:
                removed = self.store.apply_retention(max_age=self.retention, now=self._now())
            except Exception as exc:
                _housekeeping_failed("applying the retention", exc)
            else:
                if removed:
                    log.info("retention removed %d files older than %s", removed, self.retention)


def _housekeeping_failed(what: str, exc: Exception) -> None:
    """Housekeeping failing never stops collection: a full or read-only disk is said in one
    line, anything else with its traceback."""
    if isinstance(exc, (OSError, SnapshotError)):
        log.error("%s failed; polling goes on: %s", what, write_failure(exc))
    else:
        log.exception("%s failed; polling goes on", what)
