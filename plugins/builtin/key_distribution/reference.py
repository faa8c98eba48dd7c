"""`key-distribution`'s rule on pandas, and the part both engines share.

The counts (`counts`): every sampled key of a Key_Shared subscription's topic goes to the
consumer whose reported hash ranges, in the same poll, contain the key's hash. The hash is
the one the subscription's selector gives the key: STICKY subscriptions reduce the key's
murmur3 hash `% 65536`, every other 4.0 subscription (consistent hashing) `% 65535 + 1`; the
stored `sticky_hash` is the latter. A partition's samples count for that partition's
subscription. Out of it come three small frames: messages per (subscription, hash), per
(subscription, consumer) and per (subscription, key).

`finish` turns them into the result, the same way on both engines: skew per subscription
(the busiest consumer's share over the fair share 1/n, and the Gini coefficient of the
consumers' messages), hot keys, a 256-bin histogram of the hash space, the what-if (the
real hashes on a 4.0 consistent-hashing ring of n-1..n+2 consumers at several replica-point
counts) and the sticky-range planner of `sticky-ranges` re-scored on the real hashes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from core.keyshared.ranges import ranges_of
from plugins.api import (
    ConsistentHashingSelector,
    Consumer,
    Result,
    empty_frame,
    frame_of,
    sticky_key_hash_array,
)
from plugins.builtin.sticky_ranges import plan_ranges

HASH_COUNT_COLUMNS = ["label", "hash", "messages"]
CONSUMER_COUNT_COLUMNS = ["label", "consumer_name", "messages"]
KEY_COUNT_COLUMNS = ["label", "key", "hash", "consumer_name", "messages"]
CONSUMER_COLUMNS = ["label", "consumer_name", "messages", "share", "over_fair"]
SKEW_COLUMNS = [
    "label",
    "consumers",
    "keys",
    "messages",
    "unassigned",
    "max_share",
    "fair_share",
    "max_over_fair",
    "gini",
]
HOT_KEY_COLUMNS = ["label", "key", "hash", "consumer_name", "messages", "share"]
BIN_COLUMNS = ["label", "bin_start", "bin_end", "messages"]
WHAT_IF_COLUMNS = ["label", "consumers", "points", "max_share", "max_over_fair", "moved_share"]
STICKY_COLUMNS = ["label", "nodes", "node", "share", "over_fair"]
BINS = 256
UNASSIGNED = "(no consumer)"
"""The consumer of a hash no reported range covered (a gap, or a consumer still joining)."""


def label_of(topic: str, subscription: str) -> str:
    return f"{topic} | {subscription}"


def subscriptions_of(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """(snapshot_id, topic, subscription, label, selector) of the Key_Shared subscriptions."""
    subs = subscriptions[subscriptions["type"] == "Key_Shared"]
    out = subs[["snapshot_id", "topic", "subscription"]].copy()
    out["label"] = [label_of(t, s) for t, s in zip(out["topic"], out["subscription"], strict=True)]
    out["selector"] = np.where(subs["key_shared_mode"] == "STICKY", "sticky", "consistent")
    return out.reset_index(drop=True)


def ranges_frame(consumers: pd.DataFrame) -> pd.DataFrame:
    """(snapshot_id, topic, subscription, consumer_name, start, end), one row per range."""
    rows = [
        (snap, topic, sub, name, start, end)
        for snap, topic, sub, name, cell in zip(
            consumers["snapshot_id"],
            consumers["topic"],
            consumers["subscription"],
            consumers["consumer_name"],
            consumers["hash_ranges"],
            strict=True,
        )
        for start, end in ranges_of(cell)
    ]
    columns = ["snapshot_id", "topic", "subscription", "consumer_name", "start", "end"]
    return pd.DataFrame(rows, columns=columns)


def counts(
    samples: pd.DataFrame, consumers: pd.DataFrame, subscriptions: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """The three count frames (see the module docstring), on pandas."""
    subs = subscriptions_of(subscriptions)
    rows = samples.merge(subs, on=["snapshot_id", "topic"])
    if rows.empty:
        return _empty_counts()
    sticky = sticky_key_hash_array(pa.array(rows["key"], pa.string()), selector="sticky")
    rows["hash"] = np.where(rows["selector"] == "sticky", sticky, rows["sticky_hash"])
    rows["hash"] = rows["hash"].astype(np.int64)
    ranges = ranges_frame(consumers)
    owners = rows.reset_index().merge(ranges, on=["snapshot_id", "topic", "subscription"])
    owners = owners[(owners["hash"] >= owners["start"]) & (owners["hash"] <= owners["end"])]
    owner_of = owners.groupby("index")["consumer_name"].min()  # ranges never overlap
    rows["consumer_name"] = rows.index.map(owner_of).fillna(UNASSIGNED)
    return {
        "hashes": _count(rows, ["label", "hash"]),
        "consumers": _count(rows, ["label", "consumer_name"]),
        "keys": _count(rows, ["label", "key", "hash", "consumer_name"]),
    }


def _count(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    out = rows.groupby(by, as_index=False).size().rename(columns={"size": "messages"})
    return out.sort_values(by).reset_index(drop=True)


def _empty_counts() -> dict[str, pd.DataFrame]:
    return {
        "hashes": empty_frame(HASH_COUNT_COLUMNS),
        "consumers": empty_frame(CONSUMER_COUNT_COLUMNS),
        "keys": empty_frame(KEY_COUNT_COLUMNS),
    }


def newest_members(consumers: pd.DataFrame, subscriptions: pd.DataFrame) -> dict[str, list[str]]:
    """Per subscription label, the consumer names of the newest poll that lists it."""
    subs = subscriptions_of(subscriptions)
    if subs.empty:
        return {}
    joined = consumers.merge(subs, on=["snapshot_id", "topic", "subscription"])
    out: dict[str, list[str]] = {}
    for label, group in joined.groupby("label"):
        newest = group[group["collected_at"] == group["collected_at"].max()]
        out[str(label)] = sorted(str(n) for n in newest["consumer_name"])
    return out


def finish(
    frames: Mapping[str, pd.DataFrame],
    members: Mapping[str, Sequence[str]],
    *,
    top_keys: int,
    what_if_points: Sequence[int],
) -> Result:
    """The result from the three count frames and each subscription's newest consumers."""
    consumers = _consumers(frames["consumers"])
    skew = _skew(frames, consumers)
    hot = _hot_keys(frames["keys"], top_keys)
    bins = _bins(frames["hashes"])
    what_if, sticky = _what_ifs(frames["hashes"], members, what_if_points)
    worst = skew.dropna(subset=["max_over_fair"])
    worst = worst.sort_values(["max_over_fair", "label"], ascending=[False, True])
    summary: dict[str, Any] = {
        "subscriptions": len(skew),
        "messages": int(skew["messages"].sum()) if len(skew) else 0,
        "most_skewed": str(worst["label"].iloc[0]) if len(worst) else None,
        "max_over_fair": float(worst["max_over_fair"].iloc[0]) if len(worst) else None,
    }
    return Result(
        frames={
            "consumers": consumers,
            "skew": skew,
            "hot_keys": hot,
            "hash_bins": bins,
            "what_if": what_if,
            "sticky_plan": sticky,
        },
        summary=summary,
    )


