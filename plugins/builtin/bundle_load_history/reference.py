"""`bundle-load-history`'s rule on pandas: the same parts the Spark plan computes (see the
package docstring), and `pandas_result`, the whole analysis of a store without Spark."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Result, empty_frame, topic_bundles
from pulsar_lens.plugins.builtin.bundle_load_history.scoring import (
    HOT_STATS,
    MOVE_COLUMNS,
    NEWEST_COLUMNS,
    OWNED_COLUMNS,
    TIMELINE_COLUMNS,
    Parts,
    finish,
    order_hot,
)

BUCKETS = 300
HASH_SPACE = (0x00000000, 0xFFFFFFFF)
KEY = ["namespace", "bundle"]
# a topic's own load under each metric: (in, out) columns of the `topics` table
TOPIC_LOAD = {
    "msg_rate": ("msg_rate_in", "msg_rate_out"),
    "throughput": ("msg_throughput_in", "msg_throughput_out"),
}


def bucket_seconds(first: Any, last: Any) -> int:
    """The timeline's bucket: the window's span over BUCKETS, at least one second."""
    if first is None or last is None or pd.isna(first) or pd.isna(last):
        return 1
    span = (pd.Timestamp(last) - pd.Timestamp(first)).total_seconds()
    return max(1, int(np.ceil(span / BUCKETS)))


def bundle_loads(bundles: pd.DataFrame, topics: pd.DataFrame, *, metric: str) -> pd.DataFrame:
    """One row per (poll, bundle): range, owner, topics, rates, its topics' summed throughput,
    and `load`, the chosen metric (in + out)."""
    out = bundles[["snapshot_id", "collected_at", *KEY, "lower", "upper", "owner_broker"]].copy()
    out["topics"] = bundles["topic_count"]
    out["msg_rate_in"] = bundles["msg_rate_in"].fillna(0.0)
    out["msg_rate_out"] = bundles["msg_rate_out"].fillna(0.0)
    summed = topics.assign(
        throughput_in=topics["msg_throughput_in"].fillna(0.0),
        throughput_out=topics["msg_throughput_out"].fillna(0.0),
    ).groupby(["snapshot_id", *KEY], as_index=False)[["throughput_in", "throughput_out"]]
    out = out.merge(summed.sum(), on=["snapshot_id", *KEY], how="left")
    out[["throughput_in", "throughput_out"]] = out[["throughput_in", "throughput_out"]].fillna(0.0)
    out["msg_rate"] = out["msg_rate_in"] + out["msg_rate_out"]
    out["throughput"] = out["throughput_in"] + out["throughput_out"]
    out["load"] = out[metric]
    return out


def compute_hot(loads: pd.DataFrame) -> pd.DataFrame:
    """Per bundle: polls seen, mean, p95 (linear) and peak load; hottest first."""
    if loads.empty:
        return empty_frame(HOT_STATS)
    grouped = loads.groupby(KEY)["load"]
    stats = grouped.agg(polls="size", mean_load="mean", peak_load="max")
    stats["p95_load"] = grouped.quantile(0.95)
    return order_hot(stats.reset_index())


def compute_timeline(loads: pd.DataFrame, chosen: pd.DataFrame, *, width: int) -> pd.DataFrame:
    """The chosen bundles averaged per time bucket; the owner is the bucket's last poll's."""
    mine = loads.merge(chosen[KEY], on=KEY, how="inner")
    if mine.empty:
        return empty_frame(TIMELINE_COLUMNS)
    since_epoch = pd.to_datetime(mine["collected_at"], utc=True) - pd.Timestamp(0, tz="UTC")
    seconds = np.floor(since_epoch.dt.total_seconds()).astype("int64")
    mine = mine.assign(bucket=pd.to_datetime((seconds // width) * width, unit="s", utc=True))
    means = ["topics", "msg_rate_in", "msg_rate_out", "msg_rate"]
    means += ["throughput_in", "throughput_out", "throughput"]
    keys = ["bucket", *KEY]
    out = mine.groupby(keys, as_index=False).agg(
        polls=("snapshot_id", "size"), **{c: (c, "mean") for c in means}
    )
    last = mine.sort_values("collected_at").drop_duplicates(keys, keep="last")
    out = out.merge(last[[*keys, "owner_broker"]], on=keys, how="left")
    return out.sort_values(keys).reset_index(drop=True)[TIMELINE_COLUMNS]


def compute_moves(loads: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The owner changes: the collector's `bundle_owner_changed` events, and the changes from
    one owner to another between a bundle's consecutive polls that no event reported."""
    moved = events[events["kind"] == "bundle_owner_changed"]
    reported = pd.DataFrame(
        {
            "at": moved["at"],
            "namespace": moved["subject"].str.rsplit("/", n=1).str[0],
            "bundle": moved["subject"].str.rsplit("/", n=1).str[-1],
            "before": moved["before"],
            "after": moved["after"],
            "source": "event",
        }
    )
    seen = loads.sort_values("collected_at")[["collected_at", *KEY, "owner_broker"]]
    before = seen.groupby(KEY)["owner_broker"].shift()
    changed = before.notna() & seen["owner_broker"].notna() & (before != seen["owner_broker"])
    polled = pd.DataFrame(
        {
            "at": seen["collected_at"][changed],
            "namespace": seen["namespace"][changed],
            "bundle": seen["bundle"][changed],
            "before": before[changed],
            "after": seen["owner_broker"][changed],
            "source": "polls",
        }
    )
    known = polled.merge(reported[["at", *KEY]], on=["at", *KEY], how="left", indicator=True)
    polled = polled[(known["_merge"] == "left_only").to_numpy()]
    found = [f for f in (reported, polled) if len(f)]
    if not found:
        return empty_frame(MOVE_COLUMNS)
    out = pd.concat(found, ignore_index=True)
    return out.sort_values(["at", *KEY, "source"]).reset_index(drop=True)[MOVE_COLUMNS]


