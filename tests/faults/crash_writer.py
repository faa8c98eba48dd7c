"""A collector to kill: the real PollLoop writing into the real Store, with virtual time.

    python -m tests.faults.crash_writer STORE --seed S [--max-polls N] [--polls FILE]

Each poll is the recorded 4.0.7 answers of a standalone broker (tests/data/admin_api, the
`default` and `classic-modular` recordings taken in turn, so the diff between two polls has
events), stamped 3 to 6 virtual hours after the previous one: a day closes every few polls
and the loop compacts the closed days. The clock starts after the newest poll already in
the store, so a restart on the same store goes on where the killed run stopped. `--polls`
names a pickle of those recorded polls (`save_recorded`), which spares each start the replay.

Lines on stdout, flushed as they happen, for the test that kills this process:
    ready                               imports done, polling starts
    completed <snapshot id>             Store.write returned for that poll
    compact-begin <table> <day>         a day's compaction starts ...
    compact-temp <table> <day>          ... its merged file is written under a hidden name
    compact-published <table> <day>     ... renamed into place, its sources not yet deleted
    compact-end <table> <day> <n>       ... done, n files replaced
With PULSAR_LENS_CRASH_COMPACT_PAUSE=<seconds> the process sleeps that long after the temp
and after the rename of each compaction, to widen the windows a kill may hit; the pause and
the markers live only here, the store's code is the shipped one.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import pickle
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pulsar_lens.collectors import events
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.core import dataset
from pulsar_lens.core.model import EventRecord, Snapshot
from pulsar_lens.core.store import Store

PAUSE_ENV = "PULSAR_LENS_CRASH_COMPACT_PAUSE"
START = dt.datetime(2026, 11, 1, 0, 0, tzinfo=dt.UTC)
SCENARIOS = ("default", "classic-modular")
RETENTION = dt.timedelta(days=3650)  # every poll of the test stays: none may go missing

_out = threading.Lock()
_compacting = threading.local()


def emit(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def recorded_snapshots() -> list[Snapshot]:
    """One real poll() of each recorded broker, answered by the recording."""
    import responses

    from pulsar_lens.collectors.admin import AdminClient
    from pulsar_lens.collectors.poll import poll
    from tests.collectors.recorded import BASE, register

    snapshots = []
    for scenario in SCENARIOS:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            register(mock, scenario)
            snapshots.append(poll(AdminClient(BASE, backoff=0.0, retries=1)))
    return snapshots


def save_recorded(path: Path) -> Path:
    path.write_bytes(pickle.dumps(recorded_snapshots()))
    return path


def load_recorded(path: Path | None) -> list[Snapshot]:
    if path is None:
        return recorded_snapshots()
    snapshots: list[Snapshot] = pickle.loads(path.read_bytes())
    return snapshots


class Polls:
    """The recorded polls in turn, each a seeded 3 to 6 hours after the one before, with
    backlogs that grow so that no two polls hold the same rows."""

    def __init__(self, bases: Sequence[Snapshot], after: dt.datetime, seed: str) -> None:
        self.bases = bases
        self.at = after
        self.rng = random.Random(seed)
        self.count = 0

    def __call__(self) -> Snapshot:
        self.at += dt.timedelta(seconds=self.rng.uniform(3 * 3600, 6 * 3600))
        self.count += 1
        base = self.bases[self.count % len(self.bases)]
        grow = self.rng.randrange(1, 1000)
        topics = tuple(
            dataclasses.replace(t, backlog_size=(t.backlog_size or 0) + grow) for t in base.topics
        )
        return dataclasses.replace(base, collected_at=self.at, topics=topics)

    def now(self) -> dt.datetime:
        return self.at


class ReportingStore(Store):
    """The store, saying on stdout which writes returned."""

    def write(self, snapshot: Snapshot, *, events: Sequence[EventRecord] = ()) -> str:
        sid = super().write(snapshot, events=events)
        emit(f"completed {sid}")
        return sid


def watch_compaction(pause: float) -> None:
    """Markers (and the optional pause) around each day's compaction, wrapped around the
    functions of core.dataset that Store.compact_closed calls."""
    compact_day = dataset.compact_day
    publish = dataset.publish

    def watched_compact_day(table_dir: Path, day: dt.date, *args: Any, **kwargs: Any) -> int:
        where = f"{table_dir.name} {day.isoformat()}"
        emit(f"compact-begin {where}")
        _compacting.where = where
        try:
            replaced = compact_day(table_dir, day, *args, **kwargs)
        finally:
            _compacting.where = None
        emit(f"compact-end {where} {replaced}")
        return replaced

    def watched_publish(folder: Path, name: str, write: Callable[[Path], None]) -> Path:
        where = getattr(_compacting, "where", None)
        if where is None:
            return publish(folder, name, write)

        def paused_write(tmp: Path) -> None:
            write(tmp)
            emit(f"compact-temp {where}")
            time.sleep(pause)

        target = publish(folder, name, paused_write)
        emit(f"compact-published {where}")
        time.sleep(pause)
        return target

    dataset.compact_day = watched_compact_day
    dataset.publish = watched_publish


def newest(store: Store) -> dt.datetime:
    index = store.snapshots(limit=1)
    if index.empty:
        return START
    stamp: Any = index["collected_at"].iloc[-1]
    return dt.datetime.fromisoformat(str(stamp)).astimezone(dt.UTC)


def run(root: Path, seed: str, max_polls: int | None, recorded: Path | None = None) -> int:
    watch_compaction(float(os.environ.get(PAUSE_ENV) or 0.0))
    store = ReportingStore(root)
    polls = Polls(load_recorded(recorded), newest(store), seed)
    loop = PollLoop(
        polls,
        store,
        interval=1.0,
        jitter=0.0,
        retention=RETENTION,
        diff=events.diff,
        on_heartbeat=lambda beat: None,
        max_polls=max_polls,
        sleep=lambda seconds: False,
        now=polls.now,
    )
    emit("ready")
    return loop.run()


def main(argv: Iterator[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--max-polls", type=int, default=None)
    parser.add_argument("--polls", type=Path, default=None, help="a pickle of save_recorded")
    args = parser.parse_args(list(argv) if argv is not None else None)
    polls = run(args.store, args.seed, args.max_polls, args.polls)
    emit(f"exit {polls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
