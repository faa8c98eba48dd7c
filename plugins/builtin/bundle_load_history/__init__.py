"""`bundle-load-history` (Spark): every bundle's load over the stored history, the hot ones,
the moves the load manager made, and the unloads and splits that would even the brokers out.

The rule is in `reference` (pandas), which also ranks the candidates for both engines: Spark
computes the per-poll bundle loads, the per-bundle statistics, the bucketed timeline of the
hottest bundles and the moves; the newest poll's bundles and topics come back as small frames.
"""

from __future__ import annotations

from typing import Any, Literal

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
from plugins.builtin.bundle_load_history.reference import (
    HOT_COLUMNS,
    LOADS,
    MOVE_COLUMNS,
    TIMELINE_COLUMNS,
    bucket_seconds,
    finish,
)
from plugins.builtin.bundle_load_history.views import render_views


class BundleLoadHistory(AnalysisPlugin):
    name = "bundle-load-history"
    title = "Bundle load history"
    description = (
        "Per bundle over the whole stored history: topics, message rates, throughput and owner; "
        "the hot bundles; the moves the load manager made; and the unloads and splits that "
        "would even the brokers' load, ranked by how much they would."
    )
    version = "1.0"
    engine = "spark"
    inputs = ("bundles", "topics", "events")
    history = HISTORY_ALL
    outputs = ("hot", "timeline", "moves", "brokers", "candidates")
    page = Page(
        title="Bundle load history",
        icon=":material/stacked_line_chart:",
        caption="Bundles' load over the stored polls and what would balance it, from a Spark job.",
        controls=("metric",),
        url_path="bundle-history",
        order=45,
    )

    class Params(BaseModel):
        metric: Literal["msg_rate", "throughput"] = Field(
            "msg_rate", description="Load: messages/s in + out, or bytes/s in + out"
        )
        top: int = Field(10, ge=1, le=200, description="Bundles drawn over time")

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        history = spark_history(data, metric=params.metric, top=params.top)
        bundles = data.latest("bundles").toPandas()
        topics = data.latest("topics").toPandas()
        return finish(history, bundles, topics, metric=params.metric)

    def render(self, result: Result) -> list[View]:
        return render_views(result)


def spark_history(data: SparkInputs, *, metric: str, top: int) -> dict[str, pd.DataFrame]:
    """`hot`, `timeline` and `moves`, computed in Spark (see `reference`)."""
    from pyspark.sql import functions as F

    bundles, topics = data.history("bundles"), data.history("topics")
    throughput = topics.groupBy("snapshot_id", "namespace", "bundle").agg(
        F.sum(
            F.coalesce(F.col("msg_throughput_in"), F.lit(0.0))
            + F.coalesce(F.col("msg_throughput_out"), F.lit(0.0))
        ).alias("throughput")
    )
    loads = bundles.select(
        "snapshot_id",
        "collected_at",
        "namespace",
        "bundle",
        "owner_broker",
        F.col("topic_count").alias("topics"),
        (
            F.coalesce(F.col("msg_rate_in"), F.lit(0.0))
            + F.coalesce(F.col("msg_rate_out"), F.lit(0.0))
        ).alias("msg_rate"),
    ).join(throughput, ["snapshot_id", "namespace", "bundle"], "left")
    loads = loads.withColumn("throughput", F.coalesce(F.col("throughput"), F.lit(0.0)))
    loads = loads.withColumn("load", F.col(LOADS[metric])).cache()
    try:
        hot = _hot(loads, data)
        if hot.empty:
            timeline = pd.DataFrame(columns=TIMELINE_COLUMNS)
        else:
            since = pd.Timestamp(data.since) if data.since is not None else None
            until = pd.Timestamp(data.until) if data.until is not None else None
            width = bucket_seconds(since, until)
            chosen = data.tables["bundles"].sparkSession.createDataFrame(
                hot.head(top)[["namespace", "bundle"]]
            )
            mine = loads.join(F.broadcast(chosen), ["namespace", "bundle"])
            seconds = F.floor(F.unix_micros("collected_at") / 1_000_000)
            bucket = F.timestamp_seconds(F.floor(seconds / width) * width).alias("bucket")
            timeline = (
                mine.groupBy(bucket, "namespace", "bundle")
                .agg(
                    F.max_by("owner_broker", "collected_at").alias("owner_broker"),
                    F.count("*").alias("polls"),
                    F.avg("topics").alias("topics"),
                    F.avg("msg_rate").alias("msg_rate"),
                    F.avg("throughput").alias("throughput"),
                )
                .orderBy("bucket", "namespace", "bundle")
                .toPandas()
            )
    finally:
        loads.unpersist()
    events = data.history("events")
    moved = events.filter(F.col("kind") == "bundle_owner_changed").select(
        "at",
        F.regexp_extract("subject", r"^(.*)/[^/]*$", 1).alias("namespace"),
        F.regexp_extract("subject", r"([^/]*)$", 1).alias("bundle"),
        "before",
        "after",
    )
    moves = moved.orderBy("at", "namespace", "bundle").toPandas()
    return {
        "hot": hot,
        "timeline": timeline[TIMELINE_COLUMNS],
        "moves": moves[MOVE_COLUMNS] if len(moves) else pd.DataFrame(columns=MOVE_COLUMNS),
    }


def _hot(loads: Any, data: SparkInputs) -> pd.DataFrame:
    from pyspark.sql import functions as F

    stats = loads.groupBy("namespace", "bundle").agg(
        F.count("*").alias("polls"),
        F.avg("load").alias("mean_load"),
        F.max("load").alias("peak_load"),
    )
    newest = loads.filter(F.col("snapshot_id") == (data.latest_snapshot_id() or ""))
    owner_total = newest.groupBy("owner_broker").agg(F.sum("load").alias("owner_load"))
    current = newest.join(owner_total, "owner_broker", "left").select(
        "namespace",
        "bundle",
        "owner_broker",
        F.try_divide(F.col("load"), F.col("owner_load")).alias("owner_share"),
    )
    hot = stats.join(current, ["namespace", "bundle"], "left").toPandas()
    ordered = hot.sort_values(["mean_load", "namespace", "bundle"], ascending=[False, True, True])
    return ordered.reset_index(drop=True)[HOT_COLUMNS]
