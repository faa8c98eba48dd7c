"""A Spark analysis as a drop-in file: every topic's publish rate over the stored history.

Put this file in a directory named by PULSAR_LENS_PLUGIN_DIRS. The job worker runs it after
new polls (and on Run now); its page, under History, shows the stored result.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from pulsar_lens.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    BaseModel,
    Chart,
    Field,
    Note,
    Page,
    Result,
    SparkInputs,
    Table,
    View,
)


class TopicRateHistory(AnalysisPlugin):
    name = "topic-rate-history"
    title = "Topic rate history"
    description = "Each topic's mean and peak publish rate over every stored poll."
    version = "1.0"
    engine = "spark"
    inputs = ("topics",)
    history = HISTORY_ALL
    outputs = ("busiest",)
    page = Page(title="Topic rates", url_path="topic-rates", order=90)

    class Params(BaseModel):
        top: int = Field(10, ge=1, le=1000, description="how many topics to list")

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        from pyspark.sql import functions as F

        topics = data.history("topics")
        busiest = (
            topics.groupBy("topic")
            .agg(
                F.count("*").alias("polls"),
                F.avg("msg_rate_in").alias("mean_rate_in"),
                F.max("msg_rate_in").alias("peak_rate_in"),
            )
            .orderBy(F.desc("mean_rate_in"), "topic")
            .limit(params.top)
            .toPandas()
        )
        return Result(frames={"busiest": busiest}, summary={"topics": len(busiest)})

    def render(self, result: Result) -> list[View]:
        busiest = result.frames["busiest"]
        if busiest.empty:
            return [Note("No topic in the stored polls.")]
        bars = (
            alt.Chart(busiest)
            .mark_bar()
            .encode(x=alt.X("mean_rate_in:Q", title="mean msg/s in"), y=alt.Y("topic:N", sort="-x"))
        )
        return [Chart(bars, title="Busiest topics"), Table(busiest)]


PLUGINS = (TopicRateHistory,)
