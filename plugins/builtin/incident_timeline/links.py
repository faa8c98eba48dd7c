"""Where each timeline row is explained: the page (its URL path), the poll (`snapshot_id`, the
first stored poll at or after the event) and the link that opens that page as of that poll.

A link is relative (`bundles?at=...`), so it opens the sibling page of the dashboard wherever
it is served, with the page's controls set to the event's namespace, topic or subscription.
Every value from the cluster in it is percent-encoded: a name is data, never a part of the
URL's syntax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.plugins.builtin.shared.failover import group_label
from pulsar_lens.plugins.builtin.shared.labels import subscription_label
from pulsar_lens.plugins.builtin.shared.positions import looked_up

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


@dataclass(frozen=True)
class Kept:
    """The polls and links the steps made, of rows that name their place here (`KEPT`): set
    apart from the rows while they are put in order and filtered, so those copies do not
    carry two long texts a row (`kept_apart`)."""

    snapshot_ids: pa.Array
    links: pa.Array


KEPT = "_kept"
"""A row's place in `Kept`, or -1 (or missing) where `with_links` makes its poll and link."""


def kept_apart(rows: pd.DataFrame, todo: np.ndarray) -> tuple[pd.DataFrame, Kept]:
    """Step rows (`step_links`) without their `snapshot_id` and `link`, which go to a `Kept`
    that each row names its place in; rows `todo` name none (their link is made anew)."""
    place = np.arange(len(rows), dtype=np.int64)
    place[todo] = -1
    if not set(LINKED) <= set(rows.columns):  # no step (an empty window)
        empty = pa.array([], pa.string())
        return rows.assign(**{KEPT: np.full(len(rows), -1, dtype=np.int64)}), Kept(empty, empty)
    kept = Kept(
        pa.array(rows["snapshot_id"], pa.string(), from_pandas=True),
        pa.array(rows["link"], pa.string(), from_pandas=True),
    )
    return rows.drop(columns=list(LINKED)).assign(**{KEPT: place}), kept


def with_links(
    rows: pd.DataFrame, snapshots: pd.DataFrame, kept: Kept | None = None
) -> pd.DataFrame:
    """`rows` with `page`, `snapshot_id` (the poll after each) and `link`, without the
    `explained_by` slug. Rows that name a place in `kept` take their poll and link from it
    (a step made them); the others' are made here."""
    times, ids, clusters = _polls(snapshots)
    out = rows.drop(columns=[c for c in ("explained_by", KEPT) if c in rows])
    out["page"] = pd.Series(looked_up(rows["explained_by"], PAGES, np.nan), rows.index, object)
    place = (
        rows[KEPT].fillna(-1).to_numpy(dtype=np.int64)
        if kept is not None and KEPT in rows
        else np.full(len(rows), -1, dtype=np.int64)
    )
    todo = place < 0
    sid = np.empty(len(rows), dtype=object)
    made: list[str] = []
    if todo.any():
        mine = out if todo.all() else out[todo]  # no copy of every row when none is kept
        sid[todo] = poll_after(times, ids, mine["at"]).to_numpy(dtype=object)
        made = links(mine["page"], pd.Series(sid[todo]), clusters, mine[list(LINK_FIELDS)])
    if kept is None or todo.all():
        out["snapshot_id"] = pd.Series(sid, index=out.index, dtype=object)
        out["link"] = made
        return out
    sid[~todo] = _objects(kept.snapshot_ids)[place[~todo]]
    out["snapshot_id"] = pd.Series(sid, index=out.index, dtype=object)
    # the kept links stay Arrow text, taken once with the new ones after them: none becomes
    # a Python object on the way (hundreds of thousands of rows at a full window)
    order = place.copy()
    order[todo] = len(kept.links) + np.arange(len(made), dtype=np.int64)
    every = pa.chunked_array([*_chunks(kept.links), pa.array(made, pa.string())], pa.string())
    out["link"] = every.take(pa.array(order)).to_pandas().array
    return out


