"""`stuck-hash-history` (Spark): every draining-hash episode across the stored history.

An *episode* is a run of consecutive stored polls in which one hash of one Key_Shared
subscription was draining for the same consumer (PIP-379): it starts at the first poll that
lists it and ends at the last one before a poll that does not. Per episode: first and last
seen, polls, seconds, the most unacknowledged messages and blocked attempts it held, and
whether it is still open in the newest poll. Per holder consumer (`offenders`): episodes,
polls spent draining, the longest episode. Per subscription (`recurrence`): episodes,
distinct hashes, and hashes that drained more than once.

The rule is written twice, once on Spark and once on pandas (`reference`), and the tests
prove both give the same frames.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pulsar_lens.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    Note,
    Page,
    Result,
    SparkInputs,
    Table,
    View,
    empty_frame,
)
from pulsar_lens.plugins.builtin.stuck_hash_history.reference import (
    EPISODE_COLUMNS,
    KEY,
    finish,
)


class StuckHashHistory(AnalysisPlugin):
    name = "stuck-hash-history"
    title = "Stuck-hash history"
    description = (
        "Every draining-hash episode across all subscriptions and the whole stored history: "
        "duration, holder, messages held, top offenders and recurrence."
    )
    version = "0.1"
    engine = "spark"
    inputs = ("draining_hashes",)
    history = HISTORY_ALL
    outputs = ("episodes", "offenders", "recurrence")
    page = Page(
        title="Stuck-hash history",
        icon=":material/history_toggle_off:",
        caption="Every draining-hash episode in the stored history (PIP-379), from a Spark job.",
        url_path="stuck-hash-history",
        order=25,
    )

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        episodes = spark_episodes(data)
        return finish(episodes, newest=len(data.snapshots) - 1)

    def render(self, result: Result, params: Any = None) -> list[View]:
        episodes = result.frames["episodes"]
        if episodes.empty:
            return [Note("No hash drained in the stored polls.")]
        return [
            Table(result.frames["offenders"], title="Holders", caption="most polls draining first"),
            Table(result.frames["recurrence"], title="Per subscription"),
            Table(episodes, title="Episodes", caption="longest first"),
        ]


def spark_episodes(data: SparkInputs) -> pd.DataFrame:
    """The episodes, one row each, computed in Spark (gaps and islands over poll positions)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    draining = data.history("draining_hashes")
    spark = draining.sparkSession
    index = data.snapshots[["snapshot_id"]].assign(position=range(len(data.snapshots)))
    if index.empty:
        return empty_frame(EPISODE_COLUMNS)
    positions = spark.createDataFrame(index)
    rows = draining.join(F.broadcast(positions), "snapshot_id")
    order = Window.partitionBy(*KEY).orderBy("position")
    islands = rows.withColumn("run", F.col("position") - F.row_number().over(order))
    episodes = islands.groupBy(*KEY, "run").agg(
        F.min("position").alias("start"),
        F.max("position").alias("end"),
        F.min("collected_at").alias("first_seen"),
        F.max("collected_at").alias("last_seen"),
        F.count("*").alias("polls"),
        F.max("unack_msgs").alias("max_unack_msgs"),
        F.max("blocked_attempts").alias("max_blocked_attempts"),
    )
    return episodes.drop("run").toPandas()
