"""`failover-history`'s Spark plan: the rule of `reference`, frame for frame, in few passes.

Where the time went in the first plan, and what this one does instead (the benchmark's store
of 6 h of a 10,000-topic cluster: 2.05 M Failover rows among 7.2 M subscription, 7.2 M
topic and 15.5 M consumer rows):

- the consumer rows were the bulk: all 15.5 M were shuffled three times (member sets,
  timeline, what-if) to meet 2 M Failover rows. Now the topic and consumer rows are cut
  down to the Failover (topic, subscription) pairs before anything is shuffled, and each
  partition's poll gets its consumers once, as the sorted set `members` (and `nameless`: a
  consumer row without a name, which still counts as a consumer);
- joins and sorts compared strings. Polls are joined by their `position` (a long) through
  the small broadcast index, not by the 71-character `snapshot_id`, and the pairs are
  numbered on the driver (`pair_id`, `sub_id`): the rows carry numbers, the small frames
  read back get their names again (`_named`);
- every aggregate was its own shuffle. The rows are hash-partitioned by group
  (`parent_topic`, `sub_id`) and cached, so the per-partition window and the per-poll and
  per-group aggregates run inside Spark partitions; per poll, consumers and partitions come
  from one aggregate (`_tallies`), with no join;
- the what-if reads the newest poll's rows from that cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from pulsar_lens.api import Result, SparkInputs, partition_index
from pulsar_lens.plugins.builtin.failover_history.frames import (
    BALANCED_SPREAD,
    GROUP_KEY,
    RAW_GROUP_COLUMNS,
    RAW_IMBALANCE_COLUMNS,
    RAW_PARTITION_COLUMNS,
    RAW_TIMELINE_COLUMNS,
    RAW_WHAT_IF_COLUMNS,
    empty_result,
    finish,
    group_frame,
    partition_frame,
    top_keys,
)
from pulsar_lens.plugins.builtin.failover_history.whatif import (
    WHAT_IF_INPUT,
    WHAT_IF_SCHEMA,
    what_if_group,
)
from pulsar_lens.plugins.builtin.shared.failover import parent_of

PAIR_KEY = ["topic", "subscription"]
GROUP_IDS = ["parent_topic", "sub_id"]
PARTITION_IDS = [*GROUP_IDS, "pair_id"]
POLL_IDS = [*GROUP_IDS, "position"]
ROW_IDS = ["position", "pair_id"]
NUMBERS_SCHEMA = (
    "pair_id long, topic string, subscription string, sub_id long, name_parent string, "
    "name_index long"
)


def spark_result(data: SparkInputs, *, top: int, timeline_polls: int, charset: str) -> Result:
    """The whole analysis: counts in Spark, the small frames shaped by `frames`."""
    times = list(data.snapshots["collected_at"])
    if not times:
        return empty_result(polls=0)
    found = _failover(data.history("subscriptions")).select(*PAIR_KEY).distinct().toPandas()
    numbers = _numbered(found)
    rows = _rows(data, numbers).cache()
    per_poll: Any = None
    try:
        raw_partitions = _named(_partition_stats(rows), numbers, RAW_PARTITION_COLUMNS)
        if raw_partitions.empty:  # no Failover row in a poll of the window
            return empty_result(polls=len(times))
        partitions = partition_frame(raw_partitions, times)
        tallies = _tallies(rows)  # read twice, each time from the cached rows
        per_poll = _imbalance(tallies).cache()
        raw_groups = _named(_group_stats(per_poll), numbers, RAW_GROUP_COLUMNS)
        groups = group_frame(raw_groups, partitions, times)
        since = len(times) - timeline_polls
        keys = top_keys(groups, top)
        imbalance, timeline = _kept(per_poll, _counts(tallies), keys, since, numbers)
        what_if = _what_if(rows, numbers, len(times) - 1, charset)
    finally:
        for frame in (rows, per_poll):
            if frame is not None:
                frame.unpersist()
    return finish(groups, partitions, imbalance, timeline, what_if, times=times)


def _numbered(found: pd.DataFrame) -> pd.DataFrame:
    """The Failover (topic, subscription) pairs numbered (`pair_id`), their subscriptions
    numbered (`sub_id`), and each topic's parent and index by the name rule (for polls that
    list no row of it). A pair with a null name matches no topic or consumer row and no pair
    in `NUMBERS_SCHEMA`: its rows drop out (a broker names every topic and subscription)."""
    pairs = found.dropna().astype(str).sort_values(PAIR_KEY).reset_index(drop=True)
    subs = {name: i for i, name in enumerate(sorted(set(pairs["subscription"])))}
    return pairs.assign(
        pair_id=range(len(pairs)),
        sub_id=pairs["subscription"].map(subs).astype("int64"),
        name_parent=[parent_of(t) for t in pairs["topic"]],
        name_index=[partition_index(t) for t in pairs["topic"]],
    )[["pair_id", "topic", "subscription", "sub_id", "name_parent", "name_index"]]


def _named(frame: Any, numbers: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A small Spark frame keyed by `sub_id` (and `pair_id`) read back with the names of
    those numbers, as `columns`."""
    out = frame.toPandas()
    subs = numbers[["sub_id", "subscription"]].drop_duplicates("sub_id")
    if "pair_id" in out.columns:
        out = out.merge(numbers[["pair_id", "topic"]], on="pair_id", how="left")
    return out.merge(subs, on="sub_id", how="left")[columns]