def _objects(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`values` as an object array, each distinct value one Python object: a window's rows
    name the same few polls (sixty) hundreds of thousands of times."""
    distinct = pc.unique(values)
    codes = pc.index_in(values, value_set=distinct).fill_null(len(distinct))
    objects = np.array([*distinct.to_pylist(), None], dtype=object)
    found: np.ndarray = objects[np.asarray(codes.to_numpy(), dtype=np.int64)]
    return found


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]


LINKED = ("snapshot_id", "link")
"""The columns `step_links` adds to a step's rows."""


def step_links(rows: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """`rows` of one step (`snapshots`: the poll before and the poll, or the window's first
    poll alone) with the `snapshot_id` and `link` `with_links` gives them in any window that
    holds the step's polls: for rows after the poll before, up to the poll (any row up to a
    window's first poll), that poll. Other rows' are left missing, for `with_links` to make
    in the window. The `explained_by` of a row must be final (a page chosen by the window's
    newest poll is not: the analysis sets such a row's `link` missing again)."""
    out = rows.copy()
    out["snapshot_id"] = pd.Series([None] * len(rows), index=rows.index, dtype=object)
    out["link"] = pd.Series([None] * len(rows), index=rows.index, dtype=object)
    if rows.empty or snapshots.empty:
        return out
    times, ids, clusters = _polls(snapshots)
    at = pd.to_datetime(rows["at"], utc=True)
    mine = (at <= times.iloc[-1]).to_numpy(dtype=bool)
    if len(times) > 1:
        mine = mine & (at > times.iloc[-2]).to_numpy(dtype=bool)
    if mine.any():
        newest = ids.iloc[-1]
        chosen = rows[mine]
        pages = pd.Series(looked_up(chosen["explained_by"], PAGES, np.nan), chosen.index, object)
        sid = pd.Series([newest] * len(chosen), index=chosen.index, dtype=object)
        out.loc[mine, "snapshot_id"] = newest
        out.loc[mine, "link"] = links(pages, sid, clusters, chosen[list(LINK_FIELDS)])
    return out


def _polls(snapshots: pd.DataFrame) -> tuple[pd.Series, pd.Series, dict[Any, Any]]:
    """The polls' times, ids and each id's cluster."""
    times = pd.to_datetime(snapshots["collected_at"], utc=True).astype("datetime64[us, UTC]")
    ids = snapshots["snapshot_id"].astype(str)
    clusters = dict(zip(ids, snapshots.get("cluster", pd.Series([None] * len(ids))), strict=True))
    return times, ids, clusters


def links(
    pages: pd.Series, snapshot_ids: pd.Series, clusters: Mapping[Any, Any], fields: pd.DataFrame
) -> list[str]:
    """Each row's link: `<page>?at=<snapshot>&cluster=<its cluster>&<its controls>`
    (`_controls`), every value percent-encoded.

    By column: each query parameter is a column of `&name=value` texts (empty where the row
    has none), each distinct value encoded once, and a row's query is its parameters in that
    order; a window's rows name the same polls, clusters and topics over and over (hundreds of
    thousands of rows at 100,000 topics)."""
    count = len(pages)
    page = pages.to_numpy(dtype=object)
    sid = snapshot_ids.to_numpy(dtype=object)
    text = {
        n: np.array(
            [v if isinstance(v, str) and v else None for v in fields[n].to_numpy(dtype=object)],
            dtype=object,
        )
        for n in LINK_FIELDS
    }
    topic, sub = text["topic"], text["subscription"]
    cluster = np.array([clusters.get(s) for s in sid.tolist()], dtype=object)
    bundles = page == PAGES["unload-latency"]
    labelled = (page == PAGES["key-shared-map"]) | (page == PAGES["failover-assignment"])
    has = {n: _present(values) for n, values in text.items()}
    named = has["topic"] & has["subscription"]
    labels = np.full(count, None, dtype=object)
    if (chosen := labelled & named).any():
        found: dict[tuple[str, str, str], str] = {}
        for i in np.flatnonzero(chosen).tolist():
            key = (page[i], topic[i], sub[i])
            if key not in found:
                fields_of = {"topic": key[1], "subscription": key[2]}
                found[key] = _controls(key[0], fields_of)[0][1]
            labels[i] = found[key]
    plain = ~bundles & ~labelled
    query = _parameter("at", sid, _present(sid), str)
    query += _parameter("cluster", cluster, cluster.astype(bool), str)
    query += _parameter("namespace", text["namespace"], bundles & has["namespace"])
    query += _parameter("subscription", labels, labelled & named)
    query += _parameter("topic", topic, plain & has["topic"])
    query += _parameter("subscription", sub, plain & has["subscription"])
    paths: dict[Any, str] = {}
    made = []
    for name, tail in zip(page.tolist(), query.tolist(), strict=True):
        path = paths.get(name)
        if path is None:
            path = paths[name] = quote(name, safe="-_.~")
        made.append(f"{path}?{tail[1:]}" if tail else path)
    return made


def _present(values: np.ndarray) -> np.ndarray:
    """Per row: the value is not None."""
    return np.fromiter((v is not None for v in values.tolist()), bool, len(values))


def _parameter(name: str, values: np.ndarray, where: np.ndarray, as_text: Any = None) -> np.ndarray:
    """`&name=<value percent-encoded>` on the rows `where` says, empty on the others; each
    distinct value encoded once (`as_text` turns a value into text first)."""
    made = np.full(len(values), "", dtype=object)
    rows = np.flatnonzero(where)
    if len(rows):
        encoded: dict[Any, str] = {}
        for i in rows.tolist():
            value = values[i]
            found = encoded.get(value)
            if found is None:
                text = value if as_text is None else as_text(value)
                found = encoded[value] = f"&{name}={quote(text, safe='')}"
            made[i] = found
    return made
