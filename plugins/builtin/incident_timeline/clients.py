"""`incident-timeline`'s rows of clients and subscriptions: the collector's events of
consumers joining, leaving and of failover and Key_Shared changes, consumers reconnecting
between two polls (`connectedSince`), and backlogs crossing a threshold."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins.builtin.incident_timeline.frames import (
    BROKER,
    CLIENT,
    FAILOVER,
    KEY_SHARED,
    MAX_TEXT,
    SUBSCRIPTIONS,
    namespace_of,
    row,
    text_of,
)
from pulsar_lens.plugins.builtin.shared.positions import snapshot_positions

RECONNECT_COLUMNS = ("topic", "subscription", "consumer_name", "connected_since")
"""The columns of `consumers` incident-timeline reads (its `columns_of`)."""


Key = tuple[str | None, str | None]  # (topic, subscription), as a row may name them


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


def client_rows(events: pd.DataFrame, types: NewestTypes) -> list[Any]:
    """The collector's events of clients and subscriptions: consumers joining and leaving,
    failover's active consumer changing, Key_Shared hash ranges changing.

    Column by column, each topic's namespace and each hash-range text read once: a window
    holds some hundred thousand such events at 100,000 topics."""
    count = len(events)

    def column(name: str) -> list[Any]:  # a missing value as a record holds it (pd.NA: None)
        if name not in events:
            return [None] * count
        return [None if v is pd.NA else v for v in events[name].to_numpy(dtype=object)]

    kinds = [str(k) for k in column("kind")]
    topics = [text_of(v) for v in column("topic")]
    subs = [text_of(v) for v in column("subscription")]
    names, befores, afters = column("consumer_name"), column("before"), column("after")
    joins = ("consumer_joined", "consumer_left")
    kinds_by_subscription = types.of(
        {(t, s) for t, s, k in zip(topics, subs, kinds, strict=True) if k in joins}
    )
    changes = ("active_consumer_changed", "hash_ranges_changed")
    kept = [i for i, kind in enumerate(kinds) if kind in joins or kind in changes]
    namespaces: dict[str | None, str | None] = {}
    cleaned: dict[str | None, str] = {}
    rows = []
    # each row as `frames.row` makes it, its keys in `ROW_COLUMNS` order
    for i, at in zip(kept, events["at"].take(kept).tolist() if kept else [], strict=True):
        kind, topic, sub = kinds[i], topics[i], subs[i]
        if topic not in namespaces:
            namespaces[topic] = namespace_of(topic)
        if kind in joins:
            source, page = CLIENT, _page_of_type(kinds_by_subscription.get((topic, sub)))
            subject, detail = text_of(names[i]), f"{names[i]} {kind.split('_')[1]}"
        elif kind == "active_consumer_changed":
            before, subject = text_of(befores[i]), text_of(afters[i])
            source, page = BROKER, FAILOVER
            detail = f"active consumer {before or '-'} -> {subject or '-'}"
        else:
            texts = []
            for value in (text_of(befores[i]), text_of(afters[i])):
                if value not in cleaned:
                    cleaned[value] = clean(value, limit=MAX_TEXT)
                texts.append(cleaned[value])
            source, page, subject = BROKER, KEY_SHARED, text_of(names[i])
            detail = f"hash ranges {texts[0]} -> {texts[1]}"
        rows.append(
            {
                "at": at,
                "kind": kind,
                "source": source,
                "namespace": namespaces[topic],
                "topic": topic,
                "subscription": sub,
                "subject": subject,
                "detail": detail,
                "explained_by": page,
            }
        )
    return rows


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


def _group_numbers(frame: pd.DataFrame, key: list[str]) -> npt.NDArray[np.int64]:
    """Each row's group of `key` values, numbered in sorted order as `groupby` iterates them;
    -1 for a row with a missing value in `key` (which `groupby` leaves out)."""
    numbers: npt.NDArray[np.float64] = (
        frame.groupby(key, sort=True).ngroup().to_numpy(dtype=float, na_value=-1.0)
    )
    return numbers.astype(np.int64)


def _page_of_type(kind: str | None) -> str:
    if kind == "Key_Shared":
        return KEY_SHARED
    return FAILOVER if kind in ("Failover", "Exclusive") else SUBSCRIPTIONS


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


def _at_least(backlog: pd.Series, threshold: int) -> npt.NDArray[np.bool_]:
    """Per row: the backlog, a missing one as 0, read as a whole number, is `threshold` or
    more (`threshold` >= 1: a number is, exactly when its whole part is)."""
    if pd.api.types.is_numeric_dtype(backlog.dtype) and backlog.dtype != object:
        over: npt.NDArray[np.bool_] = (backlog >= threshold).fillna(False).to_numpy(dtype=bool)
        return over
    return np.fromiter(
        ((int(b) if pd.notna(b) else 0) >= threshold for b in backlog), bool, len(backlog)
    )
