"""What each poll says against the poll before it (`IncidentTimeline.step`): consumers that
reconnected, backlog rows that crossed the threshold, subscriptions no longer listed or no
longer typed. Each is computed once per poll and kept (`pulsar_lens.plugins.steps`); the
analysis puts every poll's together (`clients.reconnect_rows`, `clients.backlog_rows`,
`clients.NewestTypes`), and the rows equal those of comparing the whole window at once
(tests/plugins/test_incident_timeline_steps.py).

`snapshots` holds the step's index rows, oldest first: the poll before and the poll, or the
window's first poll alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from pulsar_lens.plugins.builtin.incident_timeline.clients import (
    CONSUMER_KEY,
    SUBSCRIPTION_KEY,
    at_least,
    group_numbers,
)
from pulsar_lens.plugins.builtin.shared.positions import snapshot_positions

TIME = "datetime64[us, UTC]"
RECONNECTS = {
    "topic": "object",
    "subscription": "object",
    "consumer_name": "object",
    "at": TIME,
    "detail": "object",
}
CHANGES = {
    "topic": "object",
    "subscription": "object",
    "at": TIME,
    "backlog": "int64",
    "over": "bool",
    "arrived": "bool",
}
LEFT = {"topic": "object", "subscription": "object", "at": TIME, "over": "bool"}
UNTYPED = {"topic": "object", "subscription": "object", "at": TIME, "type": "object"}
RETYPED = {"topic": "object", "subscription": "object"}


def empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})


def _times(snapshots: pd.DataFrame) -> pd.Series:
    return pd.to_datetime(snapshots["collected_at"], utc=True).astype(TIME)


def reconnects(consumers: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """Consumers listed in both polls with a newer `connectedSince` in the second: they
    reconnected in between (an unload, a broker restart, a network cut). Each row is at that
    `connectedSince`, kept between the two polls.

    By column: each consumer's newest `connectedSince` per poll, compared across the two;
    Python only for the rows found."""
    if len(snapshots) < 2 or consumers.empty:
        return empty(RECONNECTS)
    times = _times(snapshots)
    pos = snapshot_positions(consumers, [str(s) for s in snapshots["snapshot_id"]])
    since = pd.to_datetime(consumers["connected_since"], utc=True)
    group = group_numbers(consumers, CONSUMER_KEY)
    rows = np.flatnonzero((pos >= 0) & since.notna().to_numpy() & (group >= 0))
    if not len(rows):
        return empty(RECONNECTS)
    stamps = pd.DatetimeIndex(since).asi8
    rows = rows[np.lexsort((stamps[rows], pos[rows], group[rows]))]
    g, p = group[rows], pos[rows]
    # the last row of each (consumer, poll): its newest connectedSince
    last = np.flatnonzero(np.append((g[1:] != g[:-1]) | (p[1:] != p[:-1]), True))
    newest, g, p, s = rows[last], g[last], p[last], stamps[rows[last]]
    again = np.flatnonzero((g[1:] == g[:-1]) & (p[1:] == p[:-1] + 1) & (s[1:] > s[:-1])) + 1
    chosen = newest[again].tolist()
    found: dict[str, list[object]] = {name: [] for name in RECONNECTS}
    for r in chosen:
        topic, sub, name = (str(consumers[k].iloc[r]) for k in CONSUMER_KEY)
        when = since.iloc[r]
        found["topic"].append(topic)
        found["subscription"].append(sub)
        found["consumer_name"].append(name)
        found["at"].append(min(max(when, times.iloc[0]), times.iloc[1]))
        found["detail"].append(f"{name} connected again at {pd.Timestamp(when).isoformat()}")
    frame = pd.DataFrame(found)
    return frame.astype(RECONNECTS) if len(frame) else empty(RECONNECTS)


def backlog_changes(
    subscriptions: pd.DataFrame,
    snapshots: pd.DataFrame,
    threshold: int,
    *,
    group: npt.NDArray[np.int64] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(changes, left) of the poll against the poll before it.

    `changes`: the poll's rows whose backlog is on the other side of `threshold` than the
    subscription's row before (the poll before's last, or the poll's own earlier one), and the
    rows of subscriptions the poll before did not list (`arrived`: what comes before them is
    for `clients.backlog_rows` to find; the window's first poll, alone, keeps only those over
    the threshold, as nothing before them is in the window). `left`: subscriptions the poll
    before listed and the poll does not, whether their last row was over the threshold."""
    if subscriptions.empty or not len(snapshots):
        return empty(CHANGES), empty(LEFT)
    ids = [str(s) for s in snapshots["snapshot_id"]]
    alone = len(ids) < 2
    if group is None:
        group = subscription_groups(subscriptions)
    # the rows in the order `sort_values("collected_at", kind="stable")` gives them, by
    # their positions (`order`): the frame itself is not copied in that order
    times = subscriptions["collected_at"].reset_index(drop=True)
    order = times.sort_values(kind="stable").index.to_numpy()
    group = group[order]
    kept = np.flatnonzero(group >= 0)
    kept = kept[np.argsort(group[kept], kind="stable")]
    g = group[kept]
    over = at_least(subscriptions["msg_backlog"], threshold)[order][kept]
    first = np.append(True, g[1:] != g[:-1])
    last = np.append(g[1:] != g[:-1], True)
    pos = snapshot_positions(subscriptions, ids)[order][kept]
    newest = len(ids) - 1
    now = pos == newest
    changed = ~first & (over != np.append(False, over[:-1]))
    arrived = first & now & (over | (not alone))
    chosen = np.flatnonzero(now & (changed | arrived))
    rows = order[kept[chosen]]
    backlog = subscriptions["msg_backlog"].iloc[rows]
    changes = pd.DataFrame(
        {
            "topic": subscriptions["topic"].iloc[rows].to_numpy(dtype=object),
            "subscription": subscriptions["subscription"].iloc[rows].to_numpy(dtype=object),
            "at": pd.to_datetime(subscriptions["collected_at"].iloc[rows], utc=True).to_numpy(),
            "backlog": [int(b) if pd.notna(b) else 0 for b in backlog],
            "over": over[chosen],
            "arrived": arrived[chosen],
        }
    ).astype(CHANGES)
    if alone:
        return changes, empty(LEFT)
    # a subscription's last row in the poll before, when the poll lists none of its rows
    listed_now = np.zeros(int(g.max()) + 1 if len(g) else 0, dtype=bool)
    listed_now[g[now]] = True
    gone = np.flatnonzero(last & (pos == newest - 1) & ~listed_now[g])
    at = _times(snapshots).iloc[-1]
    rows = order[kept[gone]]
    left = pd.DataFrame(
        {
            "topic": subscriptions["topic"].iloc[rows].to_numpy(dtype=object),
            "subscription": subscriptions["subscription"].iloc[rows].to_numpy(dtype=object),
            "at": [at] * len(gone),
            "over": over[gone],
        }
    )
    return changes, left.astype(LEFT) if len(left) else empty(LEFT)


