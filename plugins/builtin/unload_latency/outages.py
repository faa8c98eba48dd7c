"""What unloads cost, from probe rows: the unload events with their outages, the timeline and
the blind spot. What an outage is (`probe_outages`) lives in
`pulsar_lens.plugins.builtin.shared.outages`, shared with `unload-history`.

Every function takes and returns pandas frames; nothing here reads the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.core.backoff import LADDER_MS, Backoff
from pulsar_lens.plugins.builtin.shared.ownership import BY_LOAD_MANAGER

MOVE_KINDS = ("moved", "unloaded", "reacquired", "acquired", "reloaded")
EVENT_COLUMNS = [
    "at",
    "since",
    "namespace",
    "bundle",
    "kind",
    "from_broker",
    "to_broker",
    "by",
    "probed",
    "cut_at",
    "outage_ms",
    "worst_publish_ms",
    "delayed",
    "lost",
    "rung",
    "detail",
]
TIMELINE_COLUMNS = ["at", "namespace", "bundle", "p50_ms", "p99_ms", "max_ms", "messages"]


def unload_events(
    ownership_events: pd.DataFrame,
    snapshots: pd.DataFrame,
    probes: pd.DataFrame,
    outages: pd.DataFrame,
    load_manager: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per unload: each ownership change the polls saw (bundle, from, to, the time
    between the two polls), with the probe's outage in that time when the bundle was probed;
    plus each outage that no ownership change explains (kind "outage", owners unknown); plus
    each unload the load manager counted (`load_manager`: bundle-ownership's counts, with
    those no owner change accounts for as `unseen`) that neither explains (kind "counted",
    bundle unknown). `by` says whether the load manager made it (see bundle-ownership)."""
    unseen = _unseen(load_manager)
    moves = _unloads_only(ownership_events[ownership_events["kind"].isin(MOVE_KINDS)])
    times = pd.to_datetime(snapshots["collected_at"], utc=True).sort_values().tolist()
    used: set[int] = set()
    rows = []
    for event in moves.itertuples(index=False):
        at = pd.Timestamp(event.at)
        since = _previous(times, at)
        here = outages[
            (outages["namespace"] == event.namespace)
            & (outages["bundle"] == event.bundle)
            & (outages["cut_at"] >= since)
            & (outages["cut_at"] <= at)
        ]
        used |= set(here.index)
        probed = _probed(probes, event.namespace, event.bundle, since, at)
        rows.append(
            _event_row(at, since, event.namespace, event.bundle, event.kind, event, here, probed)
        )
    for index, outage in outages.iterrows():
        if index in used:
            continue
        here = outages.loc[[index]]
        rows.append(
            _event_row(
                outage["back_at"] if pd.notna(outage["back_at"]) else outage["cut_at"],
                outage["cut_at"],
                outage["namespace"],
                outage["bundle"],
                "outage",
                _Counted(_take_unseen(unseen, outage["cut_at"])),
                here,
                True,
            )
        )
    for window in unseen:
        for _ in range(window["count"]):
            counted = _Counted(
                BY_LOAD_MANAGER,
                detail=f"the load manager on {window['broker']} counted an unload "
                "no poll saw (unloaded and re-acquired between polls, or it failed)",
            )
            rows.append(
                _event_row(
                    window["at"],
                    window["since"],
                    None,
                    None,
                    "counted",
                    counted,
                    outages[:0],
                    False,
                )
            )
    frame = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    for column in ("at", "since", "cut_at"):  # one time type, whichever source a row came from
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[us, UTC]")
    return frame.sort_values("at", ascending=False, kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class _Counted:
    """What an event row without an ownership change says of who made it."""

    by: str | None
    detail: str = ""


def _unseen(load_manager: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The load manager's counted unloads no owner change accounts for, oldest first."""
    if load_manager is None or load_manager.empty or "unseen" not in load_manager:
        return []
    mine = load_manager[load_manager["unseen"] > 0].sort_values("at", kind="stable")
    return [
        {
            "at": pd.Timestamp(row.at),
            "since": pd.Timestamp(row.since),
            "broker": row.broker,
            "count": int(row.unseen),
        }
        for row in mine.itertuples(index=False)
    ]


def _take_unseen(unseen: list[dict[str, Any]], cut_at: Any) -> str | None:
    """An outage no owner change explains, in a window where the load manager counted an
    unload no owner change explains, is that unload."""
    when = pd.Timestamp(cut_at)
    for window in unseen:
        if window["count"] and window["since"] < when <= window["at"]:
            window["count"] -= 1
            return BY_LOAD_MANAGER
    return None


def _unloads_only(moves: pd.DataFrame) -> pd.DataFrame:
    """Leave out a bundle's first assignment: "acquired" counts only after an "unloaded" of
    the same bundle (an owner that went away); before that nobody was cut off."""
    ordered = moves.sort_values("at", kind="stable")
    unloaded: set[tuple[str, str]] = set()
    keep = []
    for event in ordered.to_dict(orient="records"):
        key = (event["namespace"], event["bundle"])
        keep.append(event["kind"] != "acquired" or key in unloaded)
        if event["kind"] == "unloaded":
            unloaded.add(key)
    return ordered[keep]


def _previous(times: list[pd.Timestamp], at: pd.Timestamp) -> pd.Timestamp:
    earlier = [t for t in times if t < at]
    return earlier[-1] if earlier else at


def _probed(probes: pd.DataFrame, namespace: str, bundle: str, since: Any, until: Any) -> bool:
    if probes.empty:
        return False
    mine = probes[(probes["namespace"] == namespace) & (probes["bundle"] == bundle)]
    return bool(((mine["sent_at"] >= since) & (mine["sent_at"] <= until)).any())


def _event_row(
    at: Any,
    since: Any,
    namespace: str | None,
    bundle: str | None,
    kind: str,
    event: Any,
    here: pd.DataFrame,
    probed: bool,
) -> dict[str, Any]:
    outage = float(here["outage_ms"].max()) if len(here) else (0.0 if probed else np.nan)
    return {
        "at": at,
        "since": since,
        "namespace": namespace,
        "bundle": bundle,
        "kind": kind,
        "from_broker": getattr(event, "before", None),
        "to_broker": getattr(event, "after", None),
        "by": _by(event),
        "probed": probed,
        "cut_at": here["cut_at"].min() if len(here) else pd.NaT,
        "outage_ms": outage,
        "worst_publish_ms": float(here["worst_publish_ms"].max()) if len(here) else np.nan,
        "delayed": int(here["delayed"].sum()) if len(here) else 0,
        "lost": int(here["lost"].sum()) if len(here) else 0,
        "rung": rung_of(outage),
        "detail": getattr(event, "detail", "") or "",
    }


def _by(event: Any) -> str | None:
    value = getattr(event, "by", None)
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def rung_of(outage_ms: float) -> int | None:
    """The client's retry (1 = the first, at 100 ms) that an outage this long ended at; 0
    for no outage, None when not measured."""
    if outage_ms is None or not np.isfinite(outage_ms):
        return None
    return Backoff().step_of(float(outage_ms))


def ladder(outages: pd.DataFrame) -> pd.DataFrame:
    """How many outages ended at each rung of the client's backoff ladder."""
    rungs = [rung_of(v) for v in outages["outage_ms"]] if len(outages) else []
    labels = ["no outage", *[f"retry {i + 1} (by {ms:,} ms)" for i, ms in enumerate(LADDER_MS)]]
    counts = [sum(1 for r in rungs if r == i) for i in range(len(labels))]
    beyond = sum(1 for r in rungs if r is not None and r > len(LADDER_MS))
    return pd.DataFrame(
        {
            "rung": [*labels, f"later than {LADDER_MS[-1]:,} ms"],
            "nominal_ms": [0, *LADDER_MS, np.nan],
            "outages": [*counts, beyond],
        }
    )


def timeline(probes: pd.DataFrame) -> pd.DataFrame:
    """Publish latency per bucket and bundle: p50, p99 and max. One-second buckets up to an
    hour of probe rows, coarser beyond, so the chart stays a few thousand points."""
    acked = probes.dropna(subset=["publish_ms"])
    if acked.empty:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    span = (acked["sent_at"].max() - acked["sent_at"].min()).total_seconds()
    bucket = "1s" if span <= 3600 else "10s" if span <= 36_000 else "60s"
    keyed = acked.assign(at=acked["sent_at"].dt.floor(bucket))
    grouped = keyed.groupby(["at", "namespace", "bundle"])["publish_ms"]
    out = grouped.agg(
        p50_ms="median",
        p99_ms=lambda s: float(np.percentile(s, 99)),
        max_ms="max",
        messages="count",
    ).reset_index()
    return out.reindex(columns=TIMELINE_COLUMNS)


def blind_spot(probes: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """For each measured outage: the average publish latency of its whole minute, as a
    1-minute scrape shows it, against the worst publish latency the probe saw."""
    columns = ["at", "namespace", "bundle", "minute_avg_ms", "worst_ms", "hidden"]
    measured = events[events["worst_publish_ms"].notna() & events["cut_at"].notna()]
    rows = []
    acked = probes.dropna(subset=["publish_ms"])
    by_bundle = {
        key: group.sort_values("sent_at", kind="stable")
        for key, group in acked.groupby(["namespace", "bundle"], sort=False)
    }
    for event in measured.itertuples(index=False):
        minute = pd.Timestamp(event.cut_at).floor("60s")
        group = by_bundle.get((event.namespace, event.bundle))
        if group is None:
            continue
        sent = group["sent_at"]
        lo = sent.searchsorted(minute, side="left")
        hi = sent.searchsorted(minute + pd.Timedelta(seconds=60), side="left")
        mine = group["publish_ms"].iloc[lo:hi]
        if mine.empty:
            continue
        average = float(mine.mean())
        worst = float(event.worst_publish_ms)
        rows.append([minute, event.namespace, event.bundle, average, worst, worst / average])
    return pd.DataFrame(rows, columns=columns)
