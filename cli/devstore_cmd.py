"""`pulsar-lens dev-store DIR`: a small store polled up to now, for writing plugins.

The polls come from `pulsar_lens.plugins.testing.sample_polls` (a standalone cluster with a
Key_Shared subscription whose consumers churn and whose hashes then drain, a stalling Shared
subscription and a Failover group), dated so that the newest is this minute: the dashboard
and `analyze` see a live store. Events between polls are the collector's own diff.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.settings import parse_duration


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dev-store", help="write a small store polled up to now, to develop plugins on"
    )
    p.add_argument("dir", help="the store's folder (made when missing; must hold no polls)")
    p.add_argument("--polls", type=int, default=20, help="how many polls (default 20)")
    p.add_argument("--interval", default="30s", help="time between polls (default 30s)")
    p.set_defaults(func=run_dev_store)


def run_dev_store(args: argparse.Namespace) -> int:
    from pulsar_lens.collectors.events import diff
    from pulsar_lens.core.store import Store
    from pulsar_lens.core.storeroot import check_root
    from pulsar_lens.plugins.testing import sample_polls

    interval = _interval(args.interval)
    if not 4 <= args.polls <= 10_000:
        raise SettingsError(f"--polls takes 4 to 10000 polls, found {args.polls}")
    root = check_root(Path(args.dir), writable=True)
    store = Store(root)
    if len(store.snapshots(limit=1)):
        raise SettingsError(f"{root} already holds polls; name a new or empty folder")
    end = dt.datetime.now(dt.UTC).replace(microsecond=0)
    polls = sample_polls(end, args.polls, interval)
    for previous, current in zip([None, *polls], polls, strict=False):
        store.write(current, events=diff(previous, current) if previous else ())
    print(f"wrote {len(polls)} polls to {root}, the newest at {end.isoformat()}")
    print(f"try: pulsar-lens analyze stuck-hashes --store {root}", file=sys.stderr)
    return 0


def _interval(text: str) -> dt.timedelta:
    try:
        interval = parse_duration(text)
    except ValueError as exc:
        raise SettingsError(f"--interval: {exc}") from None
    if interval.total_seconds() <= 0:
        raise SettingsError(f"--interval must be longer than zero, found {text!r}")
    return interval