def _positioned(frame: Any, snapshots: pd.DataFrame, *columns: Any) -> Any:
    """`frame`'s `columns` with each row's poll `position` in place of its snapshot id (rows
    of polls outside the window's index drop out): a broadcast join, nothing shuffled."""
    from pyspark.sql import functions as F

    index = pd.DataFrame(
        {
            "snapshot_id": snapshots["snapshot_id"].astype(str).to_numpy(),
            "position": range(len(snapshots)),
        }
    )
    positions = frame.sparkSession.createDataFrame(index, "snapshot_id string, position long")
    return frame.join(F.broadcast(positions), "snapshot_id").select("position", *columns)


def _failover(subscriptions: Any) -> Any:
    """Failover subscriptions with consumers."""
    from pyspark.sql import functions as F

    failover = (F.col("type") == "Failover") & (F.col("consumer_count") > 0)
    return subscriptions.filter(failover)


def _rows(data: SparkInputs, numbers: pd.DataFrame) -> Any:
    """One row per partition and poll, by number: the group's parent from `topics` (else by
    the name rule), the partition's index, its active consumer and its connected consumers,
    hash-partitioned by group. Each input is shuffled once, by (position, pair_id): a topic
    row is one row per Failover pair of its topic."""
    from pyspark.sql import functions as F

    named = data.history("topics").sparkSession.createDataFrame(numbers, NUMBERS_SCHEMA)
    pairs = named.select(*PAIR_KEY, "pair_id")
    failover = _failover(data.history("subscriptions")).join(F.broadcast(pairs), PAIR_KEY)
    active = F.col("active_consumer_name").alias("active")
    subs = _positioned(failover, data.snapshots, "pair_id", active)
    topics = data.history("topics").join(F.broadcast(pairs.drop("subscription")), "topic")
    listed = _positioned(topics, data.snapshots, "pair_id", "partitioned_topic", "partition_index")
    joined = (
        subs.join(listed.withColumn("listed", F.lit(True)), ROW_IDS, "left")
        .join(_member_sets(data, pairs), ROW_IDS, "left")
        .join(F.broadcast(named.drop("subscription")), "pair_id")
    )
    return _with_parent(joined).repartition(*GROUP_IDS)


def _member_sets(data: SparkInputs, pairs: Any) -> Any:
    """(position, pair_id) -> its consumers' sorted names, and whether a consumer row of it
    has no name."""
    from pyspark.sql import functions as F

    consumers = data.history("consumers").join(F.broadcast(pairs), PAIR_KEY)
    named = _positioned(consumers, data.snapshots, "pair_id", "consumer_name")
    return named.groupBy(*ROW_IDS).agg(
        F.sort_array(F.collect_set("consumer_name")).alias("members"),
        F.max(F.col("consumer_name").isNull()).alias("nameless"),
    )


