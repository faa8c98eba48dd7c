"""A third-party Pulsar Lens plugin: topics, subscriptions and backlog per namespace.

Installed with pip, it is found through its entry point in group `pulsar_lens.plugins`. It
asks for a page of its own in the dashboard's Cluster section, laid out in two columns.
"""

from __future__ import annotations

import altair as alt

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    Chart,
    Columns,
    Field,
    Inputs,
    Metric,
    Page,
    Result,
    Table,
    View,
)

__all__ = ["HelloNamespaces"]


class HelloNamespaces(AnalysisPlugin):
    name = "hello-namespaces"
    title = "Hello: namespaces"
    description = "Topics, subscriptions and backlog per namespace in the newest snapshot."
    version = "0.1.0"
    engine = "light"
    inputs = ("topics", "subscriptions")
    history = 1
    outputs = ("namespaces",)
    page = Page(
        title="Namespaces",
        icon=":material/folder:",
        caption="Topics, subscriptions and backlog per namespace.",
        controls=("min_topics",),
        order=90,
    )

    class Params(BaseModel):
        min_topics: int = Field(
            1, ge=0, title="Smallest namespace", description="Hide namespaces with fewer topics"
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        topics = data.latest("topics")
        subs = data.latest("subscriptions")
        per_topic = subs.groupby("topic", as_index=False).agg(
            subscriptions=("subscription", "count"), backlog=("msg_backlog", "sum")
        )
        joined = topics[["namespace", "topic"]].merge(per_topic, on="topic", how="left")
        namespaces = joined.groupby("namespace", as_index=False).agg(
            topics=("topic", "count"),
            subscriptions=("subscriptions", "sum"),
            backlog=("backlog", "sum"),
        )
        namespaces = namespaces[namespaces["topics"] >= params.min_topics]
        namespaces = namespaces.astype({"subscriptions": "int64", "backlog": "int64"})
        namespaces = namespaces.sort_values("namespace").reset_index(drop=True)
        return Result(
            frames={"namespaces": namespaces},
            summary={"namespaces": len(namespaces), "topics": int(namespaces["topics"].sum())},
        )

    def render(self, result: Result) -> list[View]:
        frame = result.frames["namespaces"]
        chart = (
            alt.Chart(frame)
            .mark_bar()
            .encode(x=alt.X("topics:Q", title="Topics"), y=alt.Y("namespace:N", sort="-x"))
        )
        return [
            Metric("Namespaces", int(result.summary["namespaces"])),
            Columns(
                (
                    (Chart(chart, title="Topics per namespace"),),
                    (Table(frame, title="Namespaces"),),
                ),
                widths=(3, 2),
            ),
        ]
