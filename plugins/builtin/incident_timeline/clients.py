"""`incident-timeline`'s rows of clients and subscriptions: the collector's events of
consumers joining, leaving and of failover and Key_Shared changes, consumers reconnecting
between two polls (`connectedSince`), and backlogs crossing a threshold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def client_rows(events: pd.DataFrame, kinds_by_subscription: Mapping[Any, str]) -> list[Any]:
    """The collector's events of clients and subscriptions: consumers joining and leaving,
    failover's active consumer changing, Key_Shared hash ranges changing."""
    rows = []
    for e in events.to_dict("records"):
        kind = str(e["kind"])
        topic, sub = text_of(e.get("topic")), text_of(e.get("subscription"))
        where = {"topic": topic, "subscription": sub, "namespace": namespace_of(topic)}
        before, after = text_of(e.get("before")), text_of(e.get("after"))
        if kind in ("consumer_joined", "consumer_left"):
            page = _page_of_type(kinds_by_subscription.get((topic, sub)))
            rows.append(
                row(
                    e["at"],
                    kind,
                    CLIENT,
                    page,
                    subject=text_of(e.get("consumer_name")),
                    detail=f"{e.get('consumer_name')} {kind.split('_')[1]}",
                    **where,
                )
            )
        elif kind == "active_consumer_changed":
            detail = f"active consumer {before or '-'} -> {after or '-'}"
            rows.append(row(e["at"], kind, BROKER, FAILOVER, subject=after, detail=detail, **where))
        elif kind == "hash_ranges_changed":
            detail = (
                f"hash ranges {clean(before, limit=MAX_TEXT)} -> {clean(after, limit=MAX_TEXT)}"
            )
            rows.append(
                row(
                    e["at"],
                    kind,
                    BROKER,
                    KEY_SHARED,
                    subject=text_of(e.get("consumer_name")),
                    detail=detail,
                    **where,
                )
            )
    return rows


def reconnect_rows(
    consumers: pd.DataFrame, snapshots: pd.DataFrame, kinds_by_subscription: Mapping[Any, str]
) -> list[dict[str, Any]]:
    """Consumers listed in two consecutive polls with a newer `connectedSince` in the second:
    they reconnected in between (an unload, a broker restart, a network cut). The row is at
    that `connectedSince`, kept between the two polls. A consumer missing from a poll is the
    collector's `consumer_left` and `consumer_joined` instead."""
    if consumers.empty or snapshots.empty:
        return []
    key = ["topic", "subscription", "consumer_name"]
    times = pd.to_datetime(snapshots["collected_at"], utc=True).astype("datetime64[us, UTC]")
    position = dict(zip(snapshots["snapshot_id"].astype(str), range(len(snapshots)), strict=True))
    listed = consumers.dropna(subset=["connected_since"]).assign(
        pos=consumers["snapshot_id"].astype(str).map(position),
        since=pd.to_datetime(consumers["connected_since"], utc=True),
    )
    per_poll = listed.dropna(subset=["pos"]).groupby([*key, "pos"], as_index=False)["since"].max()
    per_poll = per_poll.sort_values([*key, "pos"], kind="stable")
    before = per_poll.groupby(key, sort=False)[["pos", "since"]].shift()
    again = per_poll[(before["pos"] == per_poll["pos"] - 1) & (per_poll["since"] > before["since"])]
    rows = []
    for r in again.to_dict("records"):
        pos = int(r["pos"])
        at = min(max(r["since"], times.iloc[pos - 1]), times.iloc[pos])
        topic, sub, name = str(r["topic"]), str(r["subscription"]), str(r["consumer_name"])
        page = _page_of_type(kinds_by_subscription.get((topic, sub)))
        detail = f"{name} connected again at {pd.Timestamp(r['since']).isoformat()}"
        rows.append(
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
    return rows


def _page_of_type(kind: str | None) -> str:
    if kind == "Key_Shared":
        return KEY_SHARED
    return FAILOVER if kind in ("Failover", "Exclusive") else SUBSCRIPTIONS


def backlog_rows(subscriptions: pd.DataFrame, threshold: int) -> list[dict[str, Any]]:
    """A subscription's backlog reaching `threshold` messages (`backlog_over`: from below,
    or at the window's first poll) and falling under it again (`backlog_under`)."""
    if subscriptions.empty:
        return []
    rows = []
    ordered = subscriptions.sort_values("collected_at", kind="stable")
    for (topic, sub), polls in ordered.groupby(["topic", "subscription"], sort=True):
        over_before = False
        for at, backlog in zip(polls["collected_at"], polls["msg_backlog"], strict=True):
            value = int(backlog) if pd.notna(backlog) else 0
            over = value >= threshold
            if over != over_before:
                kind = "backlog_over" if over else "backlog_under"
                detail = f"backlog {value:,} message(s), threshold {threshold:,}"
                rows.append(
                    row(
                        at,
                        kind,
                        CLIENT,
                        SUBSCRIPTIONS,
                        topic=topic,
                        subscription=sub,
                        namespace=namespace_of(topic),
                        subject=sub,
                        detail=detail,
                    )
                )
            over_before = over
    return rows
