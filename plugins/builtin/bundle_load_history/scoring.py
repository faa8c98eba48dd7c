"""What both engines of `bundle-load-history` share: from the small frames each one computes
(`Parts`), the result: the hot bundles with their owner's share, the brokers, and the unload
and split candidates ranked by how much they even the brokers out (the package docstring has
the scoring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Result, empty_frame, frame_of

METRICS = ("msg_rate", "throughput")
TIMELINE_COLUMNS = [
    "bucket",
    "namespace",
    "bundle",
    "owner_broker",
    "polls",
    "topics",
    "msg_rate_in",
    "msg_rate_out",
    "msg_rate",
    "throughput_in",
    "throughput_out",
    "throughput",
]
HOT_STATS = ["namespace", "bundle", "polls", "mean_load", "p95_load", "peak_load"]
HOT_COLUMNS = [*HOT_STATS, "owner_broker", "newest_load", "owner_share"]
MOVE_COLUMNS = ["at", "namespace", "bundle", "before", "after", "source"]
NEWEST_COLUMNS = [
    "namespace",
    "bundle",
    "lower",
    "upper",
    "owner_broker",
    "load",
    "split_topics",
    "lower_load",
    "upper_load",
]
OWNED_COLUMNS = ["broker", "window_load"]
BROKER_COLUMNS = ["broker", "bundles", "load", "share", "mean_load"]
CANDIDATE_COLUMNS = [
    "rank",
    "action",
    "namespace",
    "bundle",
    "from_broker",
    "to_broker",
    "moved_load",
    "violation_before",
    "violation_after",
    "improvement",
    "reason",
]
# improvements closer than this are ties (the engines sum floats in different orders)
DIGITS = 9


@dataclass(frozen=True)
class Parts:
    """What an engine computes over the window, before the shared finish.

    `hot`: HOT_STATS, hottest first (`order_hot`); `timeline`: TIMELINE_COLUMNS; `moves`:
    MOVE_COLUMNS; `newest`: NEWEST_COLUMNS, one row per bundle of the newest poll; `owned`:
    OWNED_COLUMNS, each broker's load summed over every poll of the window; `live`: the
    brokers the newest poll listed; `polls`: the window's polls.
    """

    hot: pd.DataFrame
    timeline: pd.DataFrame
    moves: pd.DataFrame
    newest: pd.DataFrame
    owned: pd.DataFrame
    live: Sequence[str]
    polls: int


def order_hot(stats: pd.DataFrame) -> pd.DataFrame:
    """Per-bundle statistics, hottest (highest mean load) first, then by name."""
    ordered = stats.sort_values(["mean_load", "namespace", "bundle"], ascending=[False, True, True])
    return ordered.reset_index(drop=True)[HOT_STATS]


def finish(parts: Parts, *, metric: str) -> Result:
    """The result of both engines from their parts."""
    newest = parts.newest
    brokers = compute_brokers(newest, parts.owned, parts.live, parts.polls)
    candidates = compute_candidates(newest, brokers)
    hot = with_owner_share(parts.hot, newest)
    before = violation(dict(zip(brokers["broker"], brokers["load"], strict=True)))
    sustained = violation(dict(zip(brokers["broker"], brokers["mean_load"], strict=True)))
    summary: dict[str, Any] = {
        "bundles": len(hot),
        "brokers": len(brokers),
        "moves": len(parts.moves),
        "hottest": f"{hot['namespace'].iloc[0]}/{hot['bundle'].iloc[0]}" if len(hot) else None,
        "violation": before if len(brokers) else None,
        "mean_violation": sustained if len(brokers) else None,
        "candidates": len(candidates),
        "metric": metric,
    }
    frames = {
        "hot": hot,
        "timeline": _utc(parts.timeline[TIMELINE_COLUMNS], "bucket"),
        "moves": _utc(parts.moves[MOVE_COLUMNS], "at"),
        "brokers": brokers,
        "candidates": candidates,
    }
    return Result(frames=frames, summary=summary)


def _utc(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """`column` as UTC timestamps (Spark hands back naive times in its UTC session zone)."""
    if frame.empty:
        return empty_frame(list(frame.columns))
    out = frame.assign(**{column: pd.to_datetime(frame[column], utc=True)})
    return out.reset_index(drop=True)


def with_owner_share(hot: pd.DataFrame, newest: pd.DataFrame) -> pd.DataFrame:
    """The hot bundles with their newest owner, load and share of that owner's load (null for
    a bundle gone from the newest poll or an owner carrying nothing)."""
    if hot.empty:
        return empty_frame(HOT_COLUMNS)
    now = newest[["namespace", "bundle", "owner_broker", "load"]]
    out = hot.merge(now, on=["namespace", "bundle"], how="left", validate="one_to_one")
    owner_total = newest.groupby("owner_broker")["load"].sum()
    total = out["owner_broker"].map(owner_total).astype(float)
    out["owner_share"] = out["load"].astype(float) / total.where(total > 0)
    return out.rename(columns={"load": "newest_load"})[HOT_COLUMNS]


def compute_brokers(
    newest: pd.DataFrame, owned: pd.DataFrame, live: Sequence[str], polls: int
) -> pd.DataFrame:
    """The brokers of the newest poll (listed or owning a bundle): bundles owned and load
    then, share of the cluster's load then, and mean load over the window's polls."""
    owning = newest.dropna(subset=["owner_broker"])
    names = sorted(set(live) | set(owning["owner_broker"]))
    if not names:
        return empty_frame(BROKER_COLUMNS)
    now = owning.groupby("owner_broker").agg(bundles=("bundle", "size"), load=("load", "sum"))
    window = owned.set_index("broker")["window_load"]
    out = pd.DataFrame({"broker": names})
    out["bundles"] = out["broker"].map(now["bundles"]).fillna(0).astype("int64")
    out["load"] = out["broker"].map(now["load"]).fillna(0.0).astype(float)
    total = out["load"].sum()
    out["share"] = out["load"] / total if total > 0 else np.nan
    out["mean_load"] = out["broker"].map(window).fillna(0.0).astype(float) / max(polls, 1)
    return out[BROKER_COLUMNS]


def violation(loads: Mapping[str, float]) -> float:
    """The goal's violation: max / mean broker load (1.0 when even, or when nothing is loaded)."""
    values = np.array(list(loads.values()), dtype=float)
    mean = values.mean() if len(values) else 0.0
    return float(values.max() / mean) if mean > 0 else 1.0


