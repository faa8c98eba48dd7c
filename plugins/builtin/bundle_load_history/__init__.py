"""`bundle-load-history` (Spark): every namespace bundle's load over the whole stored history,
the hot ones, the moves the load manager made, and the unloads and splits that would even the
brokers out, ranked as Cruise Control ranks Kafka proposals.

Bundles, as Pulsar has them: a namespace's hash space 0x00000000..0xffffffff is cut into
ranges named `0x%08x_0x%08x` (lower, upper); a topic (each partition on its own) lands in the
bundle holding the unsigned CRC-32 of its full name (`persistent://tenant/ns/topic`), lower
bound inclusive. A bundle is owned by one broker at a time; the load manager sheds load by
unloading a bundle (another broker then acquires it) and splits a hot one:
`range_equally_divide` cuts it at `lower + (upper - lower) // 2`. Where an unloaded bundle
lands is the next lookup's choice with the modular load manager (the extensible one honours
`?destinationBroker=`); the candidates below assume the least-loaded broker, and that a
bundle's load moves with it unchanged.

Load of a bundle in one poll, by the `metric` parameter: `msg_rate` = msg/s in + out (the
`bundles` row, summed from its topics by the collector), or `throughput` = bytes/s in + out
summed from the `topics` rows of that bundle. From every stored poll:

* `timeline`: for the `top` hottest bundles, topics, rates and throughput in and out,
  averaged per time bucket (the window's span / 300, at least a second); the owner is the
  one of the bucket's last poll.
* `hot`: per bundle, polls seen, mean, p95 (linear) and peak load over the window, hottest
  (mean) first; with its owner in the newest poll, its load then and its share of that
  owner's load.
* `moves`: the owner changes: the collector's `bundle_owner_changed` events (an unload shows
  as an owner of null), plus any change from one owner to another between a bundle's
  consecutive polls that no event reports at the same time (`source` says which).
* `brokers`: the brokers of the newest poll (listed by it or owning a bundle then): bundles
  and load then, share of the cluster's load, and mean load over the window's polls (the
  load of the bundles each owned, summed per poll, averaged over every poll).
* `candidates`, scored on the newest poll. The goal is an even load over the brokers; its
  violation is `busiest broker's load / mean broker load` (1.0 = even). For every owned
  bundle, two actions: **unload** it from its owner to the least-loaded other broker (ties by
  name), and **split** it (`range_equally_divide`), each topic going to the half its CRC-32
  falls in, then unload the half that leaves the lower violation; a split is offered only
  when both halves carry load (otherwise it moves what the unload moves). An action's
  `improvement` is the violation before minus after. As Cruise Control keeps only proposals
  that reduce a goal's violation and ranks them by that reduction, actions that improve
  nothing are dropped and the rest ranked by improvement (to 9 decimals: the engines sum in
  different orders), then namespace, bundle and action. Only a move off the busiest broker
  can lower a max/mean, so every candidate starts there; `reason` says so, with the numbers.

The plan below computes the per-poll loads, the statistics, the timeline, the moves and the
newest poll's split halves in Spark (CRC-32 by Spark's own `crc32`, no Python per row) and
brings back frames of one row per bundle or broker; `scoring` finishes both engines alike.
`reference` is the same rule on pandas, and the tests prove both give the same frames.
"""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd

from pulsar_lens.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    BaseModel,
    Field,
    Page,
    Result,
    SparkInputs,
    View,
    empty_frame,
)
from pulsar_lens.plugins.builtin.bundle_load_history.reference import (
    KEY,
    TOPIC_LOAD,
    bucket_seconds,
)
from pulsar_lens.plugins.builtin.bundle_load_history.scoring import (
    TIMELINE_COLUMNS,
    Parts,
    finish,
    order_hot,
)