def _with_parent(joined: Any) -> Any:
    """The parent topic and partition index from the poll's `topics` row where it has one,
    else by the name rule; `members` empty and `nameless` false without consumer rows."""
    from pyspark.sql import functions as F

    listed = F.col("listed").isNotNull()
    return joined.select(
        "position",
        F.when(listed, F.coalesce("partitioned_topic", "topic"))
        .otherwise(F.col("name_parent"))
        .alias("parent_topic"),
        "sub_id",
        "pair_id",
        F.when(listed, F.col("partition_index"))
        .otherwise(F.col("name_index"))
        .cast("long")
        .alias("partition_index"),
        "active",
        F.coalesce(F.col("members"), F.array().cast("array<string>")).alias("members"),
        F.coalesce(F.col("nameless"), F.lit(False)).alias("nameless"),
    )


def _partition_stats(rows: Any) -> Any:
    """Per partition: polls, first and last, changes of active consumer, suspicious ones."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    seen = rows.groupBy(*PARTITION_IDS).agg(
        F.max("partition_index").alias("partition_index"),
        F.count("*").alias("polls"),
        F.min("position").alias("first"),
        F.max("position").alias("last"),
    )
    observed = rows.filter(F.col("active").isNotNull())
    order = Window.partitionBy(*PARTITION_IDS).orderBy("position")
    before = F.lag("active").over(order)
    change = before.isNotNull() & (before != F.col("active"))
    same = F.lag("members").over(order) == F.col("members")
    flips = observed.select(
        *PARTITION_IDS,
        "position",
        "active",
        change.cast("long").alias("change"),
        (change & same).cast("long").alias("same"),
    )
    flaps = flips.groupBy(*PARTITION_IDS).agg(
        F.sum("change").alias("changes"),
        F.sum("same").alias("suspicious"),
        F.max_by("active", "position").alias("last_active"),
    )
    return seen.join(flaps, PARTITION_IDS, "left").fillna(0, ["changes", "suspicious"])


def _tallies(rows: Any) -> Any:
    """Per group, poll and name: partitions it is active on (`partitions`), rows (`rows`),
    and whether the name is a consumer's (connected or active).

    Each row gives every member an entry (0 partitions), a nameless consumer one (0) and its
    active consumer one (1 partition, 1 row); a row without an active consumer gives a row
    entry that is no consumer's. Summed per name, that is the timeline; summed per poll,
    the poll's partitions, and its consumers are the consumer entries."""
    from pyspark.sql import functions as F

    def entry(name: Any, consumer: bool, hit: int) -> Any:
        return F.struct(
            name.cast("string").alias("consumer_name"),
            F.lit(consumer).alias("consumer"),
            F.lit(hit).alias("hit"),
        )

    none = F.array().cast("array<struct<consumer_name:string,consumer:boolean,hit:int>>")
    members = F.transform("members", lambda name: entry(name, True, 0))
    nameless = F.when(F.col("nameless"), F.array(entry(F.lit(None), True, 0))).otherwise(none)
    active = F.when(F.col("active").isNotNull(), F.array(entry(F.col("active"), True, 1)))
    entries = F.concat(members, nameless, active.otherwise(F.array(entry(F.lit(None), False, 1))))
    named = rows.select(*POLL_IDS, F.explode(entries).alias("entry"))
    return named.groupBy(*POLL_IDS, "entry.consumer_name", "entry.consumer").agg(
        F.sum(F.when(F.col("entry.consumer"), F.col("entry.hit"))).cast("long").alias("partitions"),
        F.sum("entry.hit").cast("long").alias("rows"),
    )


def _counts(tallies: Any) -> Any:
    """Per group, poll and consumer (connected or active): partitions it is active on."""
    from pyspark.sql import functions as F

    return tallies.filter(F.col("consumer")).select(*POLL_IDS, "consumer_name", "partitions")


