"""Views of `failover-history`: headline numbers, imbalance and partitions per consumer over
time for the worst groups, the flapping partitions and the PIP-392 what-if."""

from __future__ import annotations

import altair as alt
import pandas as pd

from pulsar_lens.api import Chart, Metric, Note, Result, Section, Table, Tabs, View

CHARTED_GROUPS = 5
"""Groups drawn in the charts over time (the worst first); the tables list them all."""
CHART_ROWS = 4000
"""Rows sent to one chart at most (Altair refuses more than 5,000); the newest polls are kept."""
WHAT_IF_GROUPS = 15
"""Groups in the what-if chart, the worst imbalance first."""


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    if not summary["groups"]:
        return [Note("No Failover subscription with consumers in the stored polls.")]
    worst = list(frames["groups"]["label"].head(CHARTED_GROUPS))
    return [
        Metric("Failover groups", summary["groups"]),
        Metric("Polls", summary["polls"]),
        Metric(
            "Active-consumer changes",
            summary["flaps"],
            delta=f"{summary['suspicious_flaps']} with the same consumers",
            help="Changes with no consumer joining or leaving the partition are suspicious.",
        ),
        Metric(
            "Worst imbalance",
            f"{summary['worst_spread']} partitions",
            delta=f"{summary['worst_ratio']:.2f}x the fair share",
            help="Busiest minus idlest consumer of a group in one poll.",
        ),
        Section("Imbalance", caption="Busiest minus idlest consumer, poll by poll."),
        *_imbalance_views(frames["imbalance"], worst),
        Table(frames["groups"], title="Groups", caption="the worst imbalance first"),
        Section("Partitions per consumer", caption="Partitions each consumer is active on."),
        *_timeline_views(frames["timeline"], worst),
        Section("Flapping", caption="Changes of active consumer between polls."),
        *_flapping_views(frames["partitions"]),
        Section(
            "What-if PIP-392",
            caption="At the newest poll: one consumer leaving or joining, under modulo "
            "(the default) and consistent hashing (activeConsumerFailoverConsistentHashing).",
        ),
        *_what_if_views(frames["what_if"], list(frames["groups"]["label"])),
    ]


def newest(frame: pd.DataFrame, limit: int = CHART_ROWS) -> pd.DataFrame:
    """The rows of the newest polls of `frame`, at most `limit` of them (whole polls)."""
    times = frame["collected_at"].drop_duplicates().sort_values()
    if len(frame) <= limit or times.empty:
        return frame
    keep = max(1, int(limit // (len(frame) / len(times))))
    return frame[frame["collected_at"] >= times.iloc[-keep]]


def _imbalance_views(imbalance: pd.DataFrame, worst: list[str]) -> list[View]:
    data = newest(imbalance[imbalance["label"].isin(worst)])
    if data.empty:
        return []
    return [Chart(chart_imbalance(data), title="Spread over time", caption="the worst groups")]


def _timeline_views(timeline: pd.DataFrame, worst: list[str]) -> list[View]:
    tabs = []
    for label in worst:
        mine = newest(timeline[timeline["label"] == label])
        if len(mine):
            tabs.append((label, [Chart(chart_partitions(mine), title=label)]))
    return [Tabs(tabs)] if tabs else []


def _flapping_views(partitions: pd.DataFrame) -> list[View]:
    flapping = partitions[partitions["changes"] > 0]
    if flapping.empty:
        return [Note("No partition changed active consumer in the stored polls.")]
    return [Table(flapping, title="Flapping partitions", caption="the most changes first")]


def _what_if_views(what_if: pd.DataFrame, order: list[str]) -> list[View]:
    if what_if.empty:
        return [Note("No Failover group with connected consumers in the newest poll.")]
    return [
        Chart(
            chart_what_if(what_if, order[:WHAT_IF_GROUPS]),
            title="Partitions moving",
            caption="mean over the consumers that could leave; one consumer joining",
        ),
        Table(what_if, title="Scenarios", caption="`now`: moved if the rule were switched"),
    ]


def chart_imbalance(imbalance: pd.DataFrame) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(imbalance)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("collected_at:T", title="collected at"),
            y=alt.Y("spread:Q", title="busiest - idlest (partitions)"),
            color=alt.Color("label:N", title="group"),
            tooltip=["label:N", "collected_at:T", "spread:Q", "ratio:Q", "consumers:Q"],
        )
    )
    return chart


def chart_partitions(timeline: pd.DataFrame) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(timeline)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("collected_at:T", title="collected at"),
            y=alt.Y("partitions:Q", title="active partitions"),
            color=alt.Color("consumer_name:N", title="consumer"),
            tooltip=["consumer_name:N", "collected_at:T", "partitions:Q"],
        )
    )
    return chart


def chart_what_if(what_if: pd.DataFrame, labels: list[str]) -> alt.FacetChart:
    moves = what_if[what_if["scenario"].isin(["leave", "join"]) & what_if["label"].isin(labels)]
    data = (
        moves.melt(
            id_vars=["label", "scenario"],
            value_vars=["moved_modulo", "moved_consistent"],
            var_name="rule",
            value_name="moved",
        )
        .assign(rule=lambda f: f["rule"].str.removeprefix("moved_"))
        .groupby(["label", "scenario", "rule"], as_index=False)["moved"]
        .mean()
    )
    chart: alt.FacetChart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("moved:Q", title="partitions moving"),
            y=alt.Y("label:N", title=None, sort=labels),
            yOffset="rule:N",
            color=alt.Color("rule:N", title="rule"),
            tooltip=["label:N", "scenario:N", "rule:N", alt.Tooltip("moved:Q", format=".1f")],
        )
        .facet(column=alt.Column("scenario:N", title=None))
    )
    return chart
