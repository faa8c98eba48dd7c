"""The collect process's health: what its polls did, kept where the dashboard reads it, and
the verdict its /health endpoint answers with.

After each heartbeat `HealthRecorder` notes, per polling loop (per cluster), when the poll
ended, how long it took against the interval, and how many writes in a row the store refused;
after each results pass, for the whole process, how long it took and how many polls it left
unanalysed (`core.passes`). Each time it replaces a small JSON file atomically:
`collector-health.json` in the store folder and a copy in a folder of this user's under the
system's temporary directory, which still takes writes when the store's disk is full or
read-only. A reader takes the newer of the two.

A loop is late when no poll ended within its wait (the interval, or the backoff after a poll
that reached nothing) plus two intervals and the poll deadline: its thread died or hangs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.heartbeat import Heartbeat, HeartbeatFn
from pulsar_lens.collectors.lag import AnalysesLag, lag_of
from pulsar_lens.collectors.loop import MAX_UNWRITTEN
from pulsar_lens.collectors.overrun import Overrun, overrun_of, spell_seconds
from pulsar_lens.core.passes import PassProgress
from pulsar_lens.core.secrets import clean

log = logging.getLogger(__name__)

HEALTH_FILE = "collector-health.json"
LATE_INTERVALS = 2  # intervals of slack beyond the expected wait and the poll deadline
MAX_REASON = 300  # characters of a write error kept


@dataclass(frozen=True, slots=True)
class LoopHealth:
    """One loop's polls as far as health goes; times are UTC."""

    cluster: str | None
    interval: float  # seconds between polls
    deadline: float  # seconds one poll may take at most
    polls: int = 0
    finished_at: dt.datetime | None = None  # when the last poll's heartbeat came
    duration: float = 0.0  # seconds the last poll took
    write_seconds: float | None = None  # seconds its events and storing took; None: not stored
    detail_budget: int | None = None  # per-topic calls a poll, as set (None: not known)
    retry_in: float | None = None  # the backoff after a poll that reached nothing
    reachable: bool = True
    failed_writes: int = 0  # writes the store refused in a row, up to the last poll
    failing_since: dt.datetime | None = None  # the first refused write of that run
    write_error: str | None = None  # why the last write was refused

    def late_after(self) -> float:
        """Seconds after the last poll (or the start) past which the loop counts as dead."""
        wait = self.retry_in if self.retry_in is not None else self.interval
        return wait + LATE_INTERVALS * self.interval + self.deadline

    def after(self, beat: Heartbeat, at: dt.datetime) -> LoopHealth:
        """This loop's health once `beat` came at `at`."""
        refused = beat.write_error is not None
        return dataclasses.replace(
            self,
            polls=self.polls + 1,
            finished_at=at,
            duration=beat.duration,
            write_seconds=beat.write_seconds,
            retry_in=beat.retry_in,
            reachable=beat.reachable,
            failed_writes=self.failed_writes + 1 if refused else 0,
            failing_since=(self.failing_since or at) if refused else None,
            write_error=clean(beat.write_error, limit=MAX_REASON) if refused else None,
        )


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The collect process's loops and results passes, as written at `written_at`."""

    started_at: dt.datetime
    written_at: dt.datetime
    loops: tuple[LoopHealth, ...]
    # None: nothing known (no pass ended yet, or a file of a version that did not say)
    analyses: PassProgress | None = None

    def loop_of(self, cluster: str | None) -> LoopHealth | None:
        """The loop of `cluster`; with None, or a process polling one cluster, the first."""
        if cluster is None or len(self.loops) == 1:
            return self.loops[0] if self.loops else None
        return next((loop for loop in self.loops if loop.cluster == cluster), None)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What /health answers: unhealthy when there is any problem; notes do not fail it."""

    problems: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def healthy(self) -> bool:
        return not self.problems

    def to_json(self) -> str:
        status = "ok" if self.healthy else "failing"
        return json.dumps({"status": status, "problems": self.problems, "notes": self.notes})


def write_notice(loop: LoopHealth) -> str | None:
    """What the store refusing writes means, or None while it takes them."""
    if not loop.failed_writes or loop.failing_since is None:
        return None
    since = loop.failing_since.astimezone(dt.UTC).strftime("%H:%M")
    return (
        f"the store refused the last {loop.failed_writes} write(s) since {since} UTC: "
        f"{loop.write_error}; snapshots are kept in memory (up to {MAX_UNWRITTEN}) and retried"
    )


def overrun_of_loop(loop: LoopHealth) -> Overrun | None:
    """The last poll's overrun of its interval (its calls, assembly and write), or None."""
    if loop.polls == 0:
        return None
    return overrun_of(
        loop.duration,
        loop.write_seconds,
        loop.interval,
        deadline=loop.deadline,
        detail_budget=loop.detail_budget,
    )


