"""`key-distribution` (Spark): where the sampled keys of every Key_Shared subscription went.

Over every stored poll, each sampled key counts for the consumer whose reported hash ranges
held its hash in that poll, under the selector in force then (`reference` states the rule):
messages per consumer, per hash and per key, skew, the what-if over consumer count and
replica points on the real keys (`whatif`), and the sticky-range planner of `sticky-ranges`
scored on them. Spark does the counting: the sticky hash of each key in the JVM
(`with_sticky_hash`), the join of keys with the ranges of their poll, the aggregations and,
per subscription (`applyInPandas`), the what-ifs; the small counted frames then go through the same
`frames.finish` as the pandas twin.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd

from pulsar_lens.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    BaseModel,
    Field,
    JvmCharset,
    Page,
    Result,
    SparkInputs,
    View,
    jvm_charset,
)
from pulsar_lens.core.keyload import UNCOVERED
from pulsar_lens.plugins.builtin.key_distribution.frames import (
    BIN_WIDTH,
    COUNT_COLUMNS,
    OUTPUTS,
    empty_counts,
    finish,
    label_of,
)
from pulsar_lens.plugins.builtin.key_distribution.reference import (
    GROUP_KEY,
    members_in_order,
    with_selectors,
)
from pulsar_lens.plugins.builtin.key_distribution.whatif import (
    PLAN_SCHEMA,
    WHAT_IF_SCHEMA,
    plan_frame,
    what_if_frame,
)

BROKER_POINTS = 100  # subscriptionKeySharedConsistentHashingReplicaPoints' default
SELECTOR_SCHEMA = (
    "snapshot_id string, topic string, subscription string, label string, "
    "collected_at timestamp, selector string, reduction string"
)


class KeyDistribution(AnalysisPlugin):
    name = "key-distribution"
    title = "Key distribution"
    description = (
        "Sampled messages per hash and per consumer of every Key_Shared subscription under the "
        "ranges in force when they were sampled: hot keys, skew, what-if over consumer count "
        "and replica points, and the sticky-range planner scored on the real keys."
    )
    version = "1.1"
    engine = "spark"
    inputs = ("key_samples", "consumers", "subscriptions")
    history = HISTORY_ALL
    outputs = OUTPUTS
    page = Page(
        title="Key distribution",
        icon=":material/key:",
        caption="Sampled keys per consumer of every Key_Shared subscription over the stored "
        "history, what-ifs on them, from a Spark job.",
        controls=("subscription",),
        url_path="key-distribution",
        order=15,
    )

    class Params(BaseModel):
        subscription: str = Field("", description="Subscription to draw; empty: the most skewed")
        top_keys: int = Field(20, ge=1, le=1000, description="Hot keys listed per subscription")
        points_low: int = Field(20, ge=1, le=1024, description="What-if: fewest replica points")
        points_high: int = Field(400, ge=1, le=1024, description="What-if: most replica points")
        spread: int = Field(
            2, ge=1, le=8, description="What-if: consumers removed and added around the newest"
        )
        plan_points: int = Field(100, ge=1, le=1024, description="Sticky planner: points per node")
        jvm_charset: JvmCharset = Field(
            "",
            validate_default=True,
            description="How the broker's JVM encodes consumer names (UTF-8 or US-ASCII); "
            "empty: PULSAR_LENS_JVM_CHARSET, else UTF-8",
        )

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        points = sorted({params.points_low, BROKER_POINTS, params.points_high})
        counts = spark_counts(
            data,
            top_keys=params.top_keys,
            what_if=dict(
                points=points, spread=params.spread, charset=jvm_charset(params.jvm_charset)
            ),
            plan_points=params.plan_points,
        )
        return finish(counts, subscription=params.subscription)

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.key_distribution.views import (
            render_views,  # altair: on use
        )

        return render_views(result)

    def param_choices(self, data: Any) -> dict[str, list[str]]:
        subs = data.history("subscriptions")
        rows = subs.filter(subs["type"] == "Key_Shared").select("topic", "subscription")
        labels = {label_of(r["topic"], r["subscription"]) for r in rows.distinct().collect()}
        return {"subscription": ["", *sorted(labels)]}


def spark_counts(
    data: SparkInputs, *, top_keys: int, what_if: Mapping[str, Any], plan_points: int
) -> dict[str, pd.DataFrame]:
    """The counted frames of `frames.COUNT_COLUMNS`, counted in Spark."""
    from pyspark.sql import functions as F

    subscriptions = data.history("subscriptions")
    subs = subscriptions.filter(F.col("type") == "Key_Shared").select(
        *GROUP_KEY,
        "collected_at",
        "key_shared_mode",
        F.concat_ws(" | ", "topic", "subscription").alias("label"),
    )
    samples = data.history("key_samples")
    polls = samples.select("snapshot_id", "topic").distinct()
    sampled = subs.join(polls, ["snapshot_id", "topic"], "left_semi")
    consumers = data.history("consumers")
    listed = consumers.join(sampled.select(*GROUP_KEY, "label"), GROUP_KEY, "inner")
    selectors = _selectors(sampled, listed).cache()
    assigned = _assigned(samples, selectors, listed).cache()
    try:
        if assigned.isEmpty():
            return empty_counts()
        labels = assigned.select("label").distinct()
        members = members_in_order(_newest(consumers, subs, labels).toPandas())
        frames = {
            "consumers": _per_consumer(assigned, listed),
            "keys": assigned.groupBy("label").agg(F.countDistinct("key").alias("keys")),
            "selector": _newest_selector(selectors),
            "bins": _sum(
                assigned.withColumn("bin_start", F.col("hash") - F.col("hash") % BIN_WIDTH),
                "bin_start",
            ),
            "hot_keys": _hot_keys(assigned, top_keys),
            "what_if": _by_hash(assigned, "sticky_hash")
            .groupBy("label")
            .applyInPandas(lambda g: what_if_frame(g, members, **what_if), WHAT_IF_SCHEMA),
            "sticky_plan": _by_hash(assigned, "range_hash")
            .groupBy("label")
            .applyInPandas(lambda g: plan_frame(g, members, points=plan_points), PLAN_SCHEMA),
        }
        return {
            name: frame.select(*COUNT_COLUMNS[name]).toPandas() for name, frame in frames.items()
        }
    finally:
        assigned.unpersist()
        selectors.unpersist()


def _selectors(sampled: Any, listed: Any) -> Any:
    """One row per sampled subscription and poll: its selector (`reference.with_selectors`)."""
    from pyspark.sql import functions as F

    member = F.when(F.col("consumer_name").isNotNull(), F.struct("consumer_name", "hash_ranges"))
    groups = (
        sampled.join(listed.select(*GROUP_KEY, "consumer_name", "hash_ranges"), GROUP_KEY, "left")
        .groupBy(*GROUP_KEY, "label", "collected_at", "key_shared_mode")
        .agg(F.collect_list(member).alias("members"))
    )
    return groups.mapInPandas(_selector_batches, SELECTOR_SCHEMA)


def _selector_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for batch in batches:
        yield with_selectors(batch)


def _assigned(samples: Any, selectors: Any, listed: Any) -> Any:
    """Sampled messages per (poll, subscription, key): its hashes and its consumer."""
    from pyspark.sql import functions as F

    from pulsar_lens.plugins.spark.hashing import with_sticky_hash

    keyed = samples.select(
        "snapshot_id", "topic", F.coalesce("key", F.lit("")).alias("key"), "sticky_hash"
    )
    per_key = keyed.groupBy("snapshot_id", "topic", "key", "sticky_hash").agg(
        F.count("*").alias("messages")
    )
    # 4.0's auto split and sticky selectors reduce a key alike (core.hashing.reduction)
    hashed = with_sticky_hash(per_key, "key", out="range_hash", selector="sticky")
    routed = F.when(F.col("reduction") == "consistent", F.col("sticky_hash"))
    rows = hashed.join(selectors, ["snapshot_id", "topic"], "inner").select(
        *GROUP_KEY,
        "label",
        "collected_at",
        "key",
        F.col("sticky_hash").cast("long").alias("sticky_hash"),
        "range_hash",
        routed.otherwise(F.col("range_hash")).cast("long").alias("hash"),
        "messages",
    )
    ranges = listed.select(
        *GROUP_KEY, "consumer_name", F.explode("hash_ranges").alias("range")
    ).select(
        *[F.col(k).alias(f"r_{k}") for k in GROUP_KEY],
        F.col("consumer_name"),
        F.col("range.start").cast("long").alias("start"),
        F.col("range.end").cast("long").alias("end"),
    )
    inside = (F.col("hash") >= F.col("start")) & (F.col("hash") <= F.col("end"))
    same = [F.col(k) == F.col(f"r_{k}") for k in GROUP_KEY]
    owned = rows.join(ranges, [*same, inside], "left")
    return owned.groupBy(*rows.columns).agg(
        F.coalesce(F.min("consumer_name"), F.lit(UNCOVERED)).alias("consumer_name")
    )


def _newest(consumers: Any, subs: Any, labels: Any) -> Any:
    """The consumers of each sampled label's newest poll that lists any."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    listed = consumers.join(subs.select(*GROUP_KEY, "label"), GROUP_KEY, "inner")
    listed = listed.join(labels, "label", "left_semi")
    newest = F.max("collected_at").over(Window.partitionBy("label"))
    return (
        listed.withColumn("newest", newest)
        .filter(F.col("collected_at") == F.col("newest"))
        .select("label", "consumer_name", "connected_since")
    )