def compute_candidates(newest: pd.DataFrame, brokers: pd.DataFrame) -> pd.DataFrame:
    """Every unload and split of a newest-poll bundle that lowers the violation, best first."""
    if len(brokers) < 2:
        return empty_frame(CANDIDATE_COLUMNS)
    current = dict(zip(brokers["broker"], brokers["load"].astype(float), strict=True))
    rows: list[dict[str, Any]] = []
    owned = newest.dropna(subset=["owner_broker"]).sort_values(["namespace", "bundle"])
    for bundle in owned.itertuples(index=False):
        rows += _actions(bundle, current)
    useful = [r for r in rows if round(r["improvement"], DIGITS) > 0]
    useful.sort(
        key=lambda r: (-round(r["improvement"], DIGITS), r["namespace"], r["bundle"], r["action"])
    )
    for rank, row in enumerate(useful, start=1):
        row["rank"] = rank
    return frame_of(useful, CANDIDATE_COLUMNS)


def _actions(bundle: Any, loads: Mapping[str, float]) -> list[dict[str, Any]]:
    """Unload the bundle to the least-loaded other broker; split it and unload one half."""
    source = str(bundle.owner_broker)
    target = min((b for b in loads if b != source), key=lambda b: (loads[b], b))
    found = [_score("unload", bundle, source, target, float(bundle.load), loads, "the bundle")]
    # with one half idle, a split and an unload move the same load: the unload says it
    halves_loaded = float(bundle.lower_load) > 0 and float(bundle.upper_load) > 0
    if halves_loaded and int(bundle.upper) - int(bundle.lower) > 1:
        halves = (
            (float(bundle.lower_load), "its lower half"),
            (float(bundle.upper_load), "its upper half"),
        )
        best = min(halves, key=lambda half: violation(_after(loads, source, target, half[0])))
        found.append(_score("split", bundle, source, target, best[0], loads, best[1]))
    return found


def _after(loads: Mapping[str, float], source: str, target: str, moved: float) -> dict[str, float]:
    out = dict(loads)
    out[source] -= moved
    out[target] += moved
    return out


def _score(
    action: str,
    bundle: Any,
    source: str,
    target: str,
    moved: float,
    loads: Mapping[str, float],
    what: str,
) -> dict[str, Any]:
    before = violation(loads)
    after = violation(_after(loads, source, target, moved))
    total = sum(loads.values())
    share = loads[source] / total if total > 0 else 0.0
    if action == "split":
        mid = int(bundle.lower) + (int(bundle.upper) - int(bundle.lower)) // 2
        how = f"split at 0x{mid:08x} (range_equally_divide) and unload {what} ({moved:,.1f})"
    else:
        how = f"unload {what} ({moved:,.1f})"
    return {
        "rank": 0,
        "action": action,
        "namespace": bundle.namespace,
        "bundle": bundle.bundle,
        "from_broker": source,
        "to_broker": target,
        "moved_load": moved,
        "violation_before": before,
        "violation_after": after,
        "improvement": before - after,
        "reason": f"{source} carries {share:.0%} of the load; {how} to {target}, the least "
        f"loaded: busiest/mean {before:.2f} -> {after:.2f}",
    }
