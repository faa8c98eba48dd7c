"""Views of `failover-assignment`: metrics, the consumer x partition matrix, counts, timeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from pulsar_lens.api import Chart, Metric, Note, Result, Table, View, escape_markdown

PRIORITY_NOTE = (
    "Broker stats show no priority levels, so all consumers are taken as one level. "
    "Partitions whose active consumer neither rule explains may have consumers of "
    "different priority levels (or were caught mid-change)."
)


MAX_CHART_PARTITIONS = 200
"""The partitions of one group its charts draw at most (one row of marks each): a group
spread over 190,000 partitions, as on a cluster of a million topics, would be 650,000 marks,
more than a browser draws and no picture. The Partitions table lists the first 5,000,
`pulsar-lens analyze failover-assignment --json` all of them."""


def charted(parts: pd.DataFrame, *, flapping_first: bool = False) -> pd.Series:
    """The topics of the group's partitions a chart draws, at most MAX_CHART_PARTITIONS: those
    neither rule explains, then the flapping ones (or the other way round), then the rest,
    each in the table's order."""
    unexplained = ~parts["explained"].to_numpy(dtype=bool)
    flapping = parts["flapping"].to_numpy(dtype=bool)
    first, second = (flapping, unexplained) if flapping_first else (unexplained, flapping)
    order = np.argsort(-(2 * first + second), kind="stable")[:MAX_CHART_PARTITIONS]
    return parts["topic"].iloc[order]


def _drawn(parts: pd.DataFrame, *, flapping_first: bool = False) -> str:
    """What a chart that draws `charted(parts)` says it left out."""
    if len(parts) <= MAX_CHART_PARTITIONS:
        return ""
    kinds = ("flapping", "unexplained") if flapping_first else ("unexplained", "flapping")
    return (
        f"Drawn: {MAX_CHART_PARTITIONS:,} of the {len(parts):,} partitions, the {kinds[0]} "
        f"ones first, then the {kinds[1]}."
    )


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    views: list[View] = [
        Metric("Failover groups", summary["groups"]),
        Metric("Partitions", summary["partitions"]),
        Metric("Worst imbalance", f"{summary['max_imbalance']:.2f}x"),
        Metric("Flapping partitions", summary["flapping"]),
    ]
    if not summary["groups"]:
        return [*views, Note("No Failover subscription with consumers in the newest snapshot.")]
    if summary["unexplained"]:
        views.append(Note(PRIORITY_NOTE, level="warning"))
    views.append(Table(frames["groups"], title="Groups"))
    selected = summary["selected"]
    pick = summary.get("selection")
    if not pick:
        return [
            *views,
            Note(
                f"No Failover group {escape_markdown(selected)} in the snapshot.", level="warning"
            ),
        ]
    if summary.get("pip_392", True):
        views.append(
            Metric(
                f"Moving with {pick['alternative']}",
                pick["partitions_moving"],
                delta=f"imbalance {pick['imbalance']:.2f}x -> {pick['imbalance_alternative']:.2f}x",
            )
        )
    else:
        views.append(Note(no_pip_392(summary)))
    parts = frames["partitions"][frames["partitions"]["label"] == selected]
    matrix = frames["matrix"][frames["matrix"]["label"] == selected]
    matrix = matrix[matrix["topic"].isin(charted(parts))]
    views.append(
        Chart(chart_matrix(matrix), title=f"Active consumers of {selected}", caption=_drawn(parts))
    )
    consumers = frames["consumers"][frames["consumers"]["label"] == selected]
    views.append(
        Chart(
            chart_counts(consumers, alternative=summary.get("pip_392", True)),
            title="Partitions per consumer",
        )
    )
    views.append(Table(parts, title="Partitions", caption="observed, both rules, flapping"))
    timeline = frames["timeline"][frames["timeline"]["label"] == selected]
    if parts["flapping"].astype(bool).any():
        timeline = timeline[timeline["topic"].isin(charted(parts, flapping_first=True))]
        views.append(
            Chart(
                chart_timeline(timeline),
                title="Active consumer over time",
                caption="Each partition's active consumer in the recent polls where its "
                f"subscription was Failover. {_drawn(parts, flapping_first=True)}".strip(),
            )
        )
    return views


def chart_matrix(matrix: pd.DataFrame) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(matrix)
        .mark_rect()
        .encode(
            x=alt.X("consumer_name:N", title="consumer"),
            y=alt.Y("topic:N", title=None),
            color=alt.Color(
                "role:N",
                scale=alt.Scale(domain=["active", "standby"], range=["#2ca02c", "#dddddd"]),
            ),
            tooltip=["topic:N", "consumer_name:N", "role:N"],
        )
    )
    return chart


def no_pip_392(summary: Mapping[str, Any]) -> str:
    """What a page on 3.0 brokers says instead of the PIP-392 what-if."""
    return (
        f"{escape_markdown(str(summary['model']))}: Pulsar 3.0 has no PIP-392 setting "
        "(`activeConsumerFailoverConsistentHashing` does not exist on this release), so "
        "partitions follow the modulo rule only and there is no consistent-hashing what-if. "
        "Non-partitioned topics take the ring, which both rules share."
    )


def chart_counts(consumers: pd.DataFrame, *, alternative: bool = True) -> alt.Chart:
    rules = ["partitions", "partitions_alternative"] if alternative else ["partitions"]
    data = consumers.melt(
        id_vars=["consumer_name"],
        value_vars=rules,
        var_name="rule",
        value_name="count",
    )
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("count:Q", title="active partitions"),
            y=alt.Y("rule:N", title=None),
            row=alt.Row("consumer_name:N", title=None),
            color="rule:N",
        )
    )
    return chart


def chart_timeline(timeline: pd.DataFrame) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(timeline)
        .mark_tick(thickness=3)
        .encode(
            x=alt.X("collected_at:T", title="collected at"),
            y=alt.Y("topic:N", title=None),
            color=alt.Color("active_consumer_name:N", title="active"),
            tooltip=["topic:N", "active_consumer_name:N", "collected_at:T"],
        )
    )
    return chart