def overrun_notice(loop: LoopHealth) -> str | None:
    """What a poll longer than the interval means and what to change, or None when the last
    one fit."""
    overrun = overrun_of_loop(loop)
    return None if overrun is None else overrun.text()


def analyses_lag(report: HealthReport) -> AnalysesLag | None:
    """The last results pass's lag behind the polls (`lag_of`) against the shortest interval
    of the loops, or None: it fit and left no poll out, or nothing is known."""
    if report.analyses is None or not report.loops:
        return None
    return lag_of(report.analyses, min(loop.interval for loop in report.loops))


def analyses_notice(report: HealthReport) -> str | None:
    """What analyses falling behind the polls mean and what to change, or None."""
    lag = analyses_lag(report)
    return None if lag is None else lag.text()


def silence_notice(loop: LoopHealth, *, started_at: dt.datetime, now: dt.datetime) -> str | None:
    """What a loop with no poll ended in time means (its thread died or hangs), or None."""
    since = loop.finished_at or started_at
    quiet = (now - since).total_seconds()
    if quiet <= loop.late_after():
        return None
    expected = f"one is expected every {spell_seconds(loop.interval)}"
    if loop.finished_at is None:
        return f"no poll has ended in the {spell_seconds(quiet)} since the start; {expected}"
    return f"no poll has ended for {spell_seconds(quiet)}; {expected}"


def judge(report: HealthReport, *, now: dt.datetime) -> Verdict:
    """Problems: a loop that is late, or whose store refuses writes. Notes: a poll over its
    interval, an admin API that could not be reached, analyses that fall behind the polls
    (restarting would help none of them)."""
    problems: list[str] = []
    notes: list[str] = []
    for loop in report.loops:
        named = f"cluster {loop.cluster}: " if loop.cluster else ""
        silent = silence_notice(loop, started_at=report.started_at, now=now)
        problems += [named + text for text in (silent, write_notice(loop)) if text]
        if (overrun := overrun_notice(loop)) is not None:
            notes.append(named + overrun)
        if not loop.reachable:
            notes.append(named + "the last poll reached no admin endpoint")
    if (lag := analyses_notice(report)) is not None:
        notes.append(lag)
    return Verdict(problems=tuple(problems), notes=tuple(notes))


