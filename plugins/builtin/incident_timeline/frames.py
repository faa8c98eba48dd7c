"""`incident-timeline`'s rows, one builder per source of events: the results of the plugins it
requires (bundle moves, probe outages, draining hashes), the collector's load-manager counter
events and the store's index (partial polls, polls missing); the rows of clients and
subscriptions are in `clients`. Every builder returns rows of `ROW_COLUMNS` (`row`).
Nothing here reads the store or knows a page's URL.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import TopicNameError, frame_of, parse_topic_name
from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins.builtin.shared.ownership import BY_LOAD_MANAGER
from pulsar_lens.plugins.builtin.shared.positions import looked_up

ROW_COLUMNS = [
    "at",
    "kind",
    "source",
    "namespace",
    "topic",
    "subscription",
    "subject",
    "detail",
    "explained_by",
]

# who made an event (the `source` column)
LOAD_MANAGER = BY_LOAD_MANAGER
NOT_LOAD_MANAGER = "admin or other"  # every counter read, none grew: an admin, a restart, ...
UNATTRIBUTED = "unknown"  # the polls saw it; the load manager's counters could not tell
COLLECTOR = "collector"
PROBE = "probe"
BROKER = "broker"
CLIENT = "client"

# what explains an event: the slug of the plugin whose page shows it ("overview": the Overview)
BUNDLES, STUCK, FAILOVER, KEY_SHARED = (
    "unload-latency",
    "stuck-hashes",
    "failover-assignment",
    "key-shared-map",
)
SUBSCRIPTIONS, OVERVIEW = "subscription-status", "overview"

KIND_ORDER = (
    "poll_missing",
    "poll_partial",
    "probe_outage",
    "load_manager_unloaded",
    "load_manager_split",
    "bundle_unloaded",
    "bundle_moved",
    "bundle_reloaded",
    "bundle_split",
    "bundle_disappeared",
    "bundle_appeared",
    "bundle_removed",
    "bundle_owner_changed",
    "bundle_added",
    "bundle_acquired",
    "bundle_reacquired",
    "consumer_left",
    "consumer_reconnected",
    "consumer_joined",
    "active_consumer_changed",
    "hash_ranges_changed",
    "draining_started",
    "draining_ended",
    "backlog_over",
    "backlog_under",
)
"""Every kind the timeline lists; events at the same instant are listed in this order (a
cause before what follows from it: the outage, the move, the clients reconnecting)."""

GAP_INTERVALS = 2.5
"""Polls further apart than this many times the usual interval have polls missing between
them (the admin API unreachable, the collector stopped or the store refused writes)."""
MAX_TEXT = 200


def text_of(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    return str(value)


def row(at: Any, kind: str, source: str, explained_by: str, **fields: Any) -> dict[str, Any]:
    return {
        "at": at,
        "kind": kind,
        "source": source,
        "namespace": fields.get("namespace"),
        "topic": fields.get("topic"),
        "subscription": fields.get("subscription"),
        "subject": fields.get("subject"),
        "detail": fields.get("detail", ""),
        "explained_by": explained_by,
    }


def namespace_of(topic: str | None) -> str | None:
    """The namespace of a topic name, or None for a name the broker would refuse."""
    if not topic:
        return None
    try:
        return parse_topic_name(topic).namespace
    except TopicNameError:
        return None


def namespaces_in(topics: Iterable[str]) -> set[str]:
    """Every namespace `namespace_of` finds in `topics`, reading one name of each kind.

    What it says of a name whose last part (after the last "/") is ASCII and does not start
    blank depends only on the text before that "/": every separator, the domain, the tenant
    and namespace and any "://" are there, and such a local name is neither blank nor a lone
    surrogate. So one such name is read per distinct head (20 namespaces of a million topics:
    20 reads); any other name is read itself."""
    found: set[str] = set()
    heads: dict[str, str | None] = {}
    for topic in topics:
        head, _, last = topic.rpartition("/")
        if not (last and last.isascii() and not last[0].isspace()):
            found.add(namespace_of(topic) or "")
            continue
        if head not in heads:
            heads[head] = namespace_of(topic)
            found.add(heads[head] or "")
    found.discard("")
    return found


def _who(by: Any, origin: Any) -> str:
    if text_of(origin) == "collector":
        return COLLECTOR
    by = text_of(by)
    if by == BY_LOAD_MANAGER:
        return LOAD_MANAGER
    return NOT_LOAD_MANAGER if by else UNATTRIBUTED


def bundle_rows(ownership_events: pd.DataFrame) -> list[dict[str, Any]]:
    """`bundle-ownership`'s events (moves, unloads, splits, ...), with who made them."""
    rows = []
    for e in ownership_events.to_dict("records"):
        kind = str(e["kind"])
        before, after = text_of(e.get("before")), text_of(e.get("after"))
        detail = text_of(e.get("detail")) or f"{before or '-'} -> {after or '-'}"
        rows.append(
            row(
                e["at"],
                kind if kind.startswith("bundle_") else f"bundle_{kind}",
                _who(e.get("by"), e.get("source")),
                BUNDLES,
                namespace=text_of(e.get("namespace")),
                subject=text_of(e.get("bundle")),
                detail=detail,
            )
        )
    return rows


