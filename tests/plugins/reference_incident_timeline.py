"""incident-timeline's row builders as they were before they were vectorised (plugin version
1.0): a pandas group per subscription for the backlog rows, a dict of every subscription row
for the types, and a pandas group-by and shift over every consumer row for the reconnects.
Kept only as the reference the vectorised builders must equal row for row
(tests/plugins/test_incident_timeline_vectorised.py, benchmarks/results_pass.py); not product
code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from pulsar_lens.plugins.builtin.incident_timeline.clients import _page_of_type
from pulsar_lens.plugins.builtin.incident_timeline.frames import (
    CLIENT,
    SUBSCRIPTIONS,
    namespace_of,
    row,
)


def types(subs: pd.DataFrame) -> dict[tuple[str, str], str]:
    """The newest type of each (topic, subscription)."""
    if subs.empty:
        return {}
    typed = subs.dropna(subset=["type"]).sort_values("collected_at", kind="stable")
    return {
        (str(t), str(s)): str(k)
        for t, s, k in zip(typed["topic"], typed["subscription"], typed["type"], strict=True)
    }


class AllTypes(dict[tuple[str, str], str]):
    """`types` behind incident-timeline's `NewestTypes`: every subscription's, whatever the
    keys asked."""

    def __init__(self, subs: pd.DataFrame) -> None:
        super().__init__(types(subs))

    def of(self, keys: object) -> dict[tuple[str, str], str]:
        return self


def reconnect_rows(
    consumers: pd.DataFrame, snapshots: pd.DataFrame, kinds_by_subscription: Mapping[Any, str]
) -> list[dict[str, Any]]:
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


def backlog_rows(subscriptions: pd.DataFrame, threshold: int) -> list[dict[str, Any]]:
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
