"""incident-timeline's analysis as it was before steps (plugin version 1.1): the whole window
of subscriptions and consumers read and compared at every pass. Kept only as the reference
the stepped analysis must equal (tests/plugins/test_incident_timeline_steps.py) and as the
window the builders of reference_incident_timeline.py replace; not product code.

`WHOLE_WINDOW` swaps make `IncidentTimeline` this analysis (`tests.plugins.swaps.swapped`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import AnalysisPlugin, Inputs, Result
from pulsar_lens.plugins.builtin import incident_timeline as timeline
from pulsar_lens.plugins.builtin.incident_timeline import clients, frames
from pulsar_lens.plugins.builtin.incident_timeline.clients import (
    CLIENT,
    SUBSCRIPTIONS,
    Key,
    namespace_of,
    row,
)
from pulsar_lens.plugins.builtin.incident_timeline.clients import (
    at_least as _at_least,
)
from pulsar_lens.plugins.builtin.incident_timeline.clients import (
    group_numbers as _group_numbers,
)
from pulsar_lens.plugins.builtin.incident_timeline.clients import (
    page_of_type as _page_of_type,
)
from pulsar_lens.plugins.builtin.shared.positions import snapshot_positions

RECONNECT_COLUMNS = clients.RECONNECT_COLUMNS


class NewestTypes:
    """The newest type of each (topic, subscription) of a window of `subscriptions`, found
    for the keys asked only: the rows name a few subscriptions, and a dictionary of every
    one cost seconds at a million."""

    def __init__(self, subscriptions: pd.DataFrame) -> None:
        self._subs = subscriptions
        self._found: dict[Key, str] = {}  # the newest type of each subscription of...
        self._read: set[Any] = set()  # ...these topics, read once whoever asks

    def of(self, keys: Collection[Key]) -> dict[Key, str]:
        """The newest type of each of `keys` that a row gives one (its last row in time
        order with a type); keys without one (or with a missing name) are left out."""
        wanted = {(t, s) for t, s in keys if t is not None and s is not None}
        subs = self._subs
        if subs.empty or not wanted:
            return {}
        unread = list({t for t, _ in wanted} - self._read)
        if unread:
            typed = subs[subs["topic"].isin(unread) & subs["type"].notna()]
            typed = typed[["topic", "subscription", "type", "collected_at"]]
            newest = typed.sort_values("collected_at", kind="stable").drop_duplicates(
                ["topic", "subscription"], keep="last"
            )
            found = zip(newest["topic"], newest["subscription"], newest["type"], strict=True)
            self._found.update(((str(t), str(s)), str(k)) for t, s, k in found)
            self._read.update(unread)
        return {key: self._found[key] for key in wanted if key in self._found}


def reconnect_rows(
    consumers: pd.DataFrame, snapshots: pd.DataFrame, types: NewestTypes
) -> list[dict[str, Any]]:
    """Consumers listed in two consecutive polls with a newer `connectedSince` in the second:
    they reconnected in between (an unload, a broker restart, a network cut). The row is at
    that `connectedSince`, kept between the two polls. A consumer missing from a poll is the
    collector's `consumer_left` and `consumer_joined` instead.

    By column: each consumer's newest `connectedSince` per poll, consumers in name order and
    polls in time order, compared with the poll before; Python only for the rows found."""
    if consumers.empty or snapshots.empty:
        return []
    key = list(RECONNECT_COLUMNS[:3])
    times = pd.to_datetime(snapshots["collected_at"], utc=True).astype("datetime64[us, UTC]")
    pos = snapshot_positions(consumers, [str(s) for s in snapshots["snapshot_id"]])
    since = pd.to_datetime(consumers["connected_since"], utc=True)
    group = _group_numbers(consumers, key)
    rows = np.flatnonzero((pos >= 0) & since.notna().to_numpy() & (group >= 0))
    if not len(rows):
        return []
    stamps = pd.DatetimeIndex(since).asi8
    rows = rows[np.lexsort((stamps[rows], pos[rows], group[rows]))]
    g, p = group[rows], pos[rows]
    # the last row of each (consumer, poll): its newest connectedSince
    last = np.flatnonzero(np.append((g[1:] != g[:-1]) | (p[1:] != p[:-1]), True))
    newest, g, p, s = rows[last], g[last], p[last], stamps[rows[last]]
    again = np.flatnonzero((g[1:] == g[:-1]) & (p[1:] == p[:-1] + 1) & (s[1:] > s[:-1])) + 1
    found = []
    chosen = newest[again].tolist()
    named = [tuple(str(consumers[k].iloc[r]) for k in key) for r in chosen]
    kinds_by_subscription = types.of({(topic, sub) for topic, sub, _ in named})
    for r, poll, (topic, sub, name) in zip(chosen, p[again].tolist(), named, strict=True):
        when = since.iloc[r]
        at = min(max(when, times.iloc[poll - 1]), times.iloc[poll])
        page = _page_of_type(kinds_by_subscription.get((topic, sub)))
        detail = f"{name} connected again at {pd.Timestamp(when).isoformat()}"
        found.append(
            row(
                at,
                "consumer_reconnected",
                CLIENT,
                page,
                topic=topic,
                subscription=sub,
                namespace=namespace_of(topic),
                subject=name,
                detail=detail,
            )
        )
    return found


def backlog_rows(subscriptions: pd.DataFrame, threshold: int) -> list[dict[str, Any]]:
    """A subscription's backlog reaching `threshold` messages (`backlog_over`: from below,
    or at the window's first poll) and falling under it again (`backlog_under`).

    By column: every subscription's polls in time order, subscriptions in name order, each
    poll over or not compared with the one before; Python only for the rows found."""
    if subscriptions.empty:
        return []
    ordered = subscriptions.sort_values("collected_at", kind="stable")
    group = _group_numbers(ordered, ["topic", "subscription"])
    kept = np.flatnonzero(group >= 0)
    kept = kept[np.argsort(group[kept], kind="stable")]
    over = _at_least(ordered["msg_backlog"], threshold)[kept]
    first = np.append(True, group[kept][1:] != group[kept][:-1])
    changed = over != np.where(first, False, np.append(False, over[:-1]))
    at = kept[changed]
    rows = []
    columns = (
        ordered[c].iloc[at] for c in ("collected_at", "msg_backlog", "topic", "subscription")
    )
    for when, backlog, topic, sub in zip(*columns, strict=True):
        value = int(backlog) if pd.notna(backlog) else 0
        kind = "backlog_over" if value >= threshold else "backlog_under"
        rows.append(
            row(
                when,
                kind,
                CLIENT,
                SUBSCRIPTIONS,
                topic=topic,
                subscription=sub,
                namespace=namespace_of(topic),
                subject=sub,
                detail=f"backlog {value:,} message(s), threshold {threshold:,}",
            )
        )
    return rows


def analyze(self: Any, data: Inputs, params: Any) -> Result:
    """`IncidentTimeline.analyze` of plugin version 1.1, every builder looked up here."""
    polls = data.snapshots.tail(params.window).reset_index(drop=True)
    events = data.history("events")
    kinds = events["kind"].astype(str) if len(events) else pd.Series(dtype=str)
    subs = data.history("subscriptions")
    types = NewestTypes(subs)
    stuck = data.result("stuck-hashes").frames
    rows = [
        *frames.poll_rows(data.snapshots),
        *frames.bundle_rows(data.result("bundle-ownership").frames["events"]),
        *frames.outage_rows(data.result("unload-latency").frames["outages"]),
        *frames.load_manager_rows(events[kinds.str.startswith("load_manager_")]),
        *clients.client_rows(
            events[kinds.isin([*timeline.COLLECTED_KINDS, "hash_ranges_changed"])], types
        ),
        *reconnect_rows(data.history("consumers"), data.snapshots, types),
        *frames.draining_rows(stuck["history"], stuck["hashes"], data.snapshots),
        *backlog_rows(subs, params.backlog_threshold),
    ]
    return timeline.timeline_of(frames.to_frame(rows), data.snapshots, polls, params)


PLUGIN = timeline.IncidentTimeline
WHOLE_WINDOW: tuple[tuple[Any, str, Any], ...] = (
    (PLUGIN, "inputs", ("events", "subscriptions", "consumers")),
    (PLUGIN, "history_of", {}),
    (PLUGIN, "step_inputs", ()),
    (PLUGIN, "step_outputs", ()),
    (PLUGIN, "step_params", ()),
    (PLUGIN, "step", AnalysisPlugin.step),
    (PLUGIN, "analyze", analyze),
)
"""(object, name, value) making `IncidentTimeline` the whole-window analysis above."""
