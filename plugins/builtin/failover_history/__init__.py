"""`failover-history` (Spark): every Failover subscription over the whole stored history.

A *group* is (parent partitioned topic or the topic itself, subscription), labelled
`sub @ parent` as `failover-assignment` labels it. Over every stored poll, per group:

- `timeline`: the partitions each consumer is active on, poll by poll (the worst `top`
  groups, newest `timeline_polls` polls);
- `imbalance`: busiest minus idlest consumer (`spread`) and busiest over the fair share
  (`ratio`), poll by poll (same groups and polls); `groups` sums it up for every group:
  worst spread and ratio, polls imbalanced (spread over 1), share of polls balanced;
- `partitions`: how often each partition's active consumer changed between polls, and how
  many of those changes came while its connected consumers stayed the same (suspicious),
  the most changes first; `groups` adds them up;
- `what_if`: at the newest poll, what one consumer leaving or joining would move and how
  balanced the group would be, under modulo and under PIP-392 consistent hashing, by the
  broker's own picker (`whatif`).

`reference` states the rule on pandas and the tests prove that both engines give the same
frames. The counting runs in Spark; the what-if runs per group through `applyInPandas`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from plugins.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    BaseModel,
    Field,
    Page,
    Result,
    SparkInputs,
    View,
    jvm_charset,
    partition_index,
)
from plugins.builtin.failover_assignment import parent_of
from plugins.builtin.failover_history.frames import (
    BALANCED_SPREAD,
    GROUP_KEY,
    OUTPUTS,
    PARTITION_KEY,
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
from plugins.builtin.failover_history.reference import POLL_KEY, SUB_KEY
from plugins.builtin.failover_history.views import render_views
from plugins.builtin.failover_history.whatif import WHAT_IF_INPUT, WHAT_IF_SCHEMA, what_if_group


class FailoverHistory(AnalysisPlugin):
    name = "failover-history"
    title = "Failover history"
    description = (
        "Every Failover subscription over the whole stored history: partitions per active "
        "consumer over time, imbalance, flapping (and the flaps no consumer change explains), "
        "and what one consumer leaving or joining would move under modulo and PIP-392."
    )
    version = "0.1"
    engine = "spark"
    inputs = ("subscriptions", "consumers", "topics")
    history = HISTORY_ALL
    outputs = OUTPUTS
    page = Page(
        title="Failover history",
        icon=":material/history:",
        caption="Active consumers, imbalance and flapping of every Failover group over the "
        "stored history, and the PIP-392 what-if, from a Spark job.",
        url_path="failover-history",
        order=35,
    )

    class Params(BaseModel):
        top: int = Field(
            10, ge=1, le=100, description="Groups whose timelines are kept, the worst first"
        )
        timeline_polls: int = Field(
            500, ge=1, le=100_000, description="Newest polls kept in those timelines"
        )
        jvm_charset: str = Field(
            "",
            description="How the broker's JVM encodes consumer names (UTF-8 or US-ASCII); "
            "empty: PULSAR_LENS_JVM_CHARSET, else UTF-8",
        )

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        return spark_result(
            data,
            top=params.top,
            timeline_polls=params.timeline_polls,
            charset=jvm_charset(params.jvm_charset),
        )

    def render(self, result: Result) -> list[View]:
        return render_views(result)


def spark_result(data: SparkInputs, *, top: int, timeline_polls: int, charset: str) -> Result:
    """The whole analysis: counts in Spark, the small frames shaped by `frames`."""
    from pyspark.sql import functions as F

    times = list(data.snapshots["collected_at"])
    if not times:
        return empty_result(polls=0)
    joined = _joined(data).cache()
    counts: Any = None
    per_poll: Any = None
    try:
        found = joined.agg(
            F.count("*").alias("rows"),
            F.collect_set(F.when(F.col("listed").isNull(), F.col("topic"))).alias("unlisted"),
        ).first()
        if not found["rows"]:
            return empty_result(polls=len(times))
        rows = _rows(joined, sorted(map(str, found["unlisted"])))
        consumers = data.history("consumers").select(*SUB_KEY, "consumer_name")
        raw_partitions = _frame(_partition_stats(rows, consumers), RAW_PARTITION_COLUMNS)
        partitions = partition_frame(raw_partitions, times)
        counts = _timeline(rows, consumers).cache()
        per_poll = _imbalance(rows, counts).cache()
        raw_groups = _frame(_group_stats(per_poll), RAW_GROUP_COLUMNS)
        groups = group_frame(raw_groups, partitions, times)
        since = len(times) - timeline_polls
        imbalance, timeline = _kept(per_poll, counts, top_keys(groups, top), since)
        what_if = _frame(_what_if(rows, consumers, len(times) - 1, charset), RAW_WHAT_IF_COLUMNS)
    finally:
        for frame in (joined, counts, per_poll):
            if frame is not None:
                frame.unpersist()
    return finish(groups, partitions, imbalance, timeline, what_if, times=times)


def _frame(frame: Any, columns: list[str]) -> pd.DataFrame:
    return frame.select(*columns).toPandas()


def _joined(data: SparkInputs) -> Any:
    """Failover subscriptions with consumers, at their poll's position, beside their topic row."""
    from pyspark.sql import functions as F

    subs = data.history("subscriptions")
    index = pd.DataFrame(
        {
            "snapshot_id": data.snapshots["snapshot_id"].astype(str).to_numpy(),
            "position": range(len(data.snapshots)),
        }
    )
    positions = subs.sparkSession.createDataFrame(index, "snapshot_id string, position long")
    failover = subs.filter((F.col("type") == "Failover") & (F.col("consumer_count") > 0))
    failover = failover.join(F.broadcast(positions), "snapshot_id")
    topics = data.history("topics").select(
        "snapshot_id", "topic", "partitioned_topic", "partition_index", F.lit(True).alias("listed")
    )
    return failover.join(topics, ["snapshot_id", "topic"], "left")


