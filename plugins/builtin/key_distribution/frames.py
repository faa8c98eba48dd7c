"""`key-distribution`'s frames: the counts both engines bring back, and how `finish` shapes
them into the result the same way on both.

Counted per subscription (`label`) by each engine, all small:

- `consumers`: sampled messages per consumer, with a 0 row for every consumer that held
  ranges in a sampled poll and got none; `UNCOVERED` for hashes no range held;
- `keys`: distinct keys; `selector`: the selector in force at the newest sampled poll;
- `bins`: messages per bin of the hash in force, 256 bins over its space (65,536 hashes, or
  2^31 for 3.0's consistent hashing), each with its last hash;
- `hot_keys`: the `top_keys` keys with the most messages (ties by key), each with its hash
  and consumer at its newest sample and how many consumers it went to;
- `what_if` and `sticky_plan`: from `whatif`, per subscription;
- `lines`: every broker row of the window (snapshot_id, collected_at, version): the line the
  window is modelled on, and the summary's words on it (`model_of`).

Skew is given two ways: `max_over_fair`, the busiest consumer's share over the fair share
1/n (the same as its messages over the mean), and the Gini coefficient of the consumers'
messages (0: even, towards 1: one consumer gets everything).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Result, empty_frame, frame_of
from pulsar_lens.core.keyload import UNCOVERED
from pulsar_lens.plugins.builtin.key_distribution.whatif import PLAN_COLUMNS, WHAT_IF_COLUMNS
from pulsar_lens.plugins.builtin.shared.versions import BrokerLine, broker_line

BIN_WIDTH = 256  # 65536 hashes in 256 bins
WIDE_BIN_WIDTH = 2**23  # 3.0's 31-bit consistent hashes in 256 bins
COUNT_COLUMNS: dict[str, list[str]] = {
    "consumers": ["label", "consumer_name", "messages"],
    "keys": ["label", "keys"],
    "selector": ["label", "selector"],
    "bins": ["label", "bin_start", "bin_end", "messages"],
    "hot_keys": ["label", "key", "hash", "consumer_name", "consumers_seen", "messages"],
    "what_if": WHAT_IF_COLUMNS,
    "sticky_plan": PLAN_COLUMNS,
    "lines": ["snapshot_id", "collected_at", "version"],
}
CONSUMER_COLUMNS = ["label", "consumer_name", "messages", "share", "over_fair"]
SKEW_COLUMNS = [
    "label",
    "selector",
    "consumers",
    "keys",
    "messages",
    "uncovered",
    "max_share",
    "fair_share",
    "max_over_fair",
    "gini",
    "planned_max_over_fair",
]
HOT_KEY_COLUMNS = ["label", "key", "hash", "consumer_name", "consumers_seen", "messages", "share"]
BIN_COLUMNS = ["label", "bin_start", "bin_end", "messages"]
OUTPUTS = ("consumers", "skew", "hot_keys", "hash_bins", "what_if", "sticky_plan")


def empty_counts() -> dict[str, pd.DataFrame]:
    return {name: empty_frame(columns) for name, columns in COUNT_COLUMNS.items()}


def finish(counts: Mapping[str, pd.DataFrame], *, subscription: str = "") -> Result:
    """The result from the counted frames; `subscription` is the one the page draws (empty:
    the most skewed)."""
    consumers = _consumers(_sorted(counts["consumers"], ["label", "consumer_name"]))
    plan = _sorted(counts["sticky_plan"], ["label", "node"])
    skew = _skew(consumers, counts["keys"], counts["selector"], plan)
    worst = skew.dropna(subset=["max_over_fair"])
    worst = worst.sort_values(["max_over_fair", "label"], ascending=[False, True])
    summary: dict[str, Any] = {
        "subscriptions": len(skew),
        "messages": int(skew["messages"].sum()) if len(skew) else 0,
        "uncovered": int(skew["uncovered"].sum()) if len(skew) else 0,
        "most_skewed": str(worst["label"].iloc[0]) if len(worst) else None,
        "max_over_fair": float(worst["max_over_fair"].iloc[0]) if len(worst) else None,
    }
    summary["selected"] = subscription or summary["most_skewed"]
    summary.update(model_of(counts["lines"]))
    return Result(
        frames={
            "consumers": consumers,
            "skew": skew,
            "hot_keys": _hot_keys(counts["hot_keys"], consumers),
            "hash_bins": _bins(counts["bins"]),
            "what_if": _sorted(counts["what_if"], ["label", "points", "consumers"]),
            "sticky_plan": plan,
        },
        summary=summary,
    )


def _sorted(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return frame.sort_values(by).reset_index(drop=True)


def _totals(consumers: pd.DataFrame) -> pd.Series:
    return consumers.groupby("label")["messages"].transform("sum")


def _consumers(counted: pd.DataFrame) -> pd.DataFrame:
    if counted.empty:
        return empty_frame(CONSUMER_COLUMNS)
    out = counted.assign(messages=counted["messages"].astype("int64"))
    real = out["consumer_name"] != UNCOVERED
    n = out["consumer_name"].where(real).groupby(out["label"]).transform("count")
    out["share"] = (out["messages"] / _totals(out)).astype(float)
    out["over_fair"] = (out["share"] * n).where(real)
    return out[CONSUMER_COLUMNS]


def _skew(
    consumers: pd.DataFrame, keys: pd.DataFrame, selector: pd.DataFrame, plan: pd.DataFrame
) -> pd.DataFrame:
    key_count = dict(zip(keys["label"], keys["keys"], strict=True))
    kind = dict(zip(selector["label"], selector["selector"], strict=True))
    planned = plan.groupby("label")["over_fair"].max().to_dict() if len(plan) else {}
    rows = []
    for label, group in consumers.groupby("label"):
        real = group[group["consumer_name"] != UNCOVERED]
        total = int(group["messages"].sum())
        n = len(real)
        top = float(real["share"].max()) if n and total else None
        rows.append(
            {
                "label": label,
                "selector": kind.get(label),
                "consumers": n,
                "keys": int(key_count.get(label, 0)),
                "messages": total,
                "uncovered": total - int(real["messages"].sum()),
                "max_share": top,
                "fair_share": 1.0 / n if n else None,
                "max_over_fair": top * n if top is not None else None,
                "gini": gini(real["messages"].to_numpy(dtype=float)),
                "planned_max_over_fair": planned.get(label),
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


def _hot_keys(hot: pd.DataFrame, consumers: pd.DataFrame) -> pd.DataFrame:
    if hot.empty:
        return empty_frame(HOT_KEY_COLUMNS)
    totals = consumers.groupby("label")["messages"].sum()
    out = hot.assign(messages=hot["messages"].astype("int64"))
    out["share"] = (out["messages"] / out["label"].map(totals)).astype(float)
    out = out.sort_values(["label", "messages", "key"], ascending=[True, False, True])
    return out.reset_index(drop=True)[HOT_KEY_COLUMNS]


def _bins(counted: pd.DataFrame) -> pd.DataFrame:
    if counted.empty:
        return empty_frame(BIN_COLUMNS)
    return _sorted(counted, ["label", "bin_start"])[BIN_COLUMNS]


UPGRADE_NOTE = (
    "; the window holds polls of {lines} brokers (an upgrade): all of it is counted on the "
    "newest poll's {line} model"
)


def model_of(lines: pd.DataFrame) -> dict[str, Any]:
    """The line the window is modelled on, from its broker rows (`lines`): `pulsar`, the line
    of the newest poll whose brokers reported a version (`broker_line`; "4.0" when none did);
    `broker_versions`, every version reported in the window; `lines`, the lines of the polls
    that reported one; `model`, the caption the page shows, saying when those lines differ."""
    known = lines.dropna(subset=["version"])
    known = known[known["version"].astype(str) != ""]
    polls = [
        (at, str(sid), broker_line(group))
        for (at, sid), group in known.groupby(["collected_at", "snapshot_id"], sort=True)
    ]
    newest = polls[-1][2].line if polls else "4.0"
    versions = tuple(sorted({str(v) for v in known["version"]}))
    seen = sorted({line.line for _, _, line in polls}) or [newest]
    caption = BrokerLine(newest, versions).caption()
    if len(seen) > 1:
        caption += UPGRADE_NOTE.format(lines=" and ".join(seen), line=newest)
    return {"pulsar": newest, "broker_versions": list(versions), "lines": seen, "model": caption}
