"""`unload-history`'s Spark plan: outages from probe rows with window functions (no Python per
row), owner moves from consecutive polls, and the aggregates, brought back as small frames.

Each function is a plain `DataFrame -> DataFrame`; pyspark is imported inside them, so the
light path never loads it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pulsar_lens.plugins.builtin.shared.outages import OUTAGE_COLUMNS
from pulsar_lens.plugins.builtin.unload_history.frames import (
    BY_BROKER,
    BY_BUNDLE,
    BY_HOUR,
    KEY,
    MOVES,
    OUTAGES,
    RUN_KEY,
    TREND,
    UNKNOWN,
    Parts,
)


def spark_parts(probes: Any, bundles: Any, *, slow_ms: float) -> Parts:
    """The parts from the window's probe rows and bundle rows (Spark DataFrames)."""
    moves = compute_moves(bundles).cache()
    found = find_outages(probes, slow_ms=slow_ms).cache()
    outages = with_owners(found, bundles, moves).cache()
    try:
        return Parts(
            outages=outages.select(*OUTAGES).toPandas(),
            by_bundle=compute_by_bundle(probes, outages, moves).select(*BY_BUNDLE).toPandas(),
            by_broker=compute_by_broker(outages).select(*BY_BROKER).toPandas(),
            by_hour=compute_by_hour(outages).select(*BY_HOUR).toPandas(),
            trend=compute_trend(outages).select(*TREND).toPandas(),
            moves=moves.count(),
        )
    finally:
        for frame in (outages, found, moves):
            frame.unpersist()


def find_outages(probes: Any, *, slow_ms: float) -> Any:
    """`shared.outages.probe_outages` on Spark: per (probe, topic) in `seq` order, the
    maximal runs of slow (`publish_ms > slow_ms`) or unacknowledged messages, each cut at the
    ack of the (good) message before it (else its first send) and back at its earliest ack
    (else the ack of the (good) message after it)."""
    from pyspark.sql import functions as F

    runs = (
        with_runs(probes, slow_ms=slow_ms)
        .filter("bad")
        .groupBy(*RUN_KEY, "run")
        .agg(
            F.min(F.struct("seq", "sent_at", "ack_before")).alias("first"),
            F.max(F.struct("seq", "ack_next")).alias("last"),
            F.min("head").alias("head"),
            F.min("acked_at").alias("run_ack"),
            F.max("publish_ms").alias("worst_publish_ms"),
            F.count("*").alias("delayed"),
            F.count("error").alias("failed"),
            F.sum(F.when(F.col("received") == 0, 1).otherwise(0)).alias("lost"),
        )
    )
    cut = F.coalesce(F.col("first.ack_before"), F.col("first.sent_at"))
    back = F.coalesce(F.col("run_ack"), F.col("last.ack_next"))
    length = (F.unix_micros("back_at") - F.unix_micros("cut_at")) / F.lit(1000.0)
    found = runs.select(
        *RUN_KEY,
        F.col("head.namespace").alias("namespace"),
        F.col("head.bundle").alias("bundle"),
        F.col("first.seq").alias("first_seq"),
        F.col("last.seq").alias("last_seq"),
        cut.alias("cut_at"),
        back.alias("back_at"),
        "worst_publish_ms",
        "delayed",
        "failed",
        "lost",
    )
    found = found.withColumn(
        "outage_ms", F.when(F.col("back_at").isNotNull(), F.greatest(F.lit(0.0), length))
    )
    return found.select(*OUTAGE_COLUMNS)


def with_runs(probes: Any, *, slow_ms: float) -> Any:
    """The probe rows with `bad` (slow or unacknowledged), `run` (the number of bad runs
    started so far in their (probe, topic)), the previous and the next message's acks (a run
    is maximal, so both are good ones) and `head` (the first message's namespace and bundle)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_seq = Window.partitionBy(*RUN_KEY).orderBy("seq")
    upto = by_seq.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    publish = F.col("publish_ms")
    rows = probes.select(
        *RUN_KEY,
        "namespace",
        "bundle",
        "seq",
        "sent_at",
        "acked_at",
        F.when(F.isnan(publish), None).otherwise(publish).alias("publish_ms"),
        "received",
        "error",
    ).withColumn("bad", F.col("publish_ms").isNull() | (F.col("publish_ms") > F.lit(slow_ms)))
    starts = F.col("bad") & ~F.coalesce(F.lag("bad").over(by_seq), F.lit(False))
    whole = Window.partitionBy(*RUN_KEY)
    return rows.withColumns(
        {
            "ack_before": F.lag("acked_at").over(by_seq),
            "ack_next": F.lead("acked_at").over(by_seq),
            "head": F.min(F.struct("seq", "namespace", "bundle")).over(whole),
            "run": F.sum(starts.cast("int")).over(upto),
        }
    )


def compute_moves(bundles: Any) -> Any:
    """Each change of a bundle's owner between two consecutive polls that list it (None for
    unowned), with both polls' times (`since`, `at`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(*KEY).orderBy("collected_at")
    polls = bundles.select(
        *KEY,
        F.lag("collected_at").over(order).alias("since"),
        F.col("collected_at").alias("at"),
        F.lag("owner_broker").over(order).alias("from_broker"),
        F.col("owner_broker").alias("to_broker"),
    )
    changed = F.col("since").isNotNull() & ~F.col("from_broker").eqNullSafe(F.col("to_broker"))
    return polls.filter(changed).select(*MOVES)