def _consumers(counted: pd.DataFrame) -> pd.DataFrame:
    if counted.empty:
        return empty_frame(CONSUMER_COLUMNS)
    out = counted.copy()
    totals = out.groupby("label")["messages"].transform("sum")
    real = out["consumer_name"] != UNASSIGNED
    n = out[real].groupby("label")["consumer_name"].transform("count").reindex(out.index)
    out["share"] = out["messages"] / totals
    out["over_fair"] = (out["share"] * n).where(real)
    return out.sort_values(["label", "consumer_name"]).reset_index(drop=True)[CONSUMER_COLUMNS]


def _skew(frames: Mapping[str, pd.DataFrame], consumers: pd.DataFrame) -> pd.DataFrame:
    rows = []
    keys = frames["keys"].groupby("label")["key"].nunique()
    for label, group in consumers.groupby("label"):
        real = group[group["consumer_name"] != UNASSIGNED]
        total = int(group["messages"].sum())
        n = len(real)
        top = float(real["share"].max()) if n else None
        rows.append(
            {
                "label": label,
                "consumers": n,
                "keys": int(keys.get(label, 0)),
                "messages": total,
                "unassigned": total - int(real["messages"].sum()),
                "max_share": top,
                "fair_share": 1.0 / n if n else None,
                "max_over_fair": top * n if top is not None else None,
                "gini": gini(real["messages"].to_numpy(dtype=float)),
            }
        )
    return frame_of(rows, SKEW_COLUMNS)


def gini(values: np.ndarray) -> float | None:
    """0 when every consumer got as many messages, towards 1 when one got them all."""
    if len(values) == 0 or values.sum() == 0:
        return None
    ordered = np.sort(values)
    n = len(ordered)
    ranks = np.arange(1, n + 1)
    return float((2 * (ranks * ordered).sum()) / (n * ordered.sum()) - (n + 1) / n)


