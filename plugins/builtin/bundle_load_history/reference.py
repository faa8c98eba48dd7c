"""`bundle-load-history`'s rule on pandas, and the part both engines share.

Load of a bundle in one poll: `msg_rate` = its topics' msg rate in + out (the `bundles` row),
or `throughput` = the sum of its topics' bytes/s in + out (`topics` rows of that bundle).
From every stored poll:

* `timeline`: each bundle's topics, rates, throughput and owner, averaged per time bucket
  (the window's span / BUCKETS, at least one second); the owner is the one of the bucket's
  last poll. Only the `top` hottest bundles.
* `hot`: per bundle, polls seen, mean and peak load, and its share of its owner's load in the
  newest poll; hottest (mean load) first.
* `moves`: the owner changes the load manager made (`bundle_owner_changed` events).
* `brokers`: per broker in the newest poll, bundles owned and load.
* `candidates` (newest poll): the moves a balancer could make, ranked as Cruise Control ranks
  Kafka proposals, by how much each lowers the goal violation. The goal here is an even load:
  its violation is `max broker load / mean broker load` over the brokers owning bundles. Two
  actions per bundle: **unload** it to the least-loaded other broker, and **split** it in two
  (`range_equally_divide`: the halves `[lower, mid)` and `[mid, upper)`, each topic in the half
  its bundle hash falls in) and unload the half that balances best. An action is proposed only
  when it lowers the violation; `improvement` is by how much.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from plugins.api import Result, empty_frame, frame_of, topic_bundle_hash

BUCKETS = 300
TIMELINE_COLUMNS = [
    "bucket",
    "namespace",
    "bundle",
    "owner_broker",
    "polls",
    "topics",
    "msg_rate",
    "throughput",
]
HOT_COLUMNS = [
    "namespace",
    "bundle",
    "polls",
    "mean_load",
    "peak_load",
    "owner_broker",
    "owner_share",
]
MOVE_COLUMNS = ["at", "namespace", "bundle", "before", "after"]
BROKER_COLUMNS = ["broker", "bundles", "load"]
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
LOADS = {"msg_rate": "msg_rate", "throughput": "throughput"}


def bucket_seconds(first: pd.Timestamp | None, last: pd.Timestamp | None) -> int:
    """The timeline's bucket: the window's span over BUCKETS, at least one second."""
    if first is None or last is None:
        return 1
    span = (last - first).total_seconds()
    return max(1, int(np.ceil(span / BUCKETS)))


def bundle_loads(bundles: pd.DataFrame, topics: pd.DataFrame) -> pd.DataFrame:
    """One row per (poll, bundle): owner, topics, msg_rate and throughput."""
    out = bundles[
        ["snapshot_id", "collected_at", "namespace", "bundle", "owner_broker", "topic_count"]
    ].copy()
    out["msg_rate"] = bundles["msg_rate_in"].fillna(0.0) + bundles["msg_rate_out"].fillna(0.0)
    bytes_ = topics.assign(
        throughput=topics["msg_throughput_in"].fillna(0.0)
        + topics["msg_throughput_out"].fillna(0.0)
    )
    summed = bytes_.groupby(["snapshot_id", "namespace", "bundle"], as_index=False)["throughput"]
    out = out.merge(summed.sum(), on=["snapshot_id", "namespace", "bundle"], how="left")
    out["throughput"] = out["throughput"].fillna(0.0)
    return out.rename(columns={"topic_count": "topics"})


def history_frames(
    loads: pd.DataFrame, events: pd.DataFrame, *, metric: str, top: int
) -> dict[str, pd.DataFrame]:
    """`hot`, `timeline` and `moves` from every poll's bundle loads (pandas)."""
    if loads.empty:
        hot = empty_frame(HOT_COLUMNS)
        timeline = empty_frame(TIMELINE_COLUMNS)
    else:
        load = loads[LOADS[metric]]
        stats = loads.assign(load=load).groupby(["namespace", "bundle"], as_index=False)
        hot = stats.agg(
            polls=("load", "size"), mean_load=("load", "mean"), peak_load=("load", "max")
        )
        newest = loads[loads["collected_at"] == loads["collected_at"].max()].assign(load=load)
        hot = hot.merge(
            newest[["namespace", "bundle", "owner_broker", "load"]],
            on=["namespace", "bundle"],
            how="left",
        )
        owner_total = newest.groupby("owner_broker")["load"].sum()
        total = hot["owner_broker"].map(owner_total)
        hot["owner_share"] = hot["load"] / total.where(total > 0)  # none of nothing: null
        hot = _order_hot(hot.drop(columns="load"))
        width = bucket_seconds(loads["collected_at"].min(), loads["collected_at"].max())
        chosen = hot.head(top)[["namespace", "bundle"]]
        mine = loads.merge(chosen, on=["namespace", "bundle"])
        since_epoch = pd.to_datetime(mine["collected_at"], utc=True) - pd.Timestamp(0, tz="UTC")
        seconds = np.floor(since_epoch.dt.total_seconds()).astype("int64")
        mine = mine.assign(bucket=pd.to_datetime((seconds // width) * width, unit="s", utc=True))
        mine = mine.sort_values("collected_at")
        timeline = mine.groupby(["bucket", "namespace", "bundle"], as_index=False).agg(
            owner_broker=("owner_broker", "last"),
            polls=("snapshot_id", "size"),
            topics=("topics", "mean"),
            msg_rate=("msg_rate", "mean"),
            throughput=("throughput", "mean"),
        )
        timeline = timeline.sort_values(["bucket", "namespace", "bundle"]).reset_index(drop=True)
    return {"hot": hot, "timeline": timeline[TIMELINE_COLUMNS], "moves": moves_frame(events)}


def _order_hot(hot: pd.DataFrame) -> pd.DataFrame:
    ordered = hot.sort_values(["mean_load", "namespace", "bundle"], ascending=[False, True, True])
    return ordered.reset_index(drop=True)[HOT_COLUMNS]


def moves_frame(events: pd.DataFrame) -> pd.DataFrame:
    moved = events[events["kind"] == "bundle_owner_changed"]
    if moved.empty:
        return empty_frame(MOVE_COLUMNS)
    out = pd.DataFrame(
        {
            "at": moved["at"],
            "namespace": moved["subject"].str.rsplit("/", n=1).str[0],
            "bundle": moved["subject"].str.rsplit("/", n=1).str[-1],
            "before": moved["before"],
            "after": moved["after"],
        }
    )
    return out.sort_values(["at", "namespace", "bundle"]).reset_index(drop=True)


def finish(
    history: Mapping[str, pd.DataFrame],
    newest_bundles: pd.DataFrame,
    newest_topics: pd.DataFrame,
    *,
    metric: str,
) -> Result:
    """The result: the history frames, and the brokers and candidates of the newest poll."""
    loads = bundle_loads(newest_bundles, newest_topics) if len(newest_bundles) else None
    brokers = _brokers(loads, metric)
    candidates = _candidates(loads, newest_topics, brokers, metric)
    hot = history["hot"]
    summary: dict[str, Any] = {
        "bundles": len(hot),
        "brokers": len(brokers),
        "moves": len(history["moves"]),
        "hottest": f"{hot['namespace'].iloc[0]}/{hot['bundle'].iloc[0]}" if len(hot) else None,
        "violation": float(candidates["violation_before"].iloc[0]) if len(candidates) else None,
        "metric": metric,
    }
    frames = {**history, "brokers": brokers, "candidates": candidates}
    frames["timeline"] = _utc(frames["timeline"], "bucket")
    frames["moves"] = _utc(frames["moves"], "at")
    return Result(frames=frames, summary=summary)


def _utc(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """`column` as UTC timestamps (Spark hands back naive times in its UTC session zone)."""
    if frame.empty:
        return frame
    return frame.assign(**{column: pd.to_datetime(frame[column], utc=True)})


def _brokers(loads: pd.DataFrame | None, metric: str) -> pd.DataFrame:
    if loads is None or loads["owner_broker"].isna().all():
        return empty_frame(BROKER_COLUMNS)
    owned = loads.dropna(subset=["owner_broker"])
    out = owned.groupby("owner_broker", as_index=False).agg(
        bundles=("bundle", "size"), load=(LOADS[metric], "sum")
    )
    out = out.rename(columns={"owner_broker": "broker"}).sort_values("broker")
    return out.reset_index(drop=True)[BROKER_COLUMNS]


def violation(loads: Mapping[str, float]) -> float:
    """max / mean broker load (1.0 = perfectly even; 1.0 when nothing is loaded)."""
    values = np.array(list(loads.values()), dtype=float)
    mean = values.mean() if len(values) else 0.0
    return float(values.max() / mean) if mean > 0 else 1.0


def _candidates(
    loads: pd.DataFrame | None, topics: pd.DataFrame, brokers: pd.DataFrame, metric: str
) -> pd.DataFrame:
    if loads is None or len(brokers) < 2:
        return empty_frame(CANDIDATE_COLUMNS)
    current = dict(zip(brokers["broker"], brokers["load"].astype(float), strict=True))
    before = violation(current)
    rows: list[dict[str, Any]] = []
    owned = loads.dropna(subset=["owner_broker"]).sort_values(["namespace", "bundle"])
    for bundle in owned.itertuples(index=False):
        source, load = str(bundle.owner_broker), float(getattr(bundle, LOADS[metric]))
        target = min((b for b in current if b != source), key=lambda b: (current[b], b))
        rows.append(
            _move("unload", bundle, source, target, load, current, before, "the whole bundle")
        )
        halves = _halves(bundle, topics, metric)
        if halves is not None:
            lower, upper = halves
            best = min(
                ((lower, "its lower half"), (upper, "its upper half")),
                key=lambda half: violation(_after(current, source, target, half[0])),
            )
            rows.append(_move("split", bundle, source, target, best[0], current, before, best[1]))
    useful = [r for r in rows if r["improvement"] > 1e-12]
    useful.sort(key=lambda r: (-r["improvement"], r["namespace"], r["bundle"], r["action"]))
    for rank, row in enumerate(useful, start=1):
        row["rank"] = rank
    return frame_of(useful, CANDIDATE_COLUMNS)


def _after(loads: Mapping[str, float], source: str, target: str, moved: float) -> dict[str, float]:
    out = dict(loads)
    out[source] -= moved
    out[target] += moved
    return out


def _move(
    action: str,
    bundle: Any,
    source: str,
    target: str,
    moved: float,
    loads: Mapping[str, float],
    before: float,
    what: str,
) -> dict[str, Any]:
    after = violation(_after(loads, source, target, moved))
    verb = "split and move" if action == "split" else "unload"
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
        "reason": f"{verb} {what} ({moved:,.1f}) from {source}, the busiest share, "
        f"to {target}, the least loaded: max/mean {before:.2f} -> {after:.2f}",
    }


def _halves(bundle: Any, topics: pd.DataFrame, metric: str) -> tuple[float, float] | None:
    """The loads of the two halves a `range_equally_divide` split makes, from its topics."""
    mine = topics[(topics["namespace"] == bundle.namespace) & (topics["bundle"] == bundle.bundle)]
    if len(mine) < 2:
        return None
    lower, upper = (int(x, 16) for x in str(bundle.bundle).split("_"))
    mid = lower + (upper - lower) // 2
    if metric == "throughput":
        load = mine["msg_throughput_in"].fillna(0.0) + mine["msg_throughput_out"].fillna(0.0)
    else:
        load = mine["msg_rate_in"].fillna(0.0) + mine["msg_rate_out"].fillna(0.0)
    low = np.array([topic_bundle_hash(t) < mid for t in mine["topic"]])
    return float(load[low].sum()), float(load[~low].sum())


def newest_of(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[frame["collected_at"] == frame["collected_at"].max()].reset_index(drop=True)


def pandas_result(store_root: Any, *, metric: str = "msg_rate", top: int = 10) -> Result:
    """The whole analysis over every stored poll, on pandas only (no Spark)."""
    from core.store import Store

    store = Store(store_root)
    bundles = store.read("bundles").to_pandas()
    topics = store.read("topics").to_pandas()
    events = store.read("events").to_pandas()
    loads = bundle_loads(bundles, topics)
    history = history_frames(loads, events, metric=metric, top=top)
    return finish(history, newest_of(bundles), newest_of(topics), metric=metric)