def type_changes(
    subscriptions: pd.DataFrame,
    snapshots: pd.DataFrame,
    *,
    group: npt.NDArray[np.int64] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(untyped, retyped) of the poll against the poll before it, each poll's last typed row
    of each subscription (both names given) found once for both:

    `untyped`: subscriptions the poll before gave a type and the poll gives none (or does not
    list), with the type of the poll before's last typed row: what `clients.NewestTypes`
    reads for one the newest poll gives no type. `retyped`: subscriptions both polls give a
    type, a different one; with `untyped`, every change of the type `NewestTypes` would
    read."""
    if len(snapshots) < 2 or subscriptions.empty:
        return empty(UNTYPED), empty(RETYPED)
    before, now = _last_typed_rows(subscriptions, snapshots, group)
    gone = before.rows[~np.isin(before.group, now.group)]
    if len(gone):
        rows = subscriptions.iloc[gone]
        untyped = pd.DataFrame(
            {
                "topic": rows["topic"].astype(str).to_numpy(dtype=object),
                "subscription": rows["subscription"].astype(str).to_numpy(dtype=object),
                "at": [_times(snapshots).iloc[-1]] * len(rows),
                "type": rows["type"].astype(str).to_numpy(dtype=object),
            }
        ).astype(UNTYPED)
    else:
        untyped = empty(UNTYPED)
    # each subscription's type in the poll before, looked up by its number (None: untyped)
    type_before = np.full(int(before.group.max()) + 1 if len(before.group) else 0, None, object)
    type_before[before.group] = _texts(subscriptions["type"], before.rows)
    listed = now.group < len(type_before)
    was = np.full(len(now.rows), None, object)
    was[listed] = type_before[now.group[listed]]
    changed = now.rows[(was != None) & (was != _texts(subscriptions["type"], now.rows))]  # noqa: E711
    if not len(changed):
        return untyped, empty(RETYPED)
    rows = subscriptions.iloc[changed]
    retyped = pd.DataFrame(
        {name: rows[name].astype(str).to_numpy(dtype=object) for name in SUBSCRIPTION_KEY}
    )
    return untyped, retyped.astype(RETYPED)


def _texts(column: pd.Series, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.object_]:
    """`str` of the values at `rows`, as an object array (only those rows converted)."""
    found: npt.NDArray[np.object_] = column.iloc[rows].astype(str).to_numpy(dtype=object)
    return found


def subscription_groups(subscriptions: pd.DataFrame) -> npt.NDArray[np.int64]:
    """Each row's subscription (`clients.group_numbers` of its topic and name), found once
    for the step's comparisons of the subscriptions: each keying of a million subscriptions'
    names costs the better part of a second."""
    return group_numbers(subscriptions, SUBSCRIPTION_KEY)


@dataclass(frozen=True)
class _Rows:
    rows: npt.NDArray[np.int64]  # row positions, ascending
    group: npt.NDArray[np.int64]  # the subscription of each

    def __getitem__(self, keep: npt.NDArray[np.bool_]) -> _Rows:
        return _Rows(self.rows[keep], self.group[keep])


def _last_typed_rows(
    subscriptions: pd.DataFrame, snapshots: pd.DataFrame, group: npt.NDArray[np.int64] | None
) -> tuple[_Rows, _Rows]:
    """The last row with a type of each subscription (both names given) in the poll before
    and in the poll, each in row order: `drop_duplicates(keep="last")` of those rows."""
    if group is None:
        group = subscription_groups(subscriptions)
    ids = [str(s) for s in snapshots["snapshot_id"]]
    pos = snapshot_positions(subscriptions, ids)
    typed = subscriptions["type"].notna().to_numpy(dtype=bool) & (group >= 0)
    before = _last_of_each(np.flatnonzero(typed & (pos == 0)), group)
    return before, _last_of_each(np.flatnonzero(typed & (pos == len(ids) - 1)), group)


def _last_of_each(rows: npt.NDArray[np.int64], group: npt.NDArray[np.int64]) -> _Rows:
    """Of `rows` (ascending), the last of each group, still ascending."""
    mine = group[rows]
    _, first_from_end = np.unique(mine[::-1], return_index=True)
    last = np.sort(len(mine) - 1 - first_from_end)
    return _Rows(rows[last], mine[last])


def rows_of_poll(frame: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """The rows of the step's poll (the newest of `snapshots`), in their order."""
    if frame.empty or not len(snapshots):
        return frame
    mine = snapshot_positions(frame, [str(s) for s in snapshots["snapshot_id"]])
    return frame[mine == len(snapshots) - 1]


def events_of(events: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """The poll's own events (those the collector stored with it), in their order."""
    if events.empty or not len(snapshots):
        return events.iloc[0:0].assign(kind=pd.Series(dtype=object))
    newest = str(snapshots["snapshot_id"].iloc[-1])
    mine = (events["snapshot_id"].astype(str) == newest).to_numpy(dtype=bool)
    return events[mine].reset_index(drop=True)