def health_paths(store_root: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Where the health of the store's collector is written: in the store, and in this
    user's folder under the temporary directory (named after the store's absolute path)."""
    root = Path(store_root).resolve()
    tag = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    spare = Path(tempfile.gettempdir()) / f"pulsar-lens-{os.getuid()}" / f"health-{tag}.json"
    return root / HEALTH_FILE, spare


def read_health(store_root: str | os.PathLike[str]) -> HealthReport | None:
    """The newer of the two health files of the store; None when neither reads."""
    reports = [r for r in map(_read, health_paths(store_root)) if r is not None]
    return max(reports, key=lambda r: r.written_at, default=None)


class HealthRecorder:
    """Keeps each loop's health from its heartbeats, and the results passes', and writes it
    after each heartbeat and each pass."""

    def __init__(
        self,
        store_root: str | os.PathLike[str],
        *,
        interval: float,
        deadline: float,
        detail_budget: int | None = None,
        clusters: Sequence[str | None] = (None,),
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._paths = health_paths(store_root)
        self._now = now
        self._lock = threading.Lock()
        self._started_at = now()
        self._loops = {
            c: LoopHealth(
                cluster=c, interval=interval, deadline=deadline, detail_budget=detail_budget
            )
            for c in clusters
        }
        self._unwritable: set[Path] = set()
        self._analyses: PassProgress | None = None

    def record(self, beat: Heartbeat) -> None:
        with self._lock:
            key = beat.cluster if beat.cluster in self._loops else next(iter(self._loops))
            self._loops[key] = self._loops[key].after(beat, self._now())
            self._write(self.report())

    def record_analyses(self, progress: PassProgress) -> None:
        """The results passes so far, once one has ended (`ResultsWorker.progress()`)."""
        with self._lock:
            self._analyses = progress
            self._write(self.report())

    def wrap(self, on_heartbeat: HeartbeatFn) -> HeartbeatFn:
        """`on_heartbeat`, then the health of this poll."""

        def both(beat: Heartbeat) -> None:
            on_heartbeat(beat)
            self.record(beat)

        return both

    def report(self) -> HealthReport:
        return HealthReport(
            started_at=self._started_at,
            written_at=self._now(),
            loops=tuple(self._loops.values()),
            analyses=self._analyses,
        )

    def answer(self) -> tuple[int, str]:
        """/health: 200 and the verdict as JSON when healthy, else 503."""
        with self._lock:
            report = self.report()
        verdict = judge(report, now=report.written_at)
        return (200 if verdict.healthy else 503), verdict.to_json()

    def _write(self, report: HealthReport) -> None:
        text = json.dumps(to_json(report))
        store_copy, spare = self._paths
        for path in (store_copy, spare):
            if path is store_copy and not path.parent.is_dir():
                continue  # no store yet (nothing stored): the spare copy tells
            try:
                _replace(path, text, private=path is spare)
            except OSError as exc:  # a full or read-only store: the other copy still tells
                if path not in self._unwritable:
                    log.warning("could not write the collector's health to %s: %s", path, exc)
                self._unwritable.add(path)
            else:
                self._unwritable.discard(path)


def to_json(report: HealthReport) -> dict[str, Any]:
    loops = [{k: _plain(v) for k, v in dataclasses.asdict(loop).items()} for loop in report.loops]
    written: dict[str, Any] = {
        "started_at": _plain(report.started_at),
        "written_at": _plain(report.written_at),
        "loops": loops,
    }
    if report.analyses is not None:
        written["analyses"] = {k: _plain(v) for k, v in dataclasses.asdict(report.analyses).items()}
    return written


def from_json(loaded: Mapping[str, Any]) -> HealthReport:
    """The report `to_json` wrote; KeyError, TypeError or ValueError when it is not one."""
    fields = {f.name for f in dataclasses.fields(LoopHealth)}
    loops = []
    for item in loaded["loops"]:
        values = {k: v for k, v in item.items() if k in fields}
        for name in ("finished_at", "failing_since"):
            values[name] = _time(values.get(name))
        for name, kind in (("interval", float), ("deadline", float), ("duration", float)):
            values[name] = kind(values.get(name, 0.0))
        for name in ("polls", "failed_writes"):
            values[name] = int(values.get(name, 0))
        if values.get("write_seconds") is not None:
            values["write_seconds"] = float(values["write_seconds"])
        if values.get("detail_budget") is not None:
            values["detail_budget"] = int(values["detail_budget"])
        loops.append(LoopHealth(**values))
    started, written = _time(loaded["started_at"]), _time(loaded["written_at"])
    if started is None or written is None:
        raise ValueError("a health report needs started_at and written_at")
    analyses = _passes(loaded["analyses"]) if loaded.get("analyses") is not None else None
    return HealthReport(
        started_at=started, written_at=written, loops=tuple(loops), analyses=analyses
    )


def _passes(item: Mapping[str, Any]) -> PassProgress:
    """The `analyses` entry `to_json` wrote; fields it lacks read as nothing counted."""
    return PassProgress(
        passes=int(item.get("passes", 0)),
        finished_at=_time(item.get("finished_at")),
        seconds=float(item.get("seconds", 0.0)),
        skipped=int(item.get("skipped", 0)),
        skipped_total=int(item.get("skipped_total", 0)),
    )


def _read(path: Path) -> HealthReport | None:
    try:
        return from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        log.warning("ignoring an unreadable collector health file %s: %s", path, exc)
        return None


def _replace(path: Path, text: str, *, private: bool) -> None:
    """Write `path` whole or not at all: a reader never sees half of it. A `private` folder
    is made readable by this user only (it is under the shared temporary directory)."""
    if private:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def _plain(value: object) -> object:
    return value.astimezone(dt.UTC).isoformat() if isinstance(value, dt.datetime) else value


def _time(value: object) -> dt.datetime | None:
    if value is None:
        return None
    parsed = dt.datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        raise ValueError(f"time without a zone: {value!r}")
    return parsed
