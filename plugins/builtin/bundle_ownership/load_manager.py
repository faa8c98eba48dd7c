"""The load manager's own counts (the `brokers` table's `lb_bundles_unloaded` and
`lb_bundles_split`, read from each broker's dimension metrics) per poll window, and which
ownership events they account for.

The leader's shedder counts every bundle it chooses to unload; an unload asked through the
admin API, a broker restart or a client is not counted (Pulsar 4.0, both load managers: the
extensible one counts the admin API's unloads and splits in its totals too, under the reason
"Admin", and the collector takes those off, `collectors.brokers.parse_lb_counters`). So
an owner change in a window where the load manager counted an unload is its doing, one in a
window where every broker's counter was read and none grew is not. The counter and the
ownership listing are read by the same poll but not at the same instant, so an unload can
show in the counter one poll before or after the owner change: counts are matched to the
events of their own window first, and what is left to an event of the window before or after.

The leader publishes its counter at the end of a shedding round, after the round's unload
calls returned (`ModularLoadManagerImpl.doLoadShedding`), so a count can also be read later
than the poll after the owner change when polls come faster than that: a count left over
goes to an event up to COUNT_LAG before its window began. An event is "not the load manager"
only once every window a count of it could show in was read and held none.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import Note, Table, View
from pulsar_lens.core.counters import increase
from pulsar_lens.core.model import LOAD_MANAGER_COUNTERS as COUNTERS
from pulsar_lens.plugins.builtin.bundle_ownership.events import snapshots_of
from pulsar_lens.plugins.builtin.shared.ownership import BY_LOAD_MANAGER, NOT_LOAD_MANAGER

WINDOW_COLUMNS = ["at", "since", "broker", "unloaded", "split", "unseen"]
# the first event of an unload (its second half, "acquired"/"reacquired", is the same unload)
UNLOAD_STARTS = ("moved", "unloaded", "reloaded")
COUNT_LAG = pd.Timedelta(seconds=20)
"""How long after an owner change the leader's counter may still show it (its shedding round's
unload calls returning): wider than a poll only when polls come faster than 20 s apart."""


def load_manager_windows(brokers: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """One row per broker and poll whose counters grew since that broker's last reading:
    `since` is that reading's poll, `unloaded` and `split` how much each counter grew."""
    rows: list[dict[str, Any]] = []
    if brokers.empty or COUNTERS["unloaded"] not in brokers:
        return pd.DataFrame(columns=WINDOW_COLUMNS)
    at_of = dict(zip(snapshots["snapshot_id"], snapshots["collected_at"], strict=True))
    by_snapshot = snapshots_of(brokers, list(at_of))
    last: dict[str, tuple[Any, dict[str, int | None]]] = {}
    for sid in at_of:
        if sid not in by_snapshot:
            continue
        for row in by_snapshot[sid].itertuples(index=False):
            now = {name: _count(getattr(row, column)) for name, column in COUNTERS.items()}
            if now["unloaded"] is None:
                continue
            broker = str(row.broker_id)
            if broker in last:
                since, before = last[broker]
                grew = {name: increase(before[name], now[name]) or 0 for name in COUNTERS}
                if any(grew.values()):
                    rows.append({"at": at_of[sid], "since": since, "broker": broker, **grew})
            last[broker] = (at_of[sid], now)
    frame = pd.DataFrame(rows, columns=WINDOW_COLUMNS)
    frame["unseen"] = frame["unloaded"]
    return frame


def counted_polls(brokers: pd.DataFrame, snapshots: pd.DataFrame) -> set[pd.Timestamp]:
    """The polls (collected_at) in which every broker's counters were read, after a poll
    that read them too: the windows in which a count of 0 means the load manager did not
    unload."""
    if brokers.empty or COUNTERS["unloaded"] not in brokers:
        return set()
    read = brokers.groupby("snapshot_id")[COUNTERS["unloaded"]].apply(lambda s: s.notna().all())
    ordered = [sid for sid in snapshots["snapshot_id"] if sid in read.index]
    at_of = dict(zip(snapshots["snapshot_id"], snapshots["collected_at"], strict=True))
    return {
        pd.Timestamp(at_of[sid])
        for before, sid in itertools.pairwise(ordered)
        if read[before] and read[sid]
    }


