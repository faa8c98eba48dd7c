"""`failover-history`'s output frames, shaped the same way whichever engine counted them.

Both engines hand over *raw* frames keyed by the group (`parent_topic`, `subscription`) and
by poll `position` (0 = the oldest poll of the window). Here they get their labels (the
`failover-assignment` rule), collection times, fixed dtypes, a deterministic order, the
per-group flap sums and the summary facts; nothing here decides a count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import Result
from pulsar_lens.plugins.builtin.shared.failover import group_label

GROUP_KEY = ["parent_topic", "subscription"]
PARTITION_KEY = [*GROUP_KEY, "topic"]
BALANCED_SPREAD = 1
"""A poll is balanced when the busiest and the idlest consumer differ by at most one partition:
no assignment of the same partitions over the same consumers does better."""

# Raw frames: what each engine computes.
RAW_GROUP_COLUMNS = [
    *GROUP_KEY,
    "polls",
    "first",
    "last",
    "max_consumers",
    "worst_spread",
    "worst_ratio",
    "polls_imbalanced",
]
RAW_PARTITION_COLUMNS = [
    *PARTITION_KEY,
    "partition_index",
    "polls",
    "first",
    "last",
    "changes",
    "suspicious",
    "last_active",
]
RAW_IMBALANCE_COLUMNS = [
    *GROUP_KEY,
    "position",
    "partitions",
    "consumers",
    "max_partitions",
    "min_partitions",
    "spread",
    "ratio",
]
RAW_TIMELINE_COLUMNS = [*GROUP_KEY, "position", "consumer_name", "partitions"]

# Output frames: the plugin's result.
TIME = "datetime64[us, UTC]"
GROUP_TYPES: Mapping[str, str] = {
    "label": "str",
    **dict.fromkeys(GROUP_KEY, "str"),
    "partitions": "int64",
    "polls": "int64",
    "first_seen": TIME,
    "last_seen": TIME,
    "max_consumers": "int64",
    "worst_spread": "int64",
    "worst_ratio": "float64",
    "polls_imbalanced": "int64",
    "balanced_share": "float64",
    "changes": "int64",
    "suspicious": "int64",
    "flapping_partitions": "int64",
}
PARTITION_TYPES: Mapping[str, str] = {
    "label": "str",
    **dict.fromkeys(PARTITION_KEY, "str"),
    "partition_index": "int64",
    "polls": "int64",
    "first_seen": TIME,
    "last_seen": TIME,
    "changes": "int64",
    "suspicious": "int64",
    "last_active": "str",
}
IMBALANCE_TYPES: Mapping[str, str] = {
    "label": "str",
    **dict.fromkeys(GROUP_KEY, "str"),
    "collected_at": TIME,
    "partitions": "int64",
    "consumers": "int64",
    "max_partitions": "int64",
    "min_partitions": "int64",
    "spread": "int64",
    "ratio": "float64",
}
TIMELINE_TYPES: Mapping[str, str] = {
    "label": "str",
    **dict.fromkeys(GROUP_KEY, "str"),
    "collected_at": TIME,
    "consumer_name": "str",
    "partitions": "int64",
}
WHAT_IF_TYPES: Mapping[str, str] = {
    "label": "str",
    **dict.fromkeys(GROUP_KEY, "str"),
    "scenario": "str",
    "consumer": "str",
    "consumers": "int64",
    "partitions": "int64",
    "moved_modulo": "int64",
    "moved_consistent": "int64",
    "spread_modulo": "int64",
    "spread_consistent": "int64",
    "ratio_modulo": "float64",
    "ratio_consistent": "float64",
}
RAW_WHAT_IF_COLUMNS = [c for c in WHAT_IF_TYPES if c != "label"]
OUTPUT_TYPES: Mapping[str, Mapping[str, str]] = {
    "groups": GROUP_TYPES,
    "partitions": PARTITION_TYPES,
    "imbalance": IMBALANCE_TYPES,
    "timeline": TIMELINE_TYPES,
    "what_if": WHAT_IF_TYPES,
}
OUTPUTS = tuple(OUTPUT_TYPES)


def label_of(parent_topic: str, subscription: str) -> str:
    """A group's label, `sub @ parent`, by `failover-assignment`'s rule."""
    return group_label(subscription, [(parent_topic, subscription)])


def typed(frame: pd.DataFrame, types: Mapping[str, str]) -> pd.DataFrame:
    """`frame` reduced to these columns, in this order, with these dtypes and a fresh index."""
    out = pd.DataFrame(index=range(len(frame)))
    for column, dtype in types.items():
        values = frame[column].reset_index(drop=True)
        if dtype == TIME:
            out[column] = pd.to_datetime(values, utc=True).astype(TIME)
        else:
            out[column] = values.astype(dtype)
    return out


def empty_output(name: str) -> pd.DataFrame:
    return typed(pd.DataFrame(columns=list(OUTPUT_TYPES[name])), OUTPUT_TYPES[name])


def with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    keys = zip(frame["parent_topic"], frame["subscription"], strict=True)
    labels = [label_of(p, s) for p, s in keys]
    return frame.assign(label=pd.Series(labels, index=frame.index, dtype="str"))


def with_times(frame: pd.DataFrame, times: Sequence[Any], **columns: str) -> pd.DataFrame:
    """Poll positions turned into collection times: `out=position column` pairs."""
    stamps = pd.Series(pd.to_datetime(list(times), utc=True))
    return frame.assign(
        **{
            out: stamps.reindex(frame[src].astype("int64").to_numpy()).to_numpy()
            for out, src in columns.items()
        }
    )


def partition_frame(raw: pd.DataFrame, times: Sequence[Any]) -> pd.DataFrame:
    """One row per partition of every group, the most changes first."""
    if raw.empty:
        return empty_output("partitions")
    shaped = with_times(with_labels(raw), times, first_seen="first", last_seen="last")
    shaped = shaped.sort_values(
        ["changes", "suspicious", "label", "topic"], ascending=[False, False, True, True]
    )
    return typed(shaped, PARTITION_TYPES)


def group_frame(raw: pd.DataFrame, partitions: pd.DataFrame, times: Sequence[Any]) -> pd.DataFrame:
    """One row per group, the worst imbalance first, with the flaps of its partitions."""
    if raw.empty:
        return empty_output("groups")
    flaps = partitions.groupby(GROUP_KEY, as_index=False).agg(
        partitions=("topic", "size"),
        changes=("changes", "sum"),
        suspicious=("suspicious", "sum"),
        flapping_partitions=("changes", lambda c: int((c > 0).sum())),
    )
    keyed = raw.astype(dict.fromkeys(GROUP_KEY, "str"))
    shaped = with_times(with_labels(keyed), times, first_seen="first", last_seen="last")
    shaped = shaped.merge(flaps, on=GROUP_KEY, how="left", validate="one_to_one")
    polls = shaped["polls"].astype("int64")
    shaped["balanced_share"] = (polls - shaped["polls_imbalanced"].astype("int64")) / polls
    shaped = shaped.sort_values(
        ["worst_spread", "worst_ratio", "suspicious", "changes", "label"],
        ascending=[False, False, False, False, True],
    )
    return typed(shaped, GROUP_TYPES)


def top_keys(groups: pd.DataFrame, top: int) -> pd.DataFrame:
    """The (parent_topic, subscription) of the `top` worst groups, whose timelines are kept."""
    return groups[GROUP_KEY].head(top).reset_index(drop=True).astype("str")


def imbalance_frame(raw: pd.DataFrame, times: Sequence[Any]) -> pd.DataFrame:
    if raw.empty:
        return empty_output("imbalance")
    shaped = with_times(with_labels(raw), times, collected_at="position")
    return typed(shaped.sort_values(["label", "collected_at"]), IMBALANCE_TYPES)


def timeline_frame(raw: pd.DataFrame, times: Sequence[Any]) -> pd.DataFrame:
    if raw.empty:
        return empty_output("timeline")
    shaped = with_times(with_labels(raw), times, collected_at="position")
    return typed(shaped.sort_values(["label", "collected_at", "consumer_name"]), TIMELINE_TYPES)


def what_if_frame(raw: pd.DataFrame) -> pd.DataFrame:
    if raw.empty:
        return empty_output("what_if")
    shaped = with_labels(raw).sort_values(["label", "scenario", "consumer"])
    return typed(shaped, WHAT_IF_TYPES)


def finish(
    groups: pd.DataFrame,
    partitions: pd.DataFrame,
    imbalance: pd.DataFrame,
    timeline: pd.DataFrame,
    what_if: pd.DataFrame,
    *,
    times: Sequence[Any],
) -> Result:
    """The result from the shaped groups and partitions and the raw top timelines and what-if."""
    frames = {
        "groups": groups,
        "partitions": partitions,
        "imbalance": imbalance_frame(imbalance, times),
        "timeline": timeline_frame(timeline, times),
        "what_if": what_if_frame(what_if),
    }
    return Result(frames=frames, summary=summarize(groups, partitions, polls=len(times)))


def empty_result(*, polls: int) -> Result:
    """The result of polls without any Failover subscription with consumers."""
    nothing = pd.DataFrame()
    result = finish(
        empty_output("groups"), empty_output("partitions"), nothing, nothing, nothing, times=[]
    )
    return Result(frames=result.frames, summary={**result.summary, "polls": polls})


def summarize(groups: pd.DataFrame, partitions: pd.DataFrame, *, polls: int) -> dict[str, Any]:
    """Small facts: counts, all flaps and the suspicious ones, the worst imbalance and group."""
    if groups.empty:
        return {
            "groups": 0,
            "polls": polls,
            "partitions": 0,
            "flaps": 0,
            "suspicious_flaps": 0,
            "worst_spread": 0,
            "worst_ratio": 0.0,
            "worst_group": "",
        }
    return {
        "groups": len(groups),
        "polls": polls,
        "partitions": len(partitions),
        "flaps": int(partitions["changes"].sum()),
        "suspicious_flaps": int(partitions["suspicious"].sum()),
        "worst_spread": int(groups["worst_spread"].max()),
        "worst_ratio": float(groups["worst_ratio"].max()),
        "worst_group": str(groups["label"].iloc[0]),
    }
