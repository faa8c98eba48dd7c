"""What one poll did, as the loop reports it: `Heartbeat`, its one-line report, and the few
first problems an operator reads in it. The health file, `/metrics` and key sampling read
the same heartbeat (`HeartbeatFn` hooks).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from pulsar_lens.collectors.overrun import Overrun, spell_seconds
from pulsar_lens.core.digest import format_timestamp
from pulsar_lens.core.model import POLLED_TABLES, EndpointError, Snapshot

HeartbeatFn = Callable[["Heartbeat"], None]
MAX_PROBLEMS = 5


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What one poll did; `line()` is the one-line report of it."""

    at: dt.datetime
    topics: int
    subscriptions: int
    requests: int
    errors: int
    duration: float  # seconds spent polling
    snapshot_id: str | None  # None when nothing was stored
    events: int = 0
    reachable: bool = True  # False when every endpoint failed
    retry_in: float | None = None  # seconds until the next attempt after a failure
    problems: tuple[str, ...] = ()  # the first few endpoint errors, for the operator
    write_error: str | None = None  # why the snapshot could not be stored (kept for a retry)
    cluster: str | None = None  # the cluster's name when several are polled side by side
    refused: bool = False  # the first endpoint error was a 401 or 403: credentials, not reach
    # seconds its events and storing it took; None: not written
    write_seconds: float | None = None
    interval: float | None = None  # seconds between polls, as set (None: not known)
    overrun: Overrun | None = None  # set when the poll and its write took over the interval

    def line(self) -> str:
        at = format_timestamp(self.at).split(".")[0] + "Z"
        named = f" cluster={self.cluster}" if self.cluster else ""
        text = (
            f"poll {at}{named} topics={self.topics} subs={self.subscriptions} "
            f"requests={self.requests} errors={self.errors} duration={self.duration:.2f}s"
        )
        if self.write_seconds is not None:
            text += f" write={self.write_seconds:.2f}s"
        if self.events:
            text += f" events={self.events}"
        if self.overrun is not None:
            text += overrun_words(self.overrun)
        if not self.reachable:
            text += " unreachable"
        elif self.errors:
            text += " partial"
        if self.retry_in is not None:
            text += f" retry_in={self.retry_in:.1f}s"
        if self.write_error is not None:
            text += f" not_stored ({self.write_error})"
        if self.errors and self.problems:  # free text, so last: which call failed, and how
            text += f" first_error: {self.problems[0]}"
        return text


def overrun_words(overrun: Overrun) -> str:
    """The heartbeat's words for an overrun: the interval it overran, the one it needs and
    the settings to change."""
    raise_ = " and ".join(n for n in overrun.settings[:-1])
    return (
        f" over_interval={spell_seconds(overrun.interval)}"
        f" needs_interval={spell_seconds(overrun.needed_interval)}"
        f" (raise {raise_}, or lower {overrun.settings[-1]})"
    )


def is_unreachable(snapshot: Snapshot) -> bool:
    """True when every endpoint of the poll failed: errors and not a single row."""
    return bool(snapshot.errors) and not any(snapshot.records(n) for n in POLLED_TABLES)


def beat_of(
    snapshot: Snapshot,
    duration: float,
    sid: str | None,
    events: int,
    *,
    reachable: bool = True,
    retry_in: float | None = None,
    write_error: str | None = None,
    write_seconds: float | None = None,
) -> Heartbeat:
    """The heartbeat of a poll that made `snapshot` in `duration` seconds (and stored it in
    `write_seconds`, the events diff included, when it was written)."""
    return Heartbeat(
        at=snapshot.collected_at,
        topics=len(snapshot.topics),
        subscriptions=len(snapshot.subscriptions),
        requests=snapshot.requests,
        errors=len(snapshot.errors),
        duration=duration,
        snapshot_id=sid,
        events=events,
        reachable=reachable,
        retry_in=retry_in,
        problems=tuple(_problem(e) for e in snapshot.errors[:MAX_PROBLEMS]),
        write_error=write_error,
        refused=bool(snapshot.errors) and snapshot.errors[0].status in (401, 403),
        write_seconds=write_seconds,
    )


def _problem(error: EndpointError) -> str:
    status = f" (HTTP {error.status})" if error.status is not None else ""
    return f"{error.endpoint}{status}: {error.message}"
