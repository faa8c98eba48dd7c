"""`key-distribution` (Spark): where the sampled keys of every Key_Shared subscription went.

Over every stored poll, each sampled key counts for the consumer whose reported hash ranges
held its hash in that poll, under the selector in force then on the Pulsar line its brokers
reported (3.0 or 4.0; `reference` states the rule): messages per consumer, per hash and per
key, skew, the what-if over consumer count and replica points on the real keys (`whatif`),
and the sticky-range planner of `sticky-ranges` scored on them, both on the newest analysed
poll's line. The summary (`pulsar`, `broker_versions`, `lines`) and the page's caption
(`model`) say which line was modelled, and when the window spans an upgrade.

Spark does the counting: the murmur3 of each key in the JVM, its consumer (in the JVM too,
over the poll's members: `routing`), and the sums, in one query collected once (`_counted`):
one aggregation over grouping sets gives the sums per consumer, per bin and per hash and the
per-key counts of the hot keys. The what-ifs run here on the per-hash sums (at most 65,536
rows per subscription on 4.0, at most one per key on 3.0's 31-bit ring), and the small
counted frames go through the same `frames.finish` as the pandas twin.
tests/spark/test_key_distribution.py fixes how many Spark jobs one run starts.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from pulsar_lens.plugins.builtin.key_distribution import routing
from pulsar_lens.plugins.builtin.key_distribution.frames import (
    COUNT_COLUMNS,
    OUTPUTS,
    empty_counts,
    finish,
    model_of,
)
from pulsar_lens.plugins.builtin.key_distribution.reference import GROUP_KEY, members_in_order
from pulsar_lens.plugins.builtin.key_distribution.whatif import (
    per_label,
    plan_frame,
    what_if_frame,
)
from pulsar_lens.plugins.builtin.shared.labels import subscription_label

BROKER_POINTS = 100  # subscriptionKeySharedConsistentHashingReplicaPoints' default


class KeyDistribution(AnalysisPlugin):
    name = "key-distribution"
    title = "Key distribution"
    description = (
        "Sampled messages per hash and per consumer of every Key_Shared subscription under the "
        "ranges in force when they were sampled: hot keys, skew, what-if over consumer count "
        "and replica points, and the sticky-range planner scored on the real keys."
    )
    version = "1.2"  # 1.2: models the broker line the snapshots report
    engine = "spark"
    inputs = ("key_samples", "consumers", "subscriptions", "brokers")
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
        labels = {
            subscription_label(r["topic"], r["subscription"]) for r in rows.distinct().collect()
        }
        return {"subscription": ["", *sorted(labels)]}


def spark_counts(
    data: SparkInputs, *, top_keys: int, what_if: Mapping[str, Any], plan_points: int
) -> dict[str, pd.DataFrame]:
    """The counted frames of `frames.COUNT_COLUMNS`, from one Spark query collected once
    (`_counted` and the newest consumers, rows told apart by `part`); the what-ifs then run
    here on its per-hash sums. A collect per frame would run the chain of joins again each."""
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
    # cached: the query reads it three times, and Spark reuses no work past a Python function
    chosen = routing.selectors(sampled, consumers).cache()
    try:
        counted = _counted(routing.assigned(samples, chosen), chosen, top_keys)
        members = _newest(consumers, subs).select(
            F.lit("members").alias("part"),
            "label",
            F.col("consumer_name").alias("name"),
            F.col("connected_since").alias("at"),
        )
        lines = data.history("brokers").select(
            F.lit("lines").alias("part"),
            F.col("snapshot_id").alias("key"),
            F.col("collected_at").alias("at"),
            F.col("version").alias("name"),
        )
        rows = (
            counted.unionByName(members, allowMissingColumns=True)
            .unionByName(lines, allowMissingColumns=True)
            .toPandas()
        )
    finally:
        chosen.unpersist()
    lines_seen = _part(rows, "lines")[COUNT_COLUMNS["lines"]]
    model = model_of(lines_seen)["pulsar"]
    rows = rows[rows["pulsar"].isna() | (rows["pulsar"] == model)]  # the modelled line's
    found = {part: _part(rows, part) for part in PART_COLUMNS}
    if found["hot_keys"].empty:  # no key sampled under a Key_Shared subscription
        return {**empty_counts(), "lines": lines_seen}
    ring = members_in_order(found.pop("members"))
    return {
        **{name: found[name][COUNT_COLUMNS[name]] for name in ("consumers", "selector", "bins")},
        "lines": lines_seen,
        "keys": found["hot_keys"]
        .drop_duplicates("label")[COUNT_COLUMNS["keys"]]
        .reset_index(drop=True),
        "hot_keys": found["hot_keys"][COUNT_COLUMNS["hot_keys"]],
        "what_if": per_label(
            found["sticky_hashes"], lambda g: what_if_frame(g, ring, **what_if, pulsar=model)
        ),
        "sticky_plan": per_label(
            found["range_hashes"], lambda g: plan_frame(g, ring, points=plan_points)
        ),
    }


# The parts `_counted` counts, by the column each groups by beside `label` (all: none)
PARTS = {
    "consumer_name": "consumers",
    "bin_start": "bins",
    "sticky_hash": "sticky_hashes",
    "range_hash": "range_hashes",
    "key": "hot_keys",
}
# Each part's columns in the collected rows (`spark_counts`), and the names they take
PART_COLUMNS: dict[str, dict[str, str]] = {
    "consumers": {"name": "consumer_name", "messages": "messages"},
    "bins": {"hash": "bin_start", "bin_end": "bin_end", "messages": "messages"},
    "sticky_hashes": {"hash": "hash", "messages": "messages"},
    "range_hashes": {"hash": "hash", "messages": "messages"},
    "hot_keys": {
        "key": "key",
        "hash": "hash",
        "name": "consumer_name",
        "seen": "consumers_seen",
        "messages": "messages",
        "keys": "keys",
    },
    "selector": {"name": "selector"},
    "members": {"name": "consumer_name", "at": "connected_since"},
    "lines": {"key": "snapshot_id", "at": "collected_at", "name": "version"},
}
LONGS = {"hash", "bin_end", "messages", "seen", "keys"}


def _counted(assigned: Any, selectors: Any, top: int) -> Any:
    """Every part of `PARTS` and the `selector` one, as rows (part, label, pulsar, name, key,
    hash, bin_end, messages, seen, keys), from one aggregation over grouping sets and one
    window, each per line (`pulsar`, see `routing`):

    - per label and each `PARTS` column, the messages (a consumer listed in a sampled poll
      counts, with 0 if nothing went to it);
    - `hot_keys`: per label, the `top` keys by messages (ties by key), with hash and consumer
      at their newest sample (the greatest (collected_at, consumer_name, hash)), how many
      consumers they went to (`seen`) and, on each, how many keys the label has (`keys`);
    - `selector`: per label, the selector in force at its newest sampled poll (`name`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = assigned.select(
        "label",
        "pulsar",
        "consumer_name",
        (F.col("hash") - F.col("hash") % F.col("bin_width")).alias("bin_start"),
        (F.col("hash") - F.col("hash") % F.col("bin_width") + F.col("bin_width") - 1).alias(
            "bin_end"
        ),
        "sticky_hash",
        "range_hash",
        "key",
        "collected_at",
        "hash",
        "selector",
        "messages",
    )
    present = selectors.select(
        "label", "pulsar", F.explode("members.consumer_name").alias("consumer_name")
    )
    zero = present.select(
        *[
            F.col(c) if c in present.columns else F.lit(None).cast(rows.schema[c].dataType).alias(c)
            for c in rows.columns
            if c != "messages"
        ],
        F.lit(0).cast("long").alias("messages"),
    )
    real = F.when(F.col("consumer_name") != UNCOVERED, F.col("consumer_name"))
    grouped = (
        rows.unionByName(zero)
        .groupingSets(
            [["label", "pulsar"], *[["label", "pulsar", c] for c in PARTS]],
            "label",
            "pulsar",
            *PARTS,
        )
        .agg(
            F.sum("messages").cast("long").alias("messages"),
            F.max("bin_end").alias("bin_end"),
            F.size(F.collect_set(real)).cast("long").alias("seen"),
            F.max(F.struct("collected_at", "consumer_name", "hash")).alias("newest"),
            F.max(F.struct("collected_at", "selector")).alias("newest_selector"),
            *[F.grouping(c).alias(f"g_{c}") for c in PARTS],
        )
    )
    part, hashed = F.lit("selector"), F.lit(None).cast("long")
    for column, name in PARTS.items():
        part = F.when(F.col(f"g_{column}") == 0, F.lit(name)).otherwise(part)
        if column in ("bin_start", "sticky_hash", "range_hash"):
            hashed = F.when(F.col(f"g_{column}") == 0, F.col(column)).otherwise(hashed)
    named = F.when(F.col("g_key") == 0, F.col("newest.consumer_name"))
    shaped = grouped.select(
        part.alias("part"),
        "label",
        "pulsar",
        named.when(F.col("g_consumer_name") == 0, F.col("consumer_name"))
        .otherwise(F.col("newest_selector.selector"))
        .alias("name"),
        "key",
        F.when(F.col("g_key") == 0, F.col("newest.hash")).otherwise(hashed).alias("hash"),
        F.when(F.col("g_bin_start") == 0, F.col("bin_end")).alias("bin_end"),
        "messages",
        "seen",
    )
    # the zero rows make a group of their own in every part but `consumers`: dropped
    shaped = shaped.filter(F.col("part").isin("consumers", "selector") | F.col("hash").isNotNull())
    same = Window.partitionBy("label", "pulsar", "part")
    rank = F.row_number().over(same.orderBy(F.desc("messages"), F.asc("key")))
    return (
        shaped.withColumn("keys", F.count("*").over(same))
        .withColumn("rank", rank)
        .filter((F.col("part") != "hot_keys") | (F.col("rank") <= top))
        .drop("rank")
    )


def _newest(consumers: Any, subs: Any) -> Any:
    """The consumers of each label's newest poll that lists any."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    listed = consumers.join(subs.select(*GROUP_KEY, "label"), GROUP_KEY, "inner")
    newest = F.max("collected_at").over(Window.partitionBy("label"))
    return (
        listed.withColumn("newest", newest)
        .filter(F.col("collected_at") == F.col("newest"))
        .select("label", "consumer_name", "connected_since")
    )


def _part(rows: pd.DataFrame, part: str) -> pd.DataFrame:
    """The collected rows of one part, with its own columns and types."""
    columns = PART_COLUMNS[part]
    mine = rows[rows["part"] == part].reset_index(drop=True)
    longs = {column: "int64" for column in columns if column in LONGS}
    return mine[["label", *columns]].astype(longs).rename(columns=columns)
