"""incident-timeline's row builders as they were before they were vectorised (plugin version
1.0): a pandas group per subscription for the backlog rows, a dict of every subscription row
for the types, and a pandas group-by and shift over every consumer row for the reconnects;
the collector's client events as records, the draining episodes a pandas group per holder and
the timeline's links made one row at a time (plugin version 1.1).
Kept only as the reference the vectorised builders must equal row for row
(tests/plugins/test_incident_timeline_vectorised.py, benchmarks/results_pass.py); not product
code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import pandas as pd

from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins.builtin import incident_timeline as timeline
from pulsar_lens.plugins.builtin.incident_timeline import clients, frames
from pulsar_lens.plugins.builtin.incident_timeline.clients import page_of_type as _page_of_type
from pulsar_lens.plugins.builtin.incident_timeline.frames import (
    BROKER,
    CLIENT,
    FAILOVER,
    KEY_SHARED,
    MAX_TEXT,
    STUCK,
    SUBSCRIPTIONS,
    _runs,
    _stuck_counts,
    namespace_of,
    row,
    text_of,
)
from pulsar_lens.plugins.builtin.incident_timeline.links import (
    LINK_FIELDS,
    PAGES,
    _controls,
    poll_after,
)
from tests.plugins import reference_timeline_window as window


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


def link(page: str, snapshot: Any, cluster: Any, fields: Mapping[str, Any]) -> str:
    """`<page>?at=<snapshot>&cluster=<cluster>&<its controls>` with every value
    percent-encoded."""
    query: list[tuple[str, str]] = []
    if snapshot is not None:
        query.append(("at", str(snapshot)))
    if cluster:
        query.append(("cluster", str(cluster)))
    query.extend(_controls(page, fields))
    encoded = urlencode(query, quote_via=quote, safe="")
    return f"{quote(page, safe='-_.~')}?{encoded}" if encoded else quote(page, safe="-_.~")


def with_links(rows: pd.DataFrame, snapshots: pd.DataFrame, kept: Any = None) -> pd.DataFrame:
    """`rows` with `page`, `snapshot_id` and `link`, a link made per row (`link`); the whole
    window's analysis has no links a step made (`kept`)."""
    assert kept is None
    times = pd.to_datetime(snapshots["collected_at"], utc=True).astype("datetime64[us, UTC]")
    ids = snapshots["snapshot_id"].astype(str)
    clusters = dict(zip(ids, snapshots.get("cluster", pd.Series([None] * len(ids))), strict=True))
    out = rows.drop(columns="explained_by")
    out["page"] = rows["explained_by"].map(PAGES).astype(object)
    out["snapshot_id"] = poll_after(times, ids, rows["at"])
    out["link"] = [
        link(page, sid, clusters.get(sid), row)
        for page, sid, row in zip(
            out["page"], out["snapshot_id"], out[list(LINK_FIELDS)].to_dict("records"), strict=True
        )
    ]
    return out


def client_rows(events: pd.DataFrame, types: Any) -> list[Any]:
    """The collector's events of clients and subscriptions: consumers joining and leaving,
    failover's active consumer changing, Key_Shared hash ranges changing."""
    rows = []
    records = events.to_dict("records")
    kinds_by_subscription = types.of(
        {
            (text_of(e.get("topic")), text_of(e.get("subscription")))
            for e in records
            if str(e["kind"]) in ("consumer_joined", "consumer_left")
        }
    )
    for e in records:
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


def draining_rows(
    history: pd.DataFrame, hashes: pd.DataFrame, snapshots: pd.DataFrame
) -> list[dict[str, Any]]:
    """Episodes of draining hashes per holder, from `stuck-hashes`' `history`: one starts at
    the first poll with a hash draining for that consumer (at the window's first poll when it
    was already draining then), and ends at the first poll with none. The newest poll's state
    (`stuck`, `idle`) comes from its `hashes`."""
    times = pd.to_datetime(snapshots["collected_at"], utc=True).sort_values().tolist()
    if history.empty or not times:
        return []
    position = {t: i for i, t in enumerate(times)}
    key = ["topic", "subscription", "consumer_name"]
    stuck = _stuck_counts(hashes, key)
    rows = []
    seen = history.assign(at=pd.to_datetime(history["collected_at"], utc=True))
    for (topic, sub, holder), polls in seen.groupby(key, sort=True):
        counts = polls.groupby("at").size()
        present = sorted(position[t] for t in counts.index if t in position)
        for start, end in _runs(present):
            n = int(counts.loc[times[start]])
            where = {"topic": topic, "subscription": sub, "namespace": namespace_of(topic)}
            already = " (already draining at the window's first poll)" if start == 0 else ""
            rows.append(
                row(
                    times[start],
                    "draining_started",
                    CLIENT,
                    STUCK,
                    subject=holder,
                    detail=f"{n} hash(es) draining for {holder}{already}",
                    **where,
                )
            )
            if end + 1 < len(times):
                rows.append(
                    row(
                        times[end + 1],
                        "draining_ended",
                        CLIENT,
                        STUCK,
                        subject=holder,
                        detail=f"no hash drains for {holder} any more",
                        **where,
                    )
                )
            elif stuck.get((topic, sub, holder)):
                rows[-1]["detail"] += f"; {stuck[(topic, sub, holder)]} stuck now"
    return rows


REPLACED: tuple[tuple[Any, str, Any], ...] = (
    *window.WHOLE_WINDOW,
    (window, "backlog_rows", backlog_rows),
    (window, "reconnect_rows", reconnect_rows),
    (window, "NewestTypes", AllTypes),
    (clients, "client_rows", client_rows),
    (timeline, "with_links", with_links),
    (frames, "draining_rows", draining_rows),
)
"""(object, name, value): the analysis of the whole window (`reference_timeline_window`), with
the builder it had before it was vectorised for each builder kept here."""