def compute_newest(
    loads: pd.DataFrame, topics: pd.DataFrame, newest_id: str | None, *, metric: str
) -> pd.DataFrame:
    """The newest poll's bundles with the loads of the two halves a split would make."""
    now = loads[loads["snapshot_id"] == newest_id][[*KEY, "lower", "upper", "owner_broker", "load"]]
    if now.empty:
        return empty_frame(NEWEST_COLUMNS)
    mine = topics[topics["snapshot_id"] == newest_id]
    halves = compute_halves(mine, now, metric=metric)
    out = now.merge(halves, on=KEY, how="left")
    out["split_topics"] = out["split_topics"].fillna(0).astype("int64")
    out[["lower_load", "upper_load"]] = out[["lower_load", "upper_load"]].fillna(0.0)
    return out.sort_values(KEY).reset_index(drop=True)[NEWEST_COLUMNS]


def compute_halves(topics: pd.DataFrame, bundles: pd.DataFrame, *, metric: str) -> pd.DataFrame:
    """Per bundle: its topics, and their load in each half of a `range_equally_divide` split
    (`[lower, mid)` and `[mid, upper)`), each topic placed by its bundle hash."""
    columns = [*KEY, "split_topics", "lower_load", "upper_load"]
    mine = topics.merge(bundles[[*KEY, "lower", "upper"]], on=KEY, how="inner")
    if mine.empty:
        return pd.DataFrame(columns=columns)
    load_in, load_out = TOPIC_LOAD[metric]
    mine = mine.assign(topic_load=mine[load_in].fillna(0.0) + mine[load_out].fillna(0.0))
    rows = []
    for (namespace, bundle, lower, upper), part in mine.groupby([*KEY, "lower", "upper"]):
        mid = int(lower) + (int(upper) - int(lower)) // 2
        cuts = sorted({*HASH_SPACE, int(lower), mid, int(upper)})
        placed = topic_bundles(cuts, part["topic"])
        low = np.array([placed[t].lower < mid for t in part["topic"]], dtype=bool)
        load = part["topic_load"].to_numpy(dtype=float)
        rows.append((namespace, bundle, len(part), load[low].sum(), load[~low].sum()))
    return pd.DataFrame(rows, columns=columns)


def compute_owned(loads: pd.DataFrame) -> pd.DataFrame:
    """Each broker's load summed over every poll of the window."""
    owning = loads.dropna(subset=["owner_broker"])
    if owning.empty:
        return empty_frame(OWNED_COLUMNS)
    out = owning.groupby("owner_broker", as_index=False)["load"].sum()
    return out.rename(columns={"owner_broker": "broker", "load": "window_load"})


def pandas_parts(
    tables: dict[str, pd.DataFrame], snapshots: pd.DataFrame, *, metric: str, top: int
) -> Parts:
    """The parts from the window's tables (`bundles`, `topics`, `events`, `brokers`) and its
    index of snapshots, oldest first."""
    loads = bundle_loads(tables["bundles"], tables["topics"], metric=metric)
    hot = compute_hot(loads)
    first = snapshots["collected_at"].iloc[0] if len(snapshots) else None
    last = snapshots["collected_at"].iloc[-1] if len(snapshots) else None
    newest_id = str(snapshots["snapshot_id"].iloc[-1]) if len(snapshots) else None
    brokers = tables["brokers"]
    live = brokers[brokers["snapshot_id"] == newest_id]["broker_id"]
    return Parts(
        hot=hot,
        timeline=compute_timeline(loads, hot.head(top), width=bucket_seconds(first, last)),
        moves=compute_moves(loads, tables["events"]),
        newest=compute_newest(loads, tables["topics"], newest_id, metric=metric),
        owned=compute_owned(loads),
        live=sorted(set(live.dropna())),
        polls=len(snapshots),
    )


def pandas_result(store_root: Any, *, metric: str = "msg_rate", top: int = 10) -> Result:
    """The whole analysis over every stored poll, on pandas only (no Spark)."""
    from pulsar_lens.core.store import Store

    store = Store(store_root)
    names = ("bundles", "topics", "events", "brokers")
    tables = {name: store.read(name).to_pandas() for name in names}
    parts = pandas_parts(tables, store.snapshots(), metric=metric, top=top)
    return finish(parts, metric=metric)