class BundleLoadHistory(AnalysisPlugin):
    name = "bundle-load-history"
    title = "Bundle load history"
    description = (
        "Per bundle over the whole stored history: topics, message rates, throughput and owner; "
        "the hot bundles; the moves the load manager made; and the unloads and splits that "
        "would even the brokers' load, ranked by how much they would."
    )
    version = "1.1"
    engine = "spark"
    inputs = ("bundles", "topics", "events", "brokers")
    history = HISTORY_ALL
    outputs = ("hot", "timeline", "moves", "brokers", "candidates")
    page = Page(
        title="Bundle load history",
        icon=":material/stacked_line_chart:",
        caption="Bundles' load over the stored polls, the load manager's moves and what would "
        "even the brokers, from a Spark job.",
        controls=("metric",),
        url_path="bundle-history",
        order=45,
    )

    class Params(BaseModel):
        metric: Literal["msg_rate", "throughput"] = Field(
            "msg_rate", description="Load: messages/s in + out, or bytes/s in + out"
        )
        top: int = Field(10, ge=1, le=200, description="Hottest bundles drawn over time")

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        return finish(spark_parts(data, metric=params.metric, top=params.top), metric=params.metric)

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.bundle_load_history.views import (
            render_views,  # altair: on use
        )

        return render_views(result)


def spark_parts(data: SparkInputs, *, metric: str, top: int) -> Parts:
    """The parts of the result, computed in Spark (the rule is in the package docstring)."""
    from pyspark.sql import functions as F

    loads = with_loads(data.history("bundles"), data.history("topics"), metric=metric).cache()
    try:
        hot = order_hot(compute_hot(loads).toPandas())
        width = bucket_seconds(data.since, data.until)
        timeline = compute_timeline(loads, hot.head(top), width=width)
        moves = compute_moves(loads, data.history("events")).toPandas()
        newest = compute_newest(loads, data, metric=metric).toPandas()
        owned = (
            loads.filter(F.col("owner_broker").isNotNull())
            .groupBy(F.col("owner_broker").alias("broker"))
            .agg(F.sum("load").alias("window_load"))
            .toPandas()
        )
    finally:
        loads.unpersist()
    live = data.latest("brokers").select("broker_id").dropna().distinct().toPandas()
    return Parts(
        hot=hot,
        timeline=timeline,
        moves=moves,
        newest=newest,
        owned=owned,
        live=sorted(live["broker_id"]),
        polls=len(data.snapshots),
    )


def with_loads(bundles: Any, topics: Any, *, metric: str) -> Any:
    """One row per (poll, bundle), as `reference.bundle_loads`."""
    from pyspark.sql import functions as F

    zero = F.lit(0.0)
    summed = topics.groupBy("snapshot_id", *KEY).agg(
        F.sum(F.coalesce(F.col("msg_throughput_in"), zero)).alias("throughput_in"),
        F.sum(F.coalesce(F.col("msg_throughput_out"), zero)).alias("throughput_out"),
    )
    rows = bundles.select(
        "snapshot_id",
        "collected_at",
        *KEY,
        "lower",
        "upper",
        "owner_broker",
        F.col("topic_count").alias("topics"),
        F.coalesce(F.col("msg_rate_in"), zero).alias("msg_rate_in"),
        F.coalesce(F.col("msg_rate_out"), zero).alias("msg_rate_out"),
    ).join(summed, ["snapshot_id", *KEY], how="left")
    rows = rows.withColumns(
        {
            "throughput_in": F.coalesce(F.col("throughput_in"), zero),
            "throughput_out": F.coalesce(F.col("throughput_out"), zero),
        }
    )
    rows = rows.withColumns(
        {
            "msg_rate": F.col("msg_rate_in") + F.col("msg_rate_out"),
            "throughput": F.col("throughput_in") + F.col("throughput_out"),
        }
    )
    return rows.withColumn("load", F.col(metric))


