"""`failover-history`'s rule on pandas: the twin of the Spark plan, frame for frame.

The rows: every Failover subscription with consumers (`consumer_count > 0`, as
`failover-assignment` reads them) in each poll of the window, at its poll's position. Its
group is (parent partitioned topic, subscription): the parent is the `topics` table's
`partitioned_topic` for a partition (the topic itself otherwise); a poll that lists no row
for the topic falls back to the same rule on the name (`failover-assignment`'s `parent_of`).

Per group and poll, the consumers are those connected to any of its partitions (`consumers`)
and any consumer the stats name as active; each counts the partitions it is active on.
`spread` is the busiest minus the idlest consumer's count and `ratio` the busiest over the
fair share partitions / consumers (both 0 without consumers).

Per partition, a *change* is an active consumer that differs from the one seen at the
partition's previous poll with an active consumer; it is *suspicious* when the consumers
connected to the partition were the same at both polls (nobody joined or left, yet the
active consumer moved).

`pandas_frames` computes the whole result from pandas frames and `pandas_result` from a
store on disk (pyarrow and pandas only), for tests and the benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from pulsar_lens.api import Result, jvm_charset, partition_index
from pulsar_lens.plugins.builtin.failover_history.frames import (
    BALANCED_SPREAD,
    GROUP_KEY,
    PARTITION_KEY,
    RAW_GROUP_COLUMNS,
    RAW_IMBALANCE_COLUMNS,
    RAW_PARTITION_COLUMNS,
    RAW_TIMELINE_COLUMNS,
    RAW_WHAT_IF_COLUMNS,
    finish,
    group_frame,
    partition_frame,
    top_keys,
)
from pulsar_lens.plugins.builtin.failover_history.whatif import WHAT_IF_INPUT, what_if_group
from pulsar_lens.plugins.builtin.shared.failover import parent_of

ROW_COLUMNS = [
    "snapshot_id",
    "position",
    *PARTITION_KEY,
    "partition_index",
    "active",
]
SUB_KEY = ["snapshot_id", "topic", "subscription"]
POLL_KEY = [*GROUP_KEY, "position"]


def failover_rows(
    subscriptions: pd.DataFrame, topics: pd.DataFrame, snapshots: pd.DataFrame
) -> pd.DataFrame:
    """Failover subscriptions with consumers, one row per partition and poll (`ROW_COLUMNS`)."""
    position = {str(s): i for i, s in enumerate(snapshots["snapshot_id"])}
    subs = subscriptions[
        (subscriptions["type"] == "Failover") & (subscriptions["consumer_count"] > 0)
    ]
    subs = subs.assign(position=subs["snapshot_id"].astype(str).map(position))
    subs = subs.dropna(subset=["position"]).astype({"position": "int64"})
    listed = topics[["snapshot_id", "topic", "partitioned_topic", "partition_index"]]
    rows = subs.merge(listed.assign(listed=True), on=["snapshot_id", "topic"], how="left")
    known = rows["listed"].eq(True)
    parent = rows["partitioned_topic"].where(rows["partitioned_topic"].notna(), rows["topic"])
    names = rows.loc[~known, "topic"].astype(str)
    rows["parent_topic"] = parent.where(known, names.map(parent_of))
    rows["partition_index"] = rows["partition_index"].where(known, names.map(partition_index))
    rows = rows.rename(columns={"active_consumer_name": "active"})
    return rows[ROW_COLUMNS].astype({"partition_index": "int64"}).reset_index(drop=True)


def partition_stats(rows: pd.DataFrame, consumers: pd.DataFrame) -> pd.DataFrame:
    """Polls, first and last poll, changes, suspicious changes, last active, per partition."""
    if rows.empty:
        return pd.DataFrame(columns=RAW_PARTITION_COLUMNS)
    seen = rows.groupby(PARTITION_KEY, as_index=False).agg(
        partition_index=("partition_index", "max"),
        polls=("position", "size"),
        first=("position", "min"),
        last=("position", "max"),
    )
    observed = rows[rows["active"].notna()].merge(_member_sets(consumers), on=SUB_KEY, how="left")
    observed = observed.sort_values([*PARTITION_KEY, "position"]).reset_index(drop=True)
    members = [() if pd.isna(m) else m for m in observed["members"]]
    steps = observed.groupby(PARTITION_KEY, sort=False)
    before = steps["active"].shift()
    before_members = (
        pd.Series(members, dtype=object)
        .groupby([observed[c] for c in PARTITION_KEY], sort=False)
        .shift()
    )
    change = before.notna() & (before != observed["active"])
    same = pd.Series([a == b for a, b in zip(before_members, members, strict=True)])
    flips = observed.assign(change=change.astype("int64"), same=(change & same).astype("int64"))
    flaps = flips.groupby(PARTITION_KEY, as_index=False).agg(
        changes=("change", "sum"), suspicious=("same", "sum"), last_active=("active", "last")
    )
    out = seen.merge(flaps, on=PARTITION_KEY, how="left")
    out[["changes", "suspicious"]] = out[["changes", "suspicious"]].fillna(0).astype("int64")
    return out[RAW_PARTITION_COLUMNS]


def _member_sets(consumers: pd.DataFrame) -> pd.DataFrame:
    """(snapshot_id, topic, subscription) -> the sorted tuple of its consumers' names."""
    named = consumers[[*SUB_KEY, "consumer_name"]].drop_duplicates()
    named = named.sort_values([*SUB_KEY, "consumer_name"])
    sets = named.groupby(SUB_KEY, as_index=False)["consumer_name"].agg(tuple)
    return sets.rename(columns={"consumer_name": "members"})


