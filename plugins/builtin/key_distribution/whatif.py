"""`key-distribution`'s what-ifs on the real keys, one subscription at a time.

`what_if_frame`: the subscription's sampled messages, by their consistent-hashing hash, on a
consistent-hashing ring of the modelled line (4.0's `ConsistentHashingSelector`, or 3.0.7's
31-bit ring on 3.0: the rings `key-shared-map` rebuilds) of n consumers at a few replica-point
counts, for n from N - spread to N + spread around the N consumers of its newest poll. The
ring keeps the first n of them in connection order (the last connected leave first) and adds
`extra-1`, `extra-2`, ... beyond N. Per (n, points): the busiest consumer's share, that over
the fair share 1/n, and the share of messages that would change consumer against the N
consumers at the same points.

`plan_frame`: the sticky-range planner of `sticky-ranges` (`plan_ranges`, N nodes) scored on
the messages by their sticky hash (`h31 % 65536`, on 4.0 0 -> 1), per planned node.

Both engines call these per subscription (`per_label`) on frames of (label, hash, messages):
the pandas twin on its own sums, the Spark plugin on the sums its query brings back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Consumer, frame_of
from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.selectors import make_selector
from pulsar_lens.plugins.builtin.shared.sticky import plan_ranges

WHAT_IF_COLUMNS = ["label", "consumers", "points", "max_share", "max_over_fair", "moved_share"]
PLAN_COLUMNS = ["label", "nodes", "points", "node", "ranges", "messages", "share", "over_fair"]
_TYPES: dict[str, dict[str, str]] = {  # the columns' types, also for a frame with no rows
    "what_if": dict.fromkeys(["consumers", "points"], "int64")
    | dict.fromkeys(["max_share", "max_over_fair", "moved_share"], "float64"),
    "plan": dict.fromkeys(["nodes", "points", "ranges", "messages"], "int64")
    | dict.fromkeys(["share", "over_fair"], "float64"),
}


def ring_owners(
    names: Sequence[str],
    points: int,
    hashes: np.ndarray,
    *,
    charset: str,
    pulsar: PulsarLine = "4.0",
) -> np.ndarray:
    """The position in `names` of the consumer each hash goes to on a consistent-hashing ring
    of line `pulsar` of exactly these consumers, joined in this order."""
    selector = make_selector("consistent", points=points, pulsar=pulsar, name_encoding=charset)
    handles = [Consumer(name) for name in names]
    for handle in handles:
        selector.add(handle)
    assignments = selector.assignments()
    position = {id(handle): i for i, handle in enumerate(handles)}
    at = [position[id(owner)] for owner in assignments.table]
    owners: np.ndarray = np.asarray(at, np.int64)[assignments.owner_of(hashes)]
    return owners


def what_if_rows(
    label: str,
    hashes: np.ndarray,
    weights: np.ndarray,
    names: Sequence[str],
    *,
    points: Sequence[int],
    spread: int,
    charset: str,
    pulsar: PulsarLine = "4.0",
) -> list[dict[str, Any]]:
    total = float(weights.sum())
    if not names or not total:
        return []
    rows = []
    for p in points:
        now = ring_owners(names, p, hashes, charset=charset, pulsar=pulsar)
        for n in range(max(1, len(names) - spread), len(names) + spread + 1):
            extra = [f"extra-{i}" for i in range(1, n - len(names) + 1)]
            owners = ring_owners([*names[:n], *extra], p, hashes, charset=charset, pulsar=pulsar)
            shares = np.bincount(owners, weights=weights, minlength=n) / total
            top = float(shares.max())
            rows.append(
                {
                    "label": label,
                    "consumers": n,
                    "points": p,
                    "max_share": top,
                    "max_over_fair": top * n,
                    "moved_share": float(weights[owners != now].sum()) / total,
                }
            )
    return rows


def plan_rows(
    label: str, hashes: np.ndarray, weights: np.ndarray, nodes: int, *, points: int
) -> list[dict[str, Any]]:
    total = int(weights.sum())
    if not nodes or not total:
        return []
    rows = []
    for i, ranges in enumerate(plan_ranges(nodes, points, prefix="node")):
        inside = np.zeros(len(hashes), bool)
        for start, end in ranges:
            inside |= (hashes >= start) & (hashes <= end)
        messages = int(weights[inside].sum())
        rows.append(
            {
                "label": label,
                "nodes": nodes,
                "points": points,
                "node": f"node-{i}",
                "ranges": len(ranges),
                "messages": messages,
                "share": messages / total,
                "over_fair": messages / total * nodes,
            }
        )
    return rows


def what_if_frame(
    group: pd.DataFrame,
    members: Mapping[str, Sequence[str]],
    *,
    points: Sequence[int],
    spread: int,
    charset: str,
    pulsar: PulsarLine = "4.0",
) -> pd.DataFrame:
    """The what-if of one subscription's (label, hash, messages) rows on line `pulsar`."""
    if group.empty:
        return _typed(frame_of([], WHAT_IF_COLUMNS), "what_if")
    label = str(group["label"].iloc[0])
    hashes, weights = _arrays(group)
    names = members.get(label, ())
    rows = what_if_rows(
        label, hashes, weights, names, points=points, spread=spread, charset=charset, pulsar=pulsar
    )
    return _typed(frame_of(rows, WHAT_IF_COLUMNS), "what_if")


def plan_frame(
    group: pd.DataFrame, members: Mapping[str, Sequence[str]], *, points: int
) -> pd.DataFrame:
    """The planner scored on one subscription's (label, hash, messages) rows."""
    if group.empty:
        return _typed(frame_of([], PLAN_COLUMNS), "plan")
    label = str(group["label"].iloc[0])
    hashes, weights = _arrays(group)
    rows = plan_rows(label, hashes, weights, len(members.get(label, ())), points=points)
    return _typed(frame_of(rows, PLAN_COLUMNS), "plan")


def per_label(rows: pd.DataFrame, shape: Callable[[pd.DataFrame], pd.DataFrame]) -> pd.DataFrame:
    """`shape` (`what_if_frame` or `plan_frame`) of each label's rows of `rows`, in one frame;
    `shape` of no rows when none gives any."""
    found = [frame for _, group in rows.groupby("label") if len(frame := shape(group))]
    return pd.concat(found, ignore_index=True) if found else shape(rows.iloc[:0])


def _arrays(group: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    ordered = group.sort_values("hash")
    return ordered["hash"].to_numpy(np.int64), ordered["messages"].to_numpy(np.int64)


def _typed(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    return frame.astype(_TYPES[kind])