def outage_rows(outages: pd.DataFrame) -> list[dict[str, Any]]:
    """`unload-latency`'s probe outages, at the last good acknowledgement before each."""
    rows = []
    for o in outages.to_dict("records"):
        detail = (
            f"{float(o['outage_ms']):,.0f} ms without an acknowledged publish; "
            f"{int(o['delayed'])} message(s) delayed, {int(o['lost'])} lost"
        )
        rows.append(
            row(
                o["cut_at"],
                "probe_outage",
                PROBE,
                BUNDLES,
                namespace=text_of(o.get("namespace")),
                topic=text_of(o.get("topic")),
                subject=text_of(o.get("bundle")),
                detail=detail,
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
    # one count per holder and poll, holders in name order and polls in time order
    counts = seen.groupby([*key, "at"], sort=True).size()
    for (topic, sub, holder), polls in itertools.groupby(
        zip(counts.index, counts.tolist(), strict=True), lambda entry: entry[0][:3]
    ):
        by_time = {index[3]: n for index, n in polls}
        present = sorted(position[t] for t in by_time if t in position)
        namespace = namespace_of(topic)
        for start, end in _runs(present):
            n = int(by_time[times[start]])
            where = {"topic": topic, "subscription": sub, "namespace": namespace}
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


def _stuck_counts(hashes: pd.DataFrame, key: list[str]) -> Mapping[tuple[Any, ...], int]:
    if hashes.empty or "state" not in hashes:
        return {}
    mine = hashes[hashes["state"] == "stuck"]
    return {tuple(k): int(n) for k, n in mine.groupby(key).size().items()}


def _runs(positions: list[int]) -> Iterator[tuple[int, int]]:
    """(first, last) of each run of consecutive positions."""
    start = previous = None
    for p in positions:
        if start is None:
            start = previous = p
        elif p != previous + 1:  # type: ignore[operator]
            yield start, previous  # type: ignore[misc]
            start = previous = p
        else:
            previous = p
    if start is not None:
        yield start, previous  # type: ignore[misc]


def load_manager_rows(events: pd.DataFrame) -> list[dict[str, Any]]:
    """The collector's load-manager counter events: a broker's shedder counted unloads or
    splits between two polls."""
    rows = []
    for e in events.to_dict("records"):
        before, after = text_of(e.get("before")), text_of(e.get("after"))
        what = "unload" if e["kind"] == "load_manager_unloaded" else "split"
        detail = f"the load manager on {e['subject']} counted {what}s: {before} -> {after}"
        rows.append(
            row(
                e["at"],
                str(e["kind"]),
                LOAD_MANAGER,
                BUNDLES,
                subject=text_of(e["subject"]),
                detail=detail,
            )
        )
    return rows


def poll_rows(snapshots: pd.DataFrame) -> list[dict[str, Any]]:
    """Polls stored partial (which calls failed), and polls missing: two stored polls further
    apart than GAP_INTERVALS times the median interval."""
    if snapshots.empty:
        return []
    times = pd.to_datetime(snapshots["collected_at"], utc=True)
    rows = []
    errors = snapshots["errors_json"] if "errors_json" in snapshots else [None] * len(snapshots)
    partial = snapshots["partial"] if "partial" in snapshots else [False] * len(snapshots)
    for at, is_partial, errors_json in zip(times, partial, errors, strict=True):
        if bool(is_partial):
            rows.append(row(at, "poll_partial", COLLECTOR, OVERVIEW, detail=_failed(errors_json)))
    gaps = times.diff().dt.total_seconds()
    usual = gaps.median()
    if len(times) >= 3 and usual > 0:
        for at, gap in zip(times, gaps, strict=True):
            if gap > GAP_INTERVALS * usual:
                detail = (
                    f"no poll stored for {gap:,.0f} s (usually {usual:,.0f} s): the admin API "
                    "unreachable, the collector stopped, or the store refused writes"
                )
                rows.append(row(at, "poll_missing", COLLECTOR, OVERVIEW, detail=detail))
    return rows


def _failed(errors_json: Any) -> str:
    try:
        errors = json.loads(errors_json) if isinstance(errors_json, str) else []
    except ValueError:
        errors = []
    endpoints = sorted({str(e.get("endpoint", "?")) for e in errors if isinstance(e, dict)})
    if not endpoints:
        return "partial poll"
    shown = ", ".join(endpoints[:5]) + (
        f" and {len(endpoints) - 5} more" if len(endpoints) > 5 else ""
    )
    return clean(f"{len(errors)} call(s) failed: {shown}", limit=MAX_TEXT)


TEXT_COLUMNS = [c for c in ROW_COLUMNS if c != "at"]


def to_frame(*parts: list[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Rows in time order, ties in KIND_ORDER (then in the order given), with `at` as UTC
    microseconds. Each part is rows (`row`) or a frame of `ROW_COLUMNS` (and of other columns,
    kept after them: missing in the rows of parts without them); the text columns come out as
    one frame of all the rows would have them (text, or all missing)."""
    extra = [
        c
        for c in dict.fromkeys(c for p in parts if isinstance(p, pd.DataFrame) for c in p.columns)
        if c not in ROW_COLUMNS
    ]
    frames = [
        p.reindex(columns=[*ROW_COLUMNS, *extra])
        if isinstance(p, pd.DataFrame)
        else frame_of(p, ROW_COLUMNS)
        for p in parts
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        return frame_of([], ROW_COLUMNS)
    frame = pd.concat(frames, ignore_index=True)
    for column in TEXT_COLUMNS:
        values = frame[column]
        frame[column] = (
            values.astype("str")
            if values.notna().any()
            else pd.Series([None] * len(values), dtype=object)
        )
    frame["at"] = pd.to_datetime(frame["at"], utc=True).astype("datetime64[us, UTC]")
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    order = frame.assign(_rank=looked_up(frame["kind"], rank, len(rank), np.int64))
    order = order.sort_values(["at", "_rank"], kind="stable")
    return order.drop(columns="_rank").reset_index(drop=True)
