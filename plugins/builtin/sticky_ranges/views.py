"""Views of `sticky-ranges`: metrics, gap warnings, coverage and the planned ranges."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from pulsar_lens.api import Chart, Metric, Note, Result, Table, View, escape_markdown
from pulsar_lens.core.keyshared.ranges import STICKY_TOP

ROUTED = {"4.0": "1..65535", "3.0": "0..65535"}
GAP_RULES = {
    "4.0": "Hash 0 is never routed; every other gap hash stalls.",
    "3.0": "Hash 0 is routed like any other. A STICKY gap between two ranges of one consumer "
    "goes to it (taken_by); the others stall.",
}


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    plan = summary["plan"]
    views: list[View] = [
        Note(f"Broker rules: {escape_markdown(summary['model'])}. {GAP_RULES[summary['pulsar']]}"),
        Metric("Sticky groups", summary["groups"]),
        Metric("Groups with gaps", summary["groups_with_gaps"]),
        Metric(
            "Stalled hashes",
            summary["gap_hashes"],
            help=f"hashes {ROUTED[summary['pulsar']]} nobody covers",
        ),
        Metric("Overlapping hashes", summary["overlap_hashes"]),
    ]
    groups = frames["groups"]
    if groups.empty:
        views.append(Note("No STICKY subscription or key-hash-range reader in the snapshot."))
    else:
        for row in groups[groups["gap_hashes"] > 0].itertuples(index=False):
            views.append(
                Note(
                    f"**{escape_markdown(row.label)}**: {row.gap_hashes} hashes have no "
                    "consumer; their messages stall until one covering them connects.",
                    level="warning",
                )
            )
        views.append(Table(groups, title="Groups"))
        views.append(Chart(chart_coverage(frames, summary["selected"]), title="Coverage"))
        views.extend(_detail_tables(frames, summary["pulsar"]))
    views.append(
        Metric(
            f"Plan: {plan['nodes']} nodes x {plan['points']} points",
            f"{plan['uniform_imbalance']:.2f}x",
            help="largest share over the fair share, uniform hashes",
        )
    )
    if plan["samples"]:
        views.append(Metric("Plan on sampled keys", f"{plan['sampled_imbalance']:.2f}x"))
    views.append(Table(frames["plan_balance"], title="Planned sticky ranges per node"))
    views.append(Chart(chart_plan(frames["plan"]), title="Planned ranges"))
    return views


def _detail_tables(frames: Mapping[str, pd.DataFrame], line: str) -> list[View]:
    views: list[View] = []
    if len(frames["gaps"]):
        views.append(Table(frames["gaps"], title="Gaps", caption=GAP_RULES[line]))
    if len(frames["overlaps"]):
        views.append(Table(frames["overlaps"], title="Overlaps"))
    views.append(Table(frames["consumers"], title="Consumers"))
    return views


def chart_coverage(frames: Mapping[str, pd.DataFrame], label: str) -> alt.Chart:
    """The selected group's ranges per consumer, with its gaps as a lane of their own."""
    ranges = frames["ranges"][frames["ranges"]["label"] == label]
    gaps = frames["gaps"][frames["gaps"]["label"] == label]
    data = pd.concat(
        [
            pd.DataFrame(
                {"lane": ranges["consumer_name"], "start": ranges["start"], "end": ranges["end"]}
            ),
            pd.DataFrame({"lane": "(gap)", "start": gaps["start"], "end": gaps["end"]}),
        ],
        ignore_index=True,
    )
    data = data.assign(stop=data["end"].astype("int64") + 1)
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=alt.Scale(domain=[0, STICKY_TOP + 1]), title="hash"),
            x2="stop:Q",
            y=alt.Y("lane:N", title=None),
            color=alt.Color("lane:N", legend=None),
            tooltip=["lane:N", "start:Q", "end:Q"],
        )
    )
    return chart


def chart_plan(plan: pd.DataFrame) -> alt.Chart:
    data = plan.assign(stop=plan["end"] + 1)
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=alt.Scale(domain=[0, STICKY_TOP + 1]), title="hash"),
            x2="stop:Q",
            y=alt.Y("node:N", title=None),
            color=alt.Color("node:N", legend=None),
            tooltip=["node:N", "start:Q", "end:Q", "size:Q"],
        )
    )
    return chart