def _rows(joined: Any, names: list[str]) -> Any:
    """One row per partition and poll: the group's parent from `topics`, else by the name rule
    over the `names` of topics some poll lists no row of."""
    from pyspark.sql import functions as F

    by_name = pd.DataFrame(
        {
            "topic": names,
            "name_parent": [parent_of(n) for n in names],
            "name_index": [partition_index(n) for n in names],
        }
    )
    schema = "topic string, name_parent string, name_index long"
    named = joined.sparkSession.createDataFrame(by_name, schema)
    rows = joined.join(F.broadcast(named), "topic", "left")
    listed = F.col("listed").isNotNull()
    return rows.select(
        "snapshot_id",
        "position",
        F.when(listed, F.coalesce("partitioned_topic", "topic"))
        .otherwise(F.col("name_parent"))
        .alias("parent_topic"),
        "subscription",
        "topic",
        F.when(listed, F.col("partition_index"))
        .otherwise(F.col("name_index"))
        .cast("long")
        .alias("partition_index"),
        F.col("active_consumer_name").alias("active"),
    )


def _partition_stats(rows: Any, consumers: Any) -> Any:
    """Per partition: polls, first and last, changes of active consumer, suspicious ones."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    seen = rows.groupBy(*PARTITION_KEY).agg(
        F.max("partition_index").alias("partition_index"),
        F.count("*").alias("polls"),
        F.min("position").alias("first"),
        F.max("position").alias("last"),
    )
    sets = consumers.groupBy(*SUB_KEY).agg(
        F.sort_array(F.collect_set("consumer_name")).alias("members")
    )
    observed = rows.filter(F.col("active").isNotNull()).join(sets, SUB_KEY, "left")
    members = F.coalesce(F.col("members"), F.array().cast("array<string>"))
    order = Window.partitionBy(*PARTITION_KEY).orderBy("position")
    before = F.lag("active").over(order)
    change = before.isNotNull() & (before != F.col("active"))
    same = F.lag(members).over(order) == members
    flips = observed.select(
        *PARTITION_KEY,
        "position",
        "active",
        change.cast("long").alias("change"),
        (change & same).cast("long").alias("same"),
    )
    flaps = flips.groupBy(*PARTITION_KEY).agg(
        F.sum("change").alias("changes"),
        F.sum("same").alias("suspicious"),
        F.max_by("active", "position").alias("last_active"),
    )
    return seen.join(flaps, PARTITION_KEY, "left").fillna(0, ["changes", "suspicious"])


def _timeline(rows: Any, consumers: Any) -> Any:
    """Per group, poll and consumer (connected or active): partitions it is active on."""
    from pyspark.sql import functions as F

    place = rows.select(*SUB_KEY, "parent_topic", "position")
    connected = consumers.join(place, SUB_KEY).select(*POLL_KEY, "consumer_name")
    active = rows.filter(F.col("active").isNotNull()).select(
        *POLL_KEY, F.col("active").alias("consumer_name")
    )
    members = connected.unionByName(active).distinct()
    tally = active.groupBy(*POLL_KEY, "consumer_name").agg(F.count("*").alias("active"))
    return members.join(tally, [*POLL_KEY, "consumer_name"], "left").select(
        *POLL_KEY,
        "consumer_name",
        F.coalesce(F.col("active"), F.lit(0)).cast("long").alias("partitions"),
    )


def _imbalance(rows: Any, counts: Any) -> Any:
    """Per group and poll: partitions, consumers, busiest, idlest, spread and ratio."""
    from pyspark.sql import functions as F

    parts = rows.groupBy(*POLL_KEY).agg(F.count("*").alias("partitions"))
    load = counts.groupBy(*POLL_KEY).agg(
        F.count("*").alias("consumers"),
        F.max("partitions").alias("max_partitions"),
        F.min("partitions").alias("min_partitions"),
    )
    number = ["consumers", "max_partitions", "min_partitions"]
    out = parts.join(load, POLL_KEY, "left").fillna(0, number)
    fair = (F.col("max_partitions") * F.col("consumers")).cast("double") / F.col("partitions")
    return out.select(
        *POLL_KEY,
        "partitions",
        *number,
        (F.col("max_partitions") - F.col("min_partitions")).alias("spread"),
        F.when(F.col("consumers") > 0, fair).otherwise(F.lit(0.0)).alias("ratio"),
    )


def _group_stats(per_poll: Any) -> Any:
    from pyspark.sql import functions as F

    return per_poll.groupBy(*GROUP_KEY).agg(
        F.count("*").alias("polls"),
        F.min("position").alias("first"),
        F.max("position").alias("last"),
        F.max("consumers").alias("max_consumers"),
        F.max("spread").alias("worst_spread"),
        F.max("ratio").alias("worst_ratio"),
        F.sum((F.col("spread") > BALANCED_SPREAD).cast("long")).alias("polls_imbalanced"),
    )


def _kept(
    per_poll: Any, counts: Any, keys: pd.DataFrame, since: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Imbalance and timeline rows of the chosen groups from poll position `since` on, read
    back in one job (each poll's row beside its consumers' counts)."""
    from pyspark.sql import functions as F

    if keys.empty:
        return pd.DataFrame(columns=RAW_IMBALANCE_COLUMNS), pd.DataFrame(
            columns=RAW_TIMELINE_COLUMNS
        )
    chosen = per_poll.sparkSession.createDataFrame(keys, "parent_topic string, subscription string")
    recent = per_poll.filter(F.col("position") >= since).join(F.broadcast(chosen), GROUP_KEY)
    tally = counts.withColumnRenamed("partitions", "active_partitions")
    both = recent.join(tally, POLL_KEY, "left").toPandas()
    imbalance = both.drop_duplicates(POLL_KEY)[RAW_IMBALANCE_COLUMNS]
    named = both[both["consumer_name"].notna()]
    timeline = named.drop(columns="partitions").rename(columns={"active_partitions": "partitions"})
    return imbalance, timeline[RAW_TIMELINE_COLUMNS]


def _what_if(rows: Any, consumers: Any, newest: int, charset: str) -> Any:
    """Every group of the newest poll through `what_if_group`, one group per pandas call."""
    from pyspark.sql import functions as F

    latest = rows.filter(F.col("position") == newest).select(*SUB_KEY, "parent_topic")
    pairs = latest.join(consumers, SUB_KEY, "left").select(*WHAT_IF_INPUT)
    return pairs.groupBy(*GROUP_KEY).applyInPandas(_scenarios(charset), schema=WHAT_IF_SCHEMA)


def _scenarios(charset: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """`what_if_group` with the charset bound, as a plain function for `applyInPandas`."""

    def scenarios(rows: pd.DataFrame) -> pd.DataFrame:
        return what_if_group(rows, charset)

    return scenarios