def _imbalance(tallies: Any) -> Any:
    """Per group and poll: partitions, consumers, busiest, idlest, spread and ratio."""
    from pyspark.sql import functions as F

    consumer = F.col("consumer")
    out = tallies.groupBy(*POLL_IDS).agg(
        F.sum("rows").alias("partitions"),
        F.count(F.when(consumer, True)).alias("consumers"),
        F.coalesce(F.max(F.when(consumer, F.col("partitions"))), F.lit(0)).alias("max_partitions"),
        F.coalesce(F.min(F.when(consumer, F.col("partitions"))), F.lit(0)).alias("min_partitions"),
    )
    fair = (F.col("max_partitions") * F.col("consumers")).cast("double") / F.col("partitions")
    return out.select(
        *POLL_IDS,
        "partitions",
        "consumers",
        "max_partitions",
        "min_partitions",
        (F.col("max_partitions") - F.col("min_partitions")).alias("spread"),
        F.when(F.col("consumers") > 0, fair).otherwise(F.lit(0.0)).alias("ratio"),
    )


def _group_stats(per_poll: Any) -> Any:
    from pyspark.sql import functions as F

    return per_poll.groupBy(*GROUP_IDS).agg(
        F.count("*").alias("polls"),
        F.min("position").alias("first"),
        F.max("position").alias("last"),
        F.max("consumers").alias("max_consumers"),
        F.max("spread").alias("worst_spread"),
        F.max("ratio").alias("worst_ratio"),
        F.sum((F.col("spread") > BALANCED_SPREAD).cast("long")).alias("polls_imbalanced"),
    )


def _kept(
    per_poll: Any, counts: Any, keys: pd.DataFrame, since: int, numbers: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Imbalance and timeline rows of the chosen groups from poll position `since` on, read
    back in one job (each poll's row beside its consumers' counts)."""
    from pyspark.sql import functions as F

    if keys.empty:
        return pd.DataFrame(columns=RAW_IMBALANCE_COLUMNS), pd.DataFrame(
            columns=RAW_TIMELINE_COLUMNS
        )
    subs = dict(zip(numbers["subscription"], numbers["sub_id"], strict=True))
    chosen = keys.assign(sub_id=keys["subscription"].map(subs))[GROUP_IDS]
    chosen = per_poll.sparkSession.createDataFrame(chosen, "parent_topic string, sub_id long")
    recent = per_poll.filter(F.col("position") >= since).join(F.broadcast(chosen), GROUP_IDS)
    tally = counts.withColumnRenamed("partitions", "active_partitions")
    columns = [*RAW_IMBALANCE_COLUMNS, "consumer_name", "active_partitions"]
    both = _named(recent.join(tally, POLL_IDS, "left"), numbers, columns)
    imbalance = both.drop_duplicates(["parent_topic", "subscription", "position"])
    named = both[both["consumer_name"].notna()]
    timeline = named.drop(columns="partitions").rename(columns={"active_partitions": "partitions"})
    return imbalance[RAW_IMBALANCE_COLUMNS], timeline[RAW_TIMELINE_COLUMNS]


def _what_if(rows: Any, numbers: pd.DataFrame, newest: int, charset: str) -> pd.DataFrame:
    """Every group of the newest poll through `what_if_group`, one group per pandas call: a
    row per partition and connected consumer (one without a name for a partition with none)."""
    from pyspark.sql import functions as F

    names = rows.sparkSession.createDataFrame(numbers, NUMBERS_SCHEMA).select("pair_id", *PAIR_KEY)
    latest = rows.filter(F.col("position") == newest).select(
        "parent_topic", "pair_id", F.explode_outer("members").alias("consumer_name")
    )
    pairs = latest.join(F.broadcast(names), "pair_id").select(*WHAT_IF_INPUT)
    scenarios = pairs.groupBy(*GROUP_KEY).applyInPandas(_scenarios(charset), WHAT_IF_SCHEMA)
    return scenarios.select(*RAW_WHAT_IF_COLUMNS).toPandas()


def _scenarios(charset: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """`what_if_group` with the charset bound, as a plain function for `applyInPandas`."""

    def scenarios(rows: pd.DataFrame) -> pd.DataFrame:
        return what_if_group(rows, charset)

    return scenarios