def compute_hot(loads: Any) -> Any:
    from pyspark.sql import functions as F

    return loads.groupBy(*KEY).agg(
        F.count("*").alias("polls"),
        F.avg("load").alias("mean_load"),
        F.percentile("load", 0.95).alias("p95_load"),
        F.max("load").alias("peak_load"),
    )


def compute_timeline(loads: Any, chosen: pd.DataFrame, *, width: int) -> pd.DataFrame:
    from pyspark.sql import functions as F

    if chosen.empty:
        return empty_frame(TIMELINE_COLUMNS)
    keys = loads.sparkSession.createDataFrame(
        list(zip(chosen["namespace"], chosen["bundle"], strict=True)),
        "namespace string, bundle string",
    )
    mine = loads.join(F.broadcast(keys), KEY, how="inner")
    seconds = F.floor(F.unix_micros("collected_at") / 1_000_000)
    bucket = F.timestamp_seconds(F.floor(seconds / width) * width).alias("bucket")
    means = ["topics", "msg_rate_in", "msg_rate_out", "msg_rate"]
    means += ["throughput_in", "throughput_out", "throughput"]
    out = mine.groupBy(bucket, *KEY).agg(
        F.max_by("owner_broker", "collected_at").alias("owner_broker"),
        F.count("*").alias("polls"),
        *(F.avg(c).alias(c) for c in means),
    )
    return out.orderBy("bucket", *KEY).toPandas()[TIMELINE_COLUMNS]


def compute_moves(loads: Any, events: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    reported = events.filter(F.col("kind") == "bundle_owner_changed").select(
        "at",
        F.regexp_extract("subject", r"^(.*)/[^/]*$", 1).alias("namespace"),
        F.regexp_extract("subject", r"([^/]*)$", 1).alias("bundle"),
        "before",
        "after",
        F.lit("event").alias("source"),
    )
    order = Window.partitionBy(*KEY).orderBy("collected_at")
    seen = loads.select(
        F.col("collected_at").alias("at"),
        *KEY,
        F.lag("owner_broker").over(order).alias("before"),
        F.col("owner_broker").alias("after"),
    )
    polled = seen.filter(
        F.col("before").isNotNull()
        & F.col("after").isNotNull()
        & (F.col("before") != F.col("after"))
    ).withColumn("source", F.lit("polls"))
    polled = polled.join(reported.select("at", *KEY), ["at", *KEY], how="left_anti")
    both = reported.unionByName(polled.select(*reported.columns))
    return both.orderBy("at", *KEY, "source")


def compute_newest(loads: Any, data: SparkInputs, *, metric: str) -> Any:
    """The newest poll's bundles with their split halves' loads (CRC-32 in Spark)."""
    from pyspark.sql import functions as F

    now = loads.filter(F.col("snapshot_id") == (data.latest_snapshot_id() or "")).select(
        *KEY, "lower", "upper", "owner_broker", "load"
    )
    load_in, load_out = TOPIC_LOAD[metric]
    topic_load = F.coalesce(F.col(load_in), F.lit(0.0)) + F.coalesce(F.col(load_out), F.lit(0.0))
    mid = F.col("lower") + F.floor((F.col("upper") - F.col("lower")) / 2)
    low = F.crc32(F.col("topic").cast("binary")) < mid
    topics = data.latest("topics").select(*KEY, "topic", topic_load.alias("topic_load"))
    halves = (
        topics.join(now.select(*KEY, "lower", "upper"), KEY, how="inner")
        .groupBy(*KEY)
        .agg(
            F.count("*").alias("split_topics"),
            F.sum(F.when(low, F.col("topic_load")).otherwise(0.0)).alias("lower_load"),
            F.sum(F.when(low, 0.0).otherwise(F.col("topic_load"))).alias("upper_load"),
        )
    )
    out = now.join(halves, KEY, how="left").fillna(
        {"split_topics": 0, "lower_load": 0.0, "upper_load": 0.0}
    )
    return out.orderBy(*KEY)
