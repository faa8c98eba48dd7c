"""`incident-timeline`'s rows of clients and subscriptions: the collector's events of
consumers joining, leaving and of failover and Key_Shared changes, consumers reconnecting
between two polls (`connectedSince`), and backlogs crossing a threshold."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pulsar_lens.api import frame_of
from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins.builtin.incident_timeline.frames import (
    BROKER,
    CLIENT,
    FAILOVER,
    KEY_SHARED,
    MAX_TEXT,
    ROW_COLUMNS,
    SUBSCRIPTIONS,
    namespace_of,
    row,
    text_of,
)
from pulsar_lens.plugins.builtin.incident_timeline.links import step_links

RECONNECT_COLUMNS = ("topic", "subscription", "consumer_name", "connected_since")
"""The columns of `consumers` incident-timeline reads (its `columns_of`)."""
EVENT_COLUMNS = (
    "at",
    "kind",
    "subject",
    "topic",
    "subscription",
    "consumer_name",
    "before",
    "after",
)
"""The columns of `events` incident-timeline reads."""
JOINS = ("consumer_joined", "consumer_left")


Key = tuple[str | None, str | None]  # (topic, subscription), as a row may name them
SUBSCRIPTION_KEY = ["topic", "subscription"]
CONSUMER_KEY = list(RECONNECT_COLUMNS[:3])


class NewestTypes:
    """The newest type of each (topic, subscription) of a window, found for the keys asked
    only: its last typed row in the newest poll (`latest`, that poll's `subscriptions`), or,
    for one the newest poll gives no type, the type it had in the last poll that gave one,
    which the step after that poll kept (`untyped`: `steps.type_changes` of every poll, in poll
    order). The rows name a few subscriptions; a dictionary of every one cost seconds at a
    million."""

    def __init__(self, latest: pd.DataFrame, untyped: pd.DataFrame) -> None:
        self._latest = latest
        self._untyped = untyped
        self._found: dict[Key, str] = {}  # the newest poll's type of each subscription of...
        self._read: set[Any] = set()  # ...these topics, read once whoever asks
        self._earlier: dict[Key, str] | None = None

    def of(self, keys: Collection[Key]) -> dict[Key, str]:
        """The newest type of each of `keys` that a row gives one; keys without one (or with
        a missing name) are left out."""
        wanted = {(t, s) for t, s in keys if t is not None and s is not None}
        if not wanted:
            return {}
        latest = self._latest
        unread = list({t for t, _ in wanted} - self._read)
        if unread and not latest.empty:
            typed = latest[latest["topic"].isin(unread) & latest["type"].notna()]
            newest = typed.drop_duplicates(SUBSCRIPTION_KEY, keep="last")  # one poll: row order
            found = zip(newest["topic"], newest["subscription"], newest["type"], strict=True)
            self._found.update(((str(t), str(s)), str(k)) for t, s, k in found)
        self._read.update(unread)
        if self._earlier is None and not wanted <= self._found.keys():
            gone = self._untyped
            pairs = zip(gone["topic"], gone["subscription"], gone["type"], strict=True)
            self._earlier = {(str(t), str(s)): str(k) for t, s, k in pairs} if len(gone) else {}
        earlier = self._earlier or {}
        return {
            key: self._found[key] if key in self._found else earlier[key]
            for key in wanted
            if key in self._found or key in earlier
        }


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
    joins = JOINS
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
            source, page = CLIENT, page_of_type(kinds_by_subscription.get((topic, sub)))
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


def client_frame(events: pd.DataFrame, poll: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """`client_rows` of one step's events (`snapshots`: its index rows) as a frame of
    `ROW_COLUMNS` with their `links.step_links`. A consumer joining or leaving gets the page
    of its subscription's type in the step's poll (`poll`, its `subscriptions`), which is the
    window's newest type unless the type changes in a later poll (`unlinked` finds those); one
    the poll gives no type gets no link: the window's newest type chooses its page
    (`with_pages`)."""
    types = NewestTypes(poll, pd.DataFrame(columns=["topic", "subscription", "type"]))
    found = step_links(frame_of(client_rows(events, types), ROW_COLUMNS), snapshots)
    joins = found["kind"].isin(JOINS).to_numpy(dtype=bool)
    if joins.any():
        keys = _keys(found[joins])
        typed = types.of(set(keys))
        unknown = np.flatnonzero(joins)[[key not in typed for key in keys]]
        found.loc[found.index[unknown], ["snapshot_id", "link"]] = None
    return found


def unlinked(found: pd.DataFrame, changed: pd.DataFrame) -> np.ndarray:
    """Per row of every step's `client_frame` rows: the window makes its link, as its step
    made none, or it is a consumer joining or leaving a subscription whose type changed in the
    window (`changed`: the steps' `untyped` and `retyped`), so its page is the newest type's."""
    todo: np.ndarray = (
        found["link"].isna().to_numpy(dtype=bool).copy()
        if "link" in found
        else np.ones(len(found), dtype=bool)
    )
    if found.empty or changed.empty:
        return todo
    joins = found["kind"].isin(JOINS).to_numpy(dtype=bool)
    if joins.any():
        pairs = zip(changed["topic"], changed["subscription"], strict=True)
        moved = {(str(t), str(s)) for t, s in pairs}
        again = np.flatnonzero(joins)[[key in moved for key in _keys(found[joins])]]
        todo[again] = True
    return todo


def _keys(rows: pd.DataFrame) -> list[Key]:
    topics = rows["topic"].to_numpy(dtype=object)
    subs = rows["subscription"].to_numpy(dtype=object)
    return [(text_of(t), text_of(s)) for t, s in zip(topics, subs, strict=True)]


def with_pages(found: pd.DataFrame, types: NewestTypes, todo: np.ndarray) -> pd.DataFrame:
    """`client_frame` rows (of every poll) with the page of consumers joining and leaving
    among the rows `todo` (`unlinked`): Key_Shared's, Failover's or the subscriptions' by the
    newest type of the subscription (the others have their page already)."""
    if found.empty:
        return found
    joins = found["kind"].isin(JOINS).to_numpy(dtype=bool) & todo
    if not joins.any():
        return found
    topics = found["topic"].to_numpy(dtype=object)[joins]
    subs = found["subscription"].to_numpy(dtype=object)[joins]
    named = [(text_of(t), text_of(s)) for t, s in zip(topics, subs, strict=True)]
    kinds = types.of(set(named))
    pages = found["explained_by"].to_numpy(dtype=object).copy()
    pages[joins] = [page_of_type(kinds.get(key)) for key in named]
    return found.assign(explained_by=pages)


def reconnect_rows(found: pd.DataFrame, types: NewestTypes) -> list[dict[str, Any]]:
    """Consumers that reconnected between two polls (`steps.reconnects` of every poll, in poll
    order), consumers in name order and each one's polls in time order. A consumer missing
    from a poll is the collector's `consumer_left` and `consumer_joined` instead."""
    if found.empty:
        return []
    ordered = found.sort_values(CONSUMER_KEY, kind="stable")  # several keys: stable anyway
    named = list(zip(*(ordered[k].tolist() for k in CONSUMER_KEY), strict=True))
    kinds_by_subscription = types.of({(topic, sub) for topic, sub, _ in named})
    rows = []
    for (topic, sub, name), at, detail in zip(named, ordered["at"], ordered["detail"], strict=True):
        rows.append(
            row(
                at,
                "consumer_reconnected",
                CLIENT,
                page_of_type(kinds_by_subscription.get((topic, sub))),
                topic=topic,
                subscription=sub,
                namespace=namespace_of(topic),
                subject=name,
                detail=detail,
            )
        )
    return rows


def backlog_rows(changes: pd.DataFrame, left: pd.DataFrame, threshold: int) -> list[dict[str, Any]]:
    """A subscription's backlog reaching `threshold` messages (`backlog_over`: from below, or
    at its first row in the window) and falling under it again (`backlog_under`), from every
    poll's `steps.backlog_changes`, subscriptions in name order and each one's rows in time
    order.

    A step knows the row before each of its poll's rows except for a subscription the poll
    before did not list (`arrived`): that row compares with the subscription's last row
    before it left the listing (`left`, the step of the poll it was missing from), or, when
    it was not listed earlier in the window, with a backlog under the threshold."""
    if changes.empty:
        return []
    over = changes["over"].to_numpy(dtype=bool)
    arrived = changes["arrived"].to_numpy(dtype=bool)
    before = np.zeros(len(changes), dtype=bool)
    if arrived.any() and len(left):
        came = changes[arrived].assign(_row=np.flatnonzero(arrived))
        went = left.rename(columns={"over": "_was"})[[*SUBSCRIPTION_KEY, "at", "_was"]]
        matched = pd.merge_asof(
            came.sort_values("at", kind="stable"),
            went.sort_values("at", kind="stable"),
            on="at",
            by=SUBSCRIPTION_KEY,
            allow_exact_matches=False,
        )
        was = matched["_was"].astype("boolean").fillna(False).to_numpy(dtype=bool)
        before[matched["_row"].to_numpy()] = was
    shown = changes[~arrived | (over != before)]
    shown = shown.sort_values(SUBSCRIPTION_KEY, kind="stable")
    rows = []
    columns = (shown[c].tolist() for c in ("at", "backlog", "topic", "subscription"))
    for when, value, topic, sub in zip(*columns, strict=True):
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


def group_numbers(frame: pd.DataFrame, key: list[str]) -> npt.NDArray[np.int64]:
    """Each row's group of `key` values, numbered in sorted order as `groupby` iterates them;
    -1 for a row with a missing value in `key` (which `groupby` leaves out)."""
    numbers: npt.NDArray[np.float64] = (
        frame.groupby(key, sort=True).ngroup().to_numpy(dtype=float, na_value=-1.0)
    )
    return numbers.astype(np.int64)


def page_of_type(kind: str | None) -> str:
    if kind == "Key_Shared":
        return KEY_SHARED
    return FAILOVER if kind in ("Failover", "Exclusive") else SUBSCRIPTIONS


def at_least(backlog: pd.Series, threshold: int) -> npt.NDArray[np.bool_]:
    """Per row: the backlog, a missing one as 0, read as a whole number, is `threshold` or
    more (`threshold` >= 1: a number is, exactly when its whole part is)."""
    if pd.api.types.is_numeric_dtype(backlog.dtype) and backlog.dtype != object:
        over: npt.NDArray[np.bool_] = (backlog >= threshold).fillna(False).to_numpy(dtype=bool)
        return over
    return np.fromiter(
        ((int(b) if pd.notna(b) else 0) >= threshold for b in backlog), bool, len(backlog)
    )
