"""`sticky-ranges`: gaps and overlaps of hand-set sticky hash ranges, and a planner for them.

Checked groups, from the newest snapshot:

* each Key_Shared subscription in STICKY mode: its consumers bring their own ranges
  (`KeySharedPolicy.stickyHashRange()`);
* per topic, the readers or other non-Key_Shared consumers whose stats carry hash ranges.
  A 4.0.7 broker does not report them: a Java reader created with `keyHashRange(...)` gets
  an Exclusive subscription whose consumer stats have neither `keyHashRanges` nor
  `keyHashRangeArrays` (per-topic or bulk stats), so this group only appears with brokers
  that do.

A **gap** is a run of hashes in 0..65535 that no range covers. A 4.0 broker hashes sticky keys
to `h31 % 65536` with 0 turned into 1, so hash 0 is never routed; every other hash in a gap
stalls: its messages stay in the backlog (`msgInReplay`) until a consumer covering it connects.
An **overlap** is a run covered by two or more ranges: the broker refuses it inside one STICKY
subscription, so there it means a stale consumer; across readers, each of them reads the keys.
With key samples (`key_samples` rows for the topic) the number of sampled keys in gaps is given.

On 3.0.x brokers (the versions in `brokers`, see `shared.versions`) the 3.0 rules apply: keys
hash to `h31 % 65536` with no turning of 0 into 1, so hash 0 is routed and counted (the
routable hashes are 0..65535, `sticky_space`), and a STICKY subscription's gap between two
ranges of one consumer goes to that consumer (`taken_by`), so it does not stall. The summary
(`pulsar`, `model`) says which line was modelled.

**Planner**: sticky ranges for `nodes` consumers by consistent hashing with `points` ring
points each (4.0 points of names `<prefix>-<i>`, the first range extended down to 0), so
adding a node later moves only about 1/(n+1) of the keys. Balance is scored as the largest
share over the fair share 1/n and the standard deviation of the shares, on uniform hashes and
on the sampled keys when there are any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    Field,
    HashRange,
    Inputs,
    Result,
    View,
    frame_of,
    sticky_key_hash_array,
)
from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.keyshared.ranges import (
    coverage_runs,
    ranges_text,
    share_stats,
)
from pulsar_lens.core.keyshared.rebuild import seeded_sticky
from pulsar_lens.plugins.builtin.shared.sticky import plan_ranges
from pulsar_lens.plugins.builtin.shared.versions import BrokerLine, broker_line
from pulsar_lens.plugins.builtin.sticky_ranges.groups import Group, sticky_groups
from pulsar_lens.plugins.builtin.sticky_ranges.space import SPACE_4_0, Space, sticky_space

GROUP_COLUMNS = [
    "label",
    "topic",
    "subscription",
    "kind",
    "consumers",
    "covered_hashes",
    "gap_hashes",
    "gap_fraction",
    "overlap_hashes",
    "imbalance",
    "sampled_keys",
    "sampled_keys_in_gaps",
]
CONSUMER_COLUMNS = ["label", "consumer_name", "ranges", "hashes", "share", "sampled_share"]
RANGE_COLUMNS = ["label", "consumer_name", "start", "end", "size"]
GAP_COLUMNS = ["label", "start", "end", "size", "routable_hashes", "sampled_keys", "taken_by"]
OVERLAP_COLUMNS = ["label", "start", "end", "size", "covered_by", "consumers"]
PLAN_COLUMNS = ["node_index", "node", "start", "end", "size"]
COVERAGE_COLUMNS = {
    "groups": GROUP_COLUMNS,
    "consumers": CONSUMER_COLUMNS,
    "ranges": RANGE_COLUMNS,
    "gaps": GAP_COLUMNS,
    "overlaps": OVERLAP_COLUMNS,
}
BALANCE_COLUMNS = [
    "node_index",
    "node",
    "ranges",
    "hashes",
    "uniform_share",
    "sampled_share",
    "ranges_text",
]


class StickyRanges(AnalysisPlugin):
    name = "sticky-ranges"
    title = "Sticky hash ranges"
    description = (
        "Gaps (hashes no consumer covers, whose messages stall) and overlaps in STICKY "
        "Key_Shared subscriptions and key-hash-range readers, and a consistent-hashing planner "
        "of sticky ranges for N consumers with its balance on uniform and sampled keys."
    )
    version = "1.2"
    engine = "light"
    inputs = ("subscriptions", "consumers", "key_samples", "brokers")
    history = 10  # of key samples
    history_of = {"subscriptions": 1, "consumers": 1, "brokers": 1}  # the newest poll
    outputs = ("groups", "consumers", "ranges", "gaps", "overlaps", "plan", "plan_balance")

    class Params(BaseModel):
        subscription: str = Field("", description="Group to draw ('topic | subscription')")
        nodes: int = Field(3, ge=1, le=64, description="Planner: number of sticky consumers")
        node_index: int = Field(0, ge=0, le=63, description="Planner: the node to print")
        points: int = Field(100, ge=1, le=1024, description="Planner: ring points per node")
        name_prefix: str = Field("node", min_length=1, description="Planner: node names")
        sample_topic: str = Field("", description="Key samples of this topic; empty: all")

    def analyze(self, data: Inputs, params: Params) -> Result:
        line = broker_line(data.latest("brokers"))
        samples = sample_hashes(data.history("key_samples"), pulsar=line.line)
        groups = _groups(data)
        frames = coverage_frames(groups, samples, pulsar=line.line)
        chosen = (
            samples if not params.sample_topic else samples[samples["topic"] == params.sample_topic]
        )
        plan = plan_ranges(params.nodes, params.points, prefix=params.name_prefix)
        frames["plan"] = plan_frame(plan, params.name_prefix)
        frames["plan_balance"] = balance_frame(
            plan, params.name_prefix, chosen["hash"].to_numpy(), space=sticky_space(line.line)
        )
        selected = params.subscription or (groups[0].label if groups else "")
        summary = summarize(frames, params, selected, len(chosen), line)
        return Result(frames=frames, summary=summary)

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.sticky_ranges.views import render_views  # altair: on use

        return render_views(result)

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        groups = _groups(data)
        topics = sorted(set(data.history("key_samples")["topic"].dropna().astype(str)))
        return {"subscription": ["", *(g.label for g in groups)], "sample_topic": ["", *topics]}


def _groups(data: Inputs) -> list[Group]:
    """The newest poll's groups, found once for `analyze` and `param_choices` (at 1,000,000
    topics some 2 s each time)."""
    return data.derived(
        "sticky-ranges groups",
        lambda: sticky_groups(data.latest("subscriptions"), data.latest("consumers")),
    )


def sample_hashes(samples: pd.DataFrame, *, pulsar: PulsarLine = "4.0") -> pd.DataFrame:
    """topic, hash: the sticky hash a broker of line `pulsar` gives every sampled key (its
    UTF-8 bytes)."""
    if samples.empty:
        return pd.DataFrame({"topic": pd.Series(dtype=object), "hash": pd.Series(dtype="int64")})
    keys = pa.array(samples["key"].fillna("").astype(str).tolist(), pa.string())
    hashes = sticky_key_hash_array(keys, selector="sticky", pulsar=pulsar).astype(np.int64)
    return pd.DataFrame({"topic": samples["topic"].to_numpy(), "hash": hashes})


def coverage_frames(
    groups: Sequence[Group], samples: pd.DataFrame, *, pulsar: PulsarLine = "4.0"
) -> dict[str, pd.DataFrame]:
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in COVERAGE_COLUMNS}
    space = sticky_space(pulsar)
    by_topic = {
        topic: np.asarray(mine, np.int64)
        for topic, mine in samples.groupby("topic", sort=False)["hash"]
    }
    for group in groups:
        hashes = by_topic.get(group.topic, np.zeros(0, np.int64))
        counts = coverage_runs(r for m in group.members for r in m.ranges)
        every_gap = [(s, e) for s, e, c in counts if c == 0]
        taker = gap_taker(group, pulsar)
        taken = {(s, e): taker(s) for s, e in every_gap}
        gaps = [g for g in every_gap if taken[g] is None]  # the gaps that stall
        overlaps = [(s, e, c) for s, e, c in counts if c > 1]
        rows["gaps"].extend(
            gap_row(group.label, s, e, hashes, taken[(s, e)], space=space) for s, e in every_gap
        )
        rows["overlaps"].extend(overlap_row(group, s, e, c) for s, e, c in overlaps)
        rows["consumers"].extend(consumer_rows(group, hashes, space=space))
        rows["ranges"].extend(
            {"label": group.label, "consumer_name": m.name, "start": s, "end": e, "size": e - s + 1}
            for m in group.members
            for s, e in m.ranges
        )
        rows["groups"].append(group_row(group, gaps, overlaps, hashes, space=space))
    return {name: frame_of(rows[name], cols) for name, cols in COVERAGE_COLUMNS.items()}


def gap_taker(group: Group, pulsar: PulsarLine) -> Any:
    """hash -> the consumer a broker of line `pulsar` delivers a gap hash to (None: it stalls).
    Only a 3.0 STICKY subscription gives a gap to anyone: the consumer on both sides of it."""
    if pulsar != "3.0" or group.kind != "sticky":
        return lambda _hash: None
    selector, _ = seeded_sticky(group.members, pulsar="3.0")
    if selector is None:  # overlapping ranges: the broker would have refused one of them
        return lambda _hash: None

    def taker(value: int) -> str | None:
        chosen = selector.select(value)
        return chosen.name if chosen is not None else None

    return taker


def _in(hashes: np.ndarray, start: int, end: int) -> int:
    return int(((hashes >= start) & (hashes <= end)).sum())


def gap_row(
    label: str,
    start: int,
    end: int,
    hashes: np.ndarray,
    taken_by: str | None = None,
    *,
    space: Space = SPACE_4_0,
) -> dict[str, Any]:
    return {
        "label": label,
        "start": start,
        "end": end,
        "size": end - start + 1,
        "routable_hashes": space.count([(start, end)]),
        "sampled_keys": _in(hashes, start, end),
        "taken_by": taken_by,
    }


def overlap_row(group: Group, start: int, end: int, count: int) -> dict[str, Any]:
    names = [m.name for m in group.members if any(s <= end and start <= e for s, e in m.ranges)]
    return {
        "label": group.label,
        "start": start,
        "end": end,
        "size": end - start + 1,
        "covered_by": count,
        "consumers": ", ".join(names),
    }


def consumer_rows(
    group: Group, hashes: np.ndarray, *, space: Space = SPACE_4_0
) -> list[dict[str, Any]]:
    return [
        {
            "label": group.label,
            "consumer_name": m.name,
            "ranges": len(m.ranges),
            "hashes": space.count(m.ranges),
            "share": space.count(m.ranges) / space.size,
            "sampled_share": (
                sum(_in(hashes, s, e) for s, e in m.ranges) / len(hashes) if len(hashes) else None
            ),
        }
        for m in group.members
    ]


def group_row(
    group: Group,
    gaps: Sequence[HashRange],
    overlaps: Sequence[tuple[int, int, int]],
    hashes: np.ndarray,
    *,
    space: Space = SPACE_4_0,
) -> dict[str, Any]:
    gap_hashes = space.count(gaps)
    imbalance, _ = share_stats([space.count(m.ranges) / space.size for m in group.members])
    return {
        "label": group.label,
        "topic": group.topic,
        "subscription": group.subscription,
        "kind": group.kind,
        "consumers": len(group.members),
        "covered_hashes": space.size - gap_hashes,
        "gap_hashes": gap_hashes,
        "gap_fraction": gap_hashes / space.size,
        "overlap_hashes": space.count((s, e) for s, e, _ in overlaps),
        "imbalance": imbalance,
        "sampled_keys": len(hashes),
        "sampled_keys_in_gaps": sum(_in(hashes, s, e) for s, e in gaps),
    }


def plan_frame(plan: Sequence[tuple[HashRange, ...]], prefix: str) -> pd.DataFrame:
    rows = [
        {"node_index": i, "node": f"{prefix}-{i}", "start": s, "end": e, "size": e - s + 1}
        for i, ranges in enumerate(plan)
        for s, e in ranges
    ]
    return frame_of(rows, PLAN_COLUMNS)


def balance_frame(
    plan: Sequence[tuple[HashRange, ...]],
    prefix: str,
    hashes: np.ndarray,
    *,
    space: Space = SPACE_4_0,
) -> pd.DataFrame:
    rows = [
        {
            "node_index": i,
            "node": f"{prefix}-{i}",
            "ranges": len(ranges),
            "hashes": space.count(ranges),
            "uniform_share": space.count(ranges) / space.size,
            "sampled_share": (
                sum(_in(hashes, s, e) for s, e in ranges) / len(hashes) if len(hashes) else None
            ),
            "ranges_text": ranges_text(ranges),
        }
        for i, ranges in enumerate(plan)
    ]
    return frame_of(rows, BALANCE_COLUMNS)


def summarize(
    frames: Mapping[str, pd.DataFrame],
    params: Any,
    selected: str,
    samples: int,
    line: BrokerLine | None = None,
) -> dict[str, Any]:
    groups, balance = frames["groups"], frames["plan_balance"]
    line = line or BrokerLine("4.0", ())
    uniform = share_stats(list(balance["uniform_share"]))
    sampled = share_stats(list(balance["sampled_share"])) if samples else (None, None)
    node = balance[balance["node_index"] == params.node_index]
    return {
        "pulsar": line.line,
        "broker_versions": list(line.versions),
        "model": line.caption(),
        "groups": len(groups),
        "groups_with_gaps": int((groups["gap_hashes"] > 0).sum()) if len(groups) else 0,
        "gap_hashes": int(groups["gap_hashes"].sum()) if len(groups) else 0,
        "overlap_hashes": int(groups["overlap_hashes"].sum()) if len(groups) else 0,
        "selected": selected,
        "plan": {
            "nodes": params.nodes,
            "points": params.points,
            "uniform_imbalance": uniform[0],
            "uniform_stddev": uniform[1],
            "samples": samples,
            "sampled_imbalance": sampled[0],
            "sampled_stddev": sampled[1],
            "node": str(node["node"].iloc[0]) if len(node) else None,
            "node_ranges": _pairs(frames["plan"], params.node_index),
        },
    }


def _pairs(plan: pd.DataFrame, index: int) -> list[list[int]]:
    mine = plan[plan["node_index"] == index]
    return [[int(s), int(e)] for s, e in zip(mine["start"], mine["end"], strict=True)]