def attribute(
    events: pd.DataFrame,
    windows: pd.DataFrame,
    counted: set[pd.Timestamp],
    polls: Sequence[Any],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`events` with a `by` column (BY_LOAD_MANAGER, NOT_LOAD_MANAGER, or None when the
    counters of its window or the next were not read, or there is no next poll yet), and
    `windows` with `unseen`: the counted unloads no event of the snapshots accounts for."""
    times = sorted(pd.Timestamp(t) for t in polls)
    budget = _budgets(windows, times)
    wanted: list[tuple[Any, str, int]] = []  # (event index, counter, poll position)
    found: dict[Any, str | None] = {}
    for index in events.sort_values("at", kind="stable").index:
        kind = events.at[index, "kind"]
        counter = "split" if kind == "split" else "unloaded" if kind in UNLOAD_STARTS else None
        found[index] = None
        if counter is not None:
            position = bisect.bisect_left(times, pd.Timestamp(events.at[index, "at"]))
            wanted.append((index, counter, position))
    # in a window with more events than counts, an owner change the polls saw takes a count
    # before a reload inferred from reconnections (a client whose connection dropped
    # reconnects every producer it has on that broker, unloaded or not)
    wanted.sort(key=lambda w: (w[2], events.at[w[0], "kind"] == "reloaded"))
    # own windows first, so that a neighbour's count goes to an event only when its own
    # window's event has had it
    for shift in (0, -1, 1):
        for index, counter, position in wanted:
            if found[index] is None and _take(budget[counter], position + shift):
                found[index] = BY_LOAD_MANAGER
    reach = {position: _reach(times, position) for _, _, position in wanted}
    for index, counter, position in wanted:  # a count published late (COUNT_LAG)
        last = reach[position]
        later = range(position + 2, (len(times) - 1 if last is None else last) + 1)
        if found[index] is None and any(_take(budget[counter], q) for q in later):
            found[index] = BY_LOAD_MANAGER
    for index, _, position in wanted:
        # no count in any window that could show it, all of them read: the load manager did
        # not do it
        last = reach[position]
        if found[index] is None and last is not None and set(times[position : last + 1]) <= counted:
            found[index] = NOT_LOAD_MANAGER
    by = [found[i] for i in events.index]
    windows = windows.copy()
    if len(windows):
        windows["unseen"] = [
            budget["unloaded"].get(bisect.bisect_left(times, pd.Timestamp(at)), {}).get(b, 0)
            for at, b in zip(windows["at"], windows["broker"], strict=True)
        ]
    return events.assign(by=pd.Series(by, index=events.index, dtype=object)), windows


def _budgets(
    windows: pd.DataFrame, times: Sequence[pd.Timestamp]
) -> dict[str, dict[int, dict[str, int]]]:
    """Per counter: poll position -> broker -> counts not yet matched to an event."""
    budget: dict[str, dict[int, dict[str, int]]] = {name: {} for name in COUNTERS}
    for row in windows.itertuples(index=False):
        position = bisect.bisect_left(times, pd.Timestamp(row.at))
        for name in COUNTERS:
            count = int(getattr(row, name))
            if count:
                mine = budget[name].setdefault(position, {})
                mine[str(row.broker)] = mine.get(str(row.broker), 0) + count
    return budget


def _reach(times: Sequence[pd.Timestamp], position: int) -> int | None:
    """The last poll whose window may hold the count of an owner change seen by the poll at
    `position`: the next one, and each after it that began within COUNT_LAG of it; None while
    that lies beyond the newest poll."""
    if position >= len(times):
        return None
    last = position + 1
    while last < len(times) and times[last] - times[position] < COUNT_LAG:
        last += 1
    return last if last < len(times) else None


def _take(budget: Mapping[int, dict[str, int]], position: int) -> bool:
    """Match one count of the window ending at poll `position`, if one is left."""
    counts = budget.get(position, {})
    for broker in sorted(counts):
        if counts[broker] > 0:
            counts[broker] -= 1
            return True
    return False


def _count(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def load_manager_views(windows: pd.DataFrame, summary: Mapping[str, Any]) -> list[View]:
    """What the load manager counted, for a page: nothing when it counted nothing."""
    if windows.empty:
        return []
    text = (
        f"The load manager counted {summary['load_manager_unloads']} bundle unload(s) and "
        f"{summary['load_manager_splits']} split(s) in the stored snapshots (its own counters, "
        "read from each broker's /admin/v2/broker-stats/metrics)."
    )
    if summary["load_manager_unseen"]:
        text += (
            f" {summary['load_manager_unseen']} of the unloads match no owner change the polls "
            "saw: unloaded and re-acquired between two polls, or an unload that failed."
        )
    return [
        Note(text),
        Table(windows, title="Load manager's counts", caption="Per broker and poll window"),
    ]
