"""`key-distribution` (Spark): where the sampled keys of every Key_Shared subscription went.

Over every stored poll, each sampled key is counted for the consumer whose reported hash
ranges contained its hash in that poll (`reference` states the rule and the result): messages
per hash and per consumer, hot keys, skew, the what-if over consumer count and replica points
on the real hashes, and the sticky-range planner re-scored on them. Spark does the counting
(the STICKY hash of each key through Arrow batches, the range join, the aggregations); the
small count frames then go through the same `finish` as the pandas twin.
"""

from __future__ import annotations

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
)
from plugins.builtin.key_distribution.reference import (
    UNASSIGNED,
    finish,
    label_of,
    select,
)
from plugins.builtin.key_distribution.views import render_views


class KeyDistribution(AnalysisPlugin):
    name = "key-distribution"
    title = "Key distribution"
    description = (
        "Sampled messages per hash and per consumer of every Key_Shared subscription under the "
        "ranges in force when they were sampled: hot keys, skew, what-if over consumer count "
        "and replica points, and the sticky-range planner scored on the real keys."
    )
    version = "1.0"
    engine = "spark"
    inputs = ("key_samples", "consumers", "subscriptions")
    history = HISTORY_ALL
    outputs = ("consumers", "skew", "hot_keys", "hash_bins", "what_if", "sticky_plan")
    page = Page(
        title="Key distribution",
        icon=":material/key:",
        caption="Sampled keys per consumer of every Key_Shared subscription, from a Spark job.",
        controls=("subscription",),
        url_path="key-distribution",
        order=15,
    )

    class Params(BaseModel):
        subscription: str = Field("", description="Subscription to draw; empty: the most skewed")
        top_keys: int = Field(20, ge=1, le=1000, description="Hot keys listed per subscription")
        points_low: int = Field(20, ge=1, le=1024, description="What-if: fewest replica points")
        points_high: int = Field(400, ge=1, le=1024, description="What-if: most replica points")

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        frames, members = spark_counts(data)
        points = sorted({params.points_low, 100, params.points_high})
        result = finish(frames, members, top_keys=params.top_keys, what_if_points=points)
        return select(result, params.subscription)

    def render(self, result: Result) -> list[View]:
        return render_views(result)

    def param_choices(self, data: Any) -> dict[str, list[str]]:
        subs = data.history("subscriptions")
        rows = subs.filter(subs["type"] == "Key_Shared").select("topic", "subscription")
        labels = {label_of(r["topic"], r["subscription"]) for r in rows.distinct().collect()}
        return {"subscription": ["", *sorted(labels)]}


def spark_counts(data: SparkInputs) -> tuple[dict[str, pd.DataFrame], dict[str, list[str]]]:
    """The three count frames and each subscription's newest consumers, counted in Spark."""
    from pyspark.sql import functions as F

    from plugins.spark.hashing import with_sticky_hash

    subscriptions = data.history("subscriptions")
    subs = subscriptions.filter(F.col("type") == "Key_Shared").select(
        "snapshot_id",
        "topic",
        "subscription",
        F.concat_ws(" | ", "topic", "subscription").alias("label"),
        F.when(F.col("key_shared_mode") == "STICKY", "sticky")
        .otherwise("consistent")
        .alias("selector"),
    )
    samples = with_sticky_hash(
        data.history("key_samples").select("snapshot_id", "topic", "key", "sticky_hash"),
        "key",
        out="sticky_mode_hash",
        selector="sticky",
    )
    rows = samples.join(subs, ["snapshot_id", "topic"]).select(
        F.monotonically_increasing_id().alias("row"),
        "snapshot_id",
        "topic",
        "subscription",
        "label",
        "key",
        F.when(F.col("selector") == "sticky", F.col("sticky_mode_hash"))
        .otherwise(F.col("sticky_hash"))
        .cast("long")
        .alias("hash"),
    )
    consumers = data.history("consumers")
    ranges = consumers.select(
        "snapshot_id",
        "topic",
        "subscription",
        "consumer_name",
        F.explode("hash_ranges").alias("range"),
    ).select(
        "snapshot_id",
        "topic",
        "subscription",
        "consumer_name",
        F.col("range.start").cast("long").alias("start"),
        F.col("range.end").cast("long").alias("end"),
    )
    inside = (rows["hash"] >= ranges["start"]) & (rows["hash"] <= ranges["end"])
    keys = ["snapshot_id", "topic", "subscription"]
    owned = rows.join(ranges, [rows[k] == ranges[k] for k in keys] + [inside], "left").select(
        rows["row"], rows["label"], rows["key"], rows["hash"], ranges["consumer_name"]
    )
    # Ranges never overlap: a row meets at most one; min() keeps one row per sample anyway.
    assigned = owned.groupBy("row", "label", "key", "hash").agg(
        F.coalesce(F.min("consumer_name"), F.lit(UNASSIGNED)).alias("consumer_name")
    )
    assigned = assigned.cache()
    try:
        frames = {
            "hashes": _counted(assigned, ["label", "hash"]),
            "consumers": _counted(assigned, ["label", "consumer_name"]),
            "keys": _counted(assigned, ["label", "key", "hash", "consumer_name"]),
        }
    finally:
        assigned.unpersist()
    return frames, _newest_members(consumers, subs)


def _counted(frame: Any, by: list[str]) -> pd.DataFrame:
    counted = frame.groupBy(*by).count().withColumnRenamed("count", "messages").toPandas()
    counted["messages"] = counted["messages"].astype("int64")
    return counted.sort_values(by).reset_index(drop=True)


def _newest_members(consumers: Any, subs: Any) -> dict[str, list[str]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    joined = consumers.join(subs, ["snapshot_id", "topic", "subscription"])
    newest = F.max("collected_at").over(Window.partitionBy("label"))
    rows = (
        joined.withColumn("newest", newest)
        .filter(F.col("collected_at") == F.col("newest"))
        .select("label", "consumer_name")
        .collect()
    )
    members: dict[str, list[str]] = {}
    for row in rows:
        members.setdefault(str(row["label"]), []).append(str(row["consumer_name"]))
    return {label: sorted(names) for label, names in members.items()}