def _hot_keys(keys: pd.DataFrame, top: int) -> pd.DataFrame:
    if keys.empty:
        return empty_frame(HOT_KEY_COLUMNS)
    out = keys.copy()
    out["share"] = out["messages"] / out.groupby("label")["messages"].transform("sum")
    out = out.sort_values(["label", "messages", "key"], ascending=[True, False, True])
    return out.groupby("label").head(top).reset_index(drop=True)[HOT_KEY_COLUMNS]


def _bins(hashes: pd.DataFrame) -> pd.DataFrame:
    if hashes.empty:
        return empty_frame(BIN_COLUMNS)
    width = 65536 // BINS
    out = hashes.assign(bin_start=(hashes["hash"] // width) * width)
    out = out.groupby(["label", "bin_start"], as_index=False)["messages"].sum()
    out["bin_end"] = out["bin_start"] + width - 1
    return out.sort_values(["label", "bin_start"]).reset_index(drop=True)[BIN_COLUMNS]


def _what_ifs(
    hashes: pd.DataFrame, members: Mapping[str, Sequence[str]], points: Sequence[int]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    what_if, sticky = [], []
    for label, group in hashes.groupby("label"):
        names = list(members.get(str(label), ()))
        if not names:
            continue
        values = group["hash"].to_numpy(np.int64)
        weights = group["messages"].to_numpy(np.int64)
        for p in points:
            base = _owners(names, p, values)
            for n in range(max(1, len(names) - 1), len(names) + 3):
                shares, owners = _ring_shares(names, n, p, values, weights)
                moved = float(weights[owners != base].sum() / weights.sum())
                top = float(shares.max())
                what_if.append(
                    {
                        "label": label,
                        "consumers": n,
                        "points": p,
                        "max_share": top,
                        "max_over_fair": top * n,
                        "moved_share": moved,
                    }
                )
        plan = plan_ranges(len(names), 100, prefix="node")
        for i, ranges in enumerate(plan):
            inside = np.zeros(len(values), bool)
            for start, end in ranges:
                inside |= (values >= start) & (values <= end)
            share = float(weights[inside].sum() / weights.sum())
            sticky.append(
                {
                    "label": label,
                    "nodes": len(names),
                    "node": f"node-{i}",
                    "share": share,
                    "over_fair": share * len(names),
                }
            )
    return frame_of(what_if, WHAT_IF_COLUMNS), frame_of(sticky, STICKY_COLUMNS)


def _ring(names: Sequence[str], n: int, points: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(range ends, owner index per range, owner names) of a 4.0 ring of `n` consumers: the
    real names first, then `extra-1`, `extra-2`, ... (fewer: the last real one leaves)."""
    chosen = [*names[:n], *(f"extra-{i}" for i in range(1, n - len(names) + 1))]
    selector = ConsistentHashingSelector(points=points)
    handles = [Consumer(name) for name in chosen]
    for handle in handles:
        selector.add(handle)
    assignments = selector.assignments()
    index = {id(h): i for i, h in enumerate(handles)}
    owners = np.array([index[id(assignments.table[o])] for o in assignments.owners], np.int64)
    return np.asarray(assignments.ends, np.int64), owners, chosen


def _owners(names: Sequence[str], points: int, values: np.ndarray) -> np.ndarray:
    ends, owners, chosen = _ring(names, len(names), points)
    picked: np.ndarray = np.array(chosen, dtype=object)[owners[np.searchsorted(ends, values)]]
    return picked


def _ring_shares(
    names: Sequence[str], n: int, points: int, values: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    ends, owners, chosen = _ring(names, n, points)
    owner = owners[np.searchsorted(ends, values)]
    shares = np.bincount(owner, weights=weights, minlength=n) / weights.sum()
    return shares, np.array(chosen, dtype=object)[owner]


def select(result: Result, subscription: str) -> Result:
    """`result` with the subscription its page draws: `subscription`, else the most skewed."""
    chosen = subscription or result.summary.get("most_skewed")
    return Result(frames=result.frames, summary={**result.summary, "selected": chosen})


def pandas_result(
    store_root: Any, *, top_keys: int = 20, what_if_points: Sequence[int] = (20, 100, 400)
) -> Result:
    """The whole analysis over every stored poll, on pandas only (no Spark)."""
    from core.store import Store

    store = Store(store_root)
    tables = {n: store.read(n).to_pandas() for n in ("key_samples", "consumers", "subscriptions")}
    frames = counts(tables["key_samples"], tables["consumers"], tables["subscriptions"])
    members = newest_members(tables["consumers"], tables["subscriptions"])
    result = finish(frames, members, top_keys=top_keys, what_if_points=what_if_points)
    return select(result, "")