def with_owners(outages: Any, bundles: Any, moves: Any) -> Any:
    """The outages with `broker`, the owner at their bundle's newest poll at or before the cut
    (UNKNOWN when none, or unowned then), and the move whose polls enclose the cut
    (`since <= cut_at < at`), if any.

    The owner comes from one window over the bundle's polls and cuts together (a poll at the
    cut's very time sorts first), not from a join on time ranges."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    polls = bundles.join(outages.select(*KEY).distinct(), KEY, how="left_semi").select(
        *KEY,
        F.col("collected_at").alias("t"),
        F.lit(0).alias("kind"),
        F.struct(F.col("owner_broker").alias("owner")).alias("poll"),
    )
    cuts = outages.withColumns({"t": F.col("cut_at"), "kind": F.lit(1)})
    both = cuts.unionByName(polls, allowMissingColumns=True)
    upto = (
        Window.partitionBy(*KEY)
        .orderBy("t", "kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    owner = F.last("poll", ignorenulls=True).over(upto).getField("owner")
    owned = both.withColumn("broker", F.coalesce(owner, F.lit(UNKNOWN))).filter("kind = 1")
    owned = owned.drop("t", "kind", "poll")
    move = moves.select(
        *(F.col(k).alias(f"m_{k}") for k in KEY),
        F.col("since").alias("moved_since"),
        F.col("at").alias("moved_at"),
        "from_broker",
        "to_broker",
    )
    encloses = (
        (F.col("namespace") == F.col("m_namespace"))
        & (F.col("bundle") == F.col("m_bundle"))
        & (F.col("moved_since") <= F.col("cut_at"))
        & (F.col("cut_at") < F.col("moved_at"))
    )
    joined = owned.join(move, encloses, how="left")
    return joined.withColumn("moved", F.col("moved_at").isNotNull()).select(*OUTAGES)


def _stats(outages: Any, keys: list[str]) -> Any:
    """Per group: outages, median, p99 and max outage (linear percentiles over the measured
    ones), delayed and lost messages."""
    from pyspark.sql import functions as F

    return outages.groupBy(*keys).agg(
        F.count("*").alias("outages"),
        F.percentile("outage_ms", F.lit(0.5)).alias("median_ms"),
        F.percentile("outage_ms", F.lit(0.99)).alias("p99_ms"),
        F.max("outage_ms").alias("max_ms"),
        F.sum("delayed").alias("delayed"),
        F.sum("lost").alias("lost"),
    )


def compute_by_bundle(probes: Any, outages: Any, moves: Any) -> Any:
    """Every probed bundle: probe messages, duplicate deliveries, owner moves, outage stats."""
    from pyspark.sql import functions as F

    received = F.coalesce(F.col("received"), F.lit(0))
    probed = probes.groupBy(*KEY).agg(
        F.count("*").alias("messages"),
        F.sum(F.greatest(received - 1, F.lit(0))).alias("duplicates"),
    )
    moved = moves.groupBy(*KEY).agg(F.count("*").alias("moves"))
    return probed.join(moved, KEY, how="left").join(_stats(outages, KEY), KEY, how="left")


def compute_by_broker(outages: Any) -> Any:
    """Per broker that owned the bundle when the outage began."""
    from pyspark.sql import functions as F

    extra = outages.groupBy("broker").agg(
        F.count_distinct(*KEY).alias("bundles"),
        F.sum(F.col("moved").cast("int")).alias("moved_outages"),
    )
    return _stats(outages, ["broker"]).join(extra, "broker", how="left")


def compute_by_hour(outages: Any) -> Any:
    """Per UTC hour of the cut (the session runs in UTC)."""
    from pyspark.sql import functions as F

    hours = outages.withColumn("hour", F.date_trunc("hour", "cut_at"))
    return hours.groupBy("hour").agg(
        F.count("*").alias("outages"),
        F.percentile("outage_ms", F.lit(0.5)).alias("median_ms"),
        F.max("outage_ms").alias("max_ms"),
        F.sum("lost").alias("lost"),
    )


def compute_trend(outages: Any) -> Any:
    """Per UTC day of the cut: outages and the median outage."""
    from pyspark.sql import functions as F

    days = outages.withColumn("day", F.date_trunc("day", "cut_at"))
    return days.groupBy("day").agg(
        F.count("*").alias("outages"),
        F.percentile("outage_ms", F.lit(0.5)).alias("median_ms"),
    )


def empty_parts() -> Parts:
    """The parts of a window without polls."""
    return Parts(
        outages=pd.DataFrame(columns=OUTAGES),
        by_bundle=pd.DataFrame(columns=BY_BUNDLE),
        by_broker=pd.DataFrame(columns=BY_BROKER),
        by_hour=pd.DataFrame(columns=BY_HOUR),
        trend=pd.DataFrame(columns=TREND),
        moves=0,
    )
