from __future__ import annotations

import altair as alt

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    Chart,
    Field,
    GaugeMetricFamily,
    Inputs,
    MetricFamily,
    MetricsContext,
    Result,
    Table,
    View,
    finite,
)


class BacklogTop(AnalysisPlugin):
    name = "backlog-top"
    title = "Largest backlogs"
    description = "Subscriptions with the largest backlog in the newest snapshot."
    version = "1.0"
    engine = "light"
    inputs = ("subscriptions",)
    history = 1
    outputs = ("top",)

    class Params(BaseModel):
        top_n: int = Field(10, ge=1, le=100, description="Subscriptions to show")

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs = data.latest("subscriptions")
        top = subs.nlargest(params.top_n, "msg_backlog")[["topic", "subscription", "msg_backlog"]]
        return Result(frames={"top": top.reset_index(drop=True)}, summary={"shown": len(top)})

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        top = result.frames["top"]
        shown = params.top_n if params is not None else len(top)
        bars = (
            alt.Chart(top)
            .mark_bar()
            .encode(x="msg_backlog:Q", y=alt.Y("subscription:N", sort="-x"))
        )
        return [Chart(bars, title="Backlog"), Table(top, title=f"The {shown} largest backlogs")]

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        gauge = GaugeMetricFamily(
            "pulsar_lens_backlog_top_messages",
            "Backlog of the largest subscriptions.",
            labels=["topic", "subscription"],
        )
        for row in context.kept_rows(result.frames["top"]):
            gauge.add_metric([row["topic"], row["subscription"]], finite(row["msg_backlog"]) or 0)
        return [gauge]


PLUGINS = (BacklogTop,)