def timeline(rows: pd.DataFrame, consumers: pd.DataFrame) -> pd.DataFrame:
    """Per group, poll and consumer (connected or active): partitions it is active on."""
    place = rows[["snapshot_id", "topic", "subscription", "parent_topic", "position"]]
    connected = consumers[[*SUB_KEY, "consumer_name"]].merge(place, on=SUB_KEY)
    active = rows.loc[rows["active"].notna(), [*POLL_KEY, "active"]]
    active = active.rename(columns={"active": "consumer_name"})
    members = pd.concat([connected[[*POLL_KEY, "consumer_name"]], active]).drop_duplicates()
    counts = active.groupby([*POLL_KEY, "consumer_name"], as_index=False).size()
    out = members.merge(counts, on=[*POLL_KEY, "consumer_name"], how="left")
    out["partitions"] = out["size"].fillna(0).astype("int64")
    return out[RAW_TIMELINE_COLUMNS].reset_index(drop=True)


def imbalance(rows: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """Per group and poll: partitions, consumers, busiest, idlest, spread and ratio."""
    parts = rows.groupby(POLL_KEY, as_index=False).agg(partitions=("topic", "size"))
    load = counts.groupby(POLL_KEY, as_index=False).agg(
        consumers=("partitions", "size"),
        max_partitions=("partitions", "max"),
        min_partitions=("partitions", "min"),
    )
    out = parts.merge(load, on=POLL_KEY, how="left")
    number = ["consumers", "max_partitions", "min_partitions"]
    out[number] = out[number].fillna(0).astype("int64")
    out["spread"] = out["max_partitions"] - out["min_partitions"]
    # failover-assignment's imbalance(): the busiest over the fair share, 0 without consumers
    fair = (out["max_partitions"] * out["consumers"]) / out["partitions"]
    out["ratio"] = fair.where(out["consumers"] > 0, 0.0).astype("float64")
    return out[RAW_IMBALANCE_COLUMNS]


def group_stats(per_poll: pd.DataFrame) -> pd.DataFrame:
    """Per group over its polls: first and last, most consumers, worst spread and ratio."""
    if per_poll.empty:
        return pd.DataFrame(columns=RAW_GROUP_COLUMNS)
    flagged = per_poll.assign(off=(per_poll["spread"] > BALANCED_SPREAD).astype("int64"))
    out = flagged.groupby(GROUP_KEY, as_index=False).agg(
        polls=("position", "size"),
        first=("position", "min"),
        last=("position", "max"),
        max_consumers=("consumers", "max"),
        worst_spread=("spread", "max"),
        worst_ratio=("ratio", "max"),
        polls_imbalanced=("off", "sum"),
    )
    return out[RAW_GROUP_COLUMNS]


def kept(frame: pd.DataFrame, keys: pd.DataFrame, *, since: int) -> pd.DataFrame:
    """Rows of the chosen groups from poll position `since` on."""
    return frame[frame["position"] >= since].merge(keys, on=GROUP_KEY)


def what_if(
    rows: pd.DataFrame, consumers: pd.DataFrame, *, newest: int, charset: str
) -> pd.DataFrame:
    """Every group of the newest poll through `what_if_group`."""
    latest = rows[rows["position"] == newest]
    named = consumers[[*SUB_KEY, "consumer_name"]]
    pairs = latest[[*SUB_KEY, "parent_topic"]].merge(named, on=SUB_KEY, how="left")
    parts = [
        what_if_group(group[WHAT_IF_INPUT], charset)
        for _, group in pairs.groupby(GROUP_KEY, sort=True)
    ]
    parts = [p for p in parts if not p.empty]
    return (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=RAW_WHAT_IF_COLUMNS)
    )


def pandas_frames(
    tables: dict[str, pd.DataFrame],
    snapshots: pd.DataFrame,
    *,
    top: int = 10,
    timeline_polls: int = 500,
    charset: str = "utf-8",
) -> Result:
    """The whole analysis on pandas: `tables` holds subscriptions, consumers and topics."""
    times = list(snapshots["collected_at"])
    rows = failover_rows(tables["subscriptions"], tables["topics"], snapshots)
    consumers = tables["consumers"]
    partitions = partition_frame(partition_stats(rows, consumers), times)
    counts = timeline(rows, consumers)
    per_poll = imbalance(rows, counts)
    groups = group_frame(group_stats(per_poll), partitions, times)
    keys = top_keys(groups, top)
    since = len(times) - timeline_polls
    return finish(
        groups,
        partitions,
        kept(per_poll, keys, since=since),
        kept(counts, keys, since=since),
        what_if(rows, consumers, newest=len(times) - 1, charset=charset),
        times=times,
    )


def pandas_result(
    store_root: str | os.PathLike[str],
    *,
    top: int = 10,
    timeline_polls: int = 500,
    charset: str = "",
) -> Result:
    """The whole analysis over every stored poll, read with pyarrow and pandas (no Spark)."""
    from pulsar_lens.core.store import Store

    store = Store(store_root)
    names: Sequence[str] = ("subscriptions", "consumers", "topics")
    tables = {n: store.read(n).to_pandas() for n in names}
    return pandas_frames(
        tables,
        store.snapshots(),
        top=top,
        timeline_polls=timeline_polls,
        charset=jvm_charset(charset),
    )
