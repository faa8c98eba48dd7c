"""Where each timeline row is explained: the page (its URL path), the poll (`snapshot_id`, the
first stored poll at or after the event) and the link that opens that page as of that poll.

A link is relative (`bundles?at=...`), so it opens the sibling page of the dashboard wherever
it is served, with the page's controls set to the event's namespace, topic or subscription.
Every value from the cluster in it is percent-encoded: a name is data, never a part of the
URL's syntax.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import numpy as np
import pandas as pd

from pulsar_lens.plugins.builtin.shared.failover import group_label
from pulsar_lens.plugins.builtin.shared.labels import subscription_label

PAGES: Mapping[str, str] = {
    "unload-latency": "bundles",
    "stuck-hashes": "stuck-hashes",
    "failover-assignment": "failover",
    "key-shared-map": "key-shared",
    "subscription-status": "subscriptions",
    "overview": "overview",
}
"""The URL path of each explaining page, by the slug of its plugin (`overview`: the dashboard's
Overview). They are the `Page.url_path` those plugins declare, which the dashboard serves them
at (`dashboard.navigation.page_plan`; a test holds the two together): a built-in reads no other
plugin's declarations, only its results."""

LINK_FIELDS = ("namespace", "topic", "subscription")
"""Row fields a link may pass on to the page it opens."""


def _controls(page: str, fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The query parameters that set the opened page's controls (`dashboard.urlstate`) to the
    row's namespace, topic or subscription, each in the form that page's control takes: the
    Bundles & unloads page's `namespace`, the Key_Shared page's `topic | subscription`, the
    Failover page's group; others get the row's `topic` and `subscription` as they are."""
    text = {n: v for n in LINK_FIELDS if isinstance(v := fields.get(n), str) and v}
    topic, sub = text.get("topic"), text.get("subscription")
    if page == PAGES["unload-latency"]:
        return [("namespace", text["namespace"])] if "namespace" in text else []
    if page == PAGES["key-shared-map"]:
        return [("subscription", subscription_label(topic, sub))] if topic and sub else []
    if page == PAGES["failover-assignment"]:
        return [("subscription", group_label(sub, [(topic, sub)]))] if topic and sub else []
    return [(n, text[n]) for n in ("topic", "subscription") if n in text]


def poll_after(times: pd.Series, ids: pd.Series, at: pd.Series) -> pd.Series:
    """For each instant of `at`, the id of the first poll collected at or after it (the
    newest poll for an instant after every poll; None without polls)."""
    if times.empty:
        return pd.Series([None] * len(at), index=at.index, dtype=object)
    order = np.argsort(times.to_numpy(), kind="stable")
    sorted_times = times.to_numpy()[order]
    sorted_ids = ids.to_numpy()[order]
    where = np.searchsorted(sorted_times, at.to_numpy(), side="left")
    where = np.minimum(where, len(sorted_times) - 1)
    return pd.Series(sorted_ids[where], index=at.index, dtype=object)


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


def with_links(rows: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """`rows` with `page`, `snapshot_id` (the poll after each) and `link`, without the
    `explained_by` slug."""
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