def _per_consumer(assigned: Any, listed: Any) -> Any:
    from pyspark.sql import functions as F

    present = listed.select("label", "consumer_name").distinct()
    zero = present.withColumn("messages", F.lit(0).cast("long"))
    return _sum(
        assigned.select("label", "consumer_name", "messages").unionByName(zero), "consumer_name"
    )


def _newest_selector(selectors: Any) -> Any:
    from pyspark.sql import functions as F

    newest = F.max(F.struct("collected_at", "selector")).alias("newest")
    return selectors.groupBy("label").agg(newest).select("label", "newest.selector")


def _sum(frame: Any, by: str) -> Any:
    from pyspark.sql import functions as F

    return frame.groupBy("label", by).agg(F.sum("messages").cast("long").alias("messages"))


def _by_hash(assigned: Any, column: str) -> Any:
    return _sum(assigned, column).withColumnRenamed(column, "hash")


def _hot_keys(assigned: Any, top: int) -> Any:
    """Per label, the `top` keys by messages (ties by key), with hash and consumer at their
    newest sample (the greatest (collected_at, consumer_name, hash))."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    real = F.when(F.col("consumer_name") != UNCOVERED, F.col("consumer_name"))
    keys = assigned.groupBy("label", "key").agg(
        F.sum("messages").cast("long").alias("messages"),
        F.countDistinct(real).alias("consumers_seen"),
        F.max(F.struct("collected_at", "consumer_name", "hash")).alias("newest"),
    )
    rank = F.row_number().over(
        Window.partitionBy("label").orderBy(F.desc("messages"), F.asc("key"))
    )
    return (
        keys.withColumn("rank", rank)
        .filter(F.col("rank") <= top)
        .select("label", "key", "newest.hash", "newest.consumer_name", "consumers_seen", "messages")
    )
