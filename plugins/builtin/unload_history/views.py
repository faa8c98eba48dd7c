"""Views of `unload-history`: headline numbers, outages per hour with their median and max,
the worst bundles, and the tables (per bundle, per broker, per day, the worst outages)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from pulsar_lens.api import Chart, Metric, Note, Result, Section, Table, View

CHART_HOURS = 2000
"""Hours drawn at most (the newest); every point of a chart goes to the browser."""
CHART_BUNDLES = 15
"""Bundles in the worst-bundles chart."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def render_views(result: Result) -> list[View]:
    summary, frames = result.summary, result.frames
    views: list[View] = [
        Metric("Outages", summary["outages"], help="Runs of slow or unacknowledged probe sends"),
        Metric("Worst outage", _ms(summary["worst_outage_ms"])),
        Metric("Median outage", _ms(summary["median_outage_ms"])),
        Metric("Lost in outages", summary["lost"], help="Messages of outages never received"),
        Metric("Owner moves", summary["moves"], help="Between consecutive polls, all bundles"),
    ]
    if not summary["probe_messages"]:
        return [
            *views,
            Note(
                "No probe ran in the stored polls, so no unload was measured. Probes measure "
                "them: `pulsar-lens collect --probe NAMESPACE[/BUNDLE]` or `pulsar-lens drill "
                "unload` (both need PULSAR_LENS_ALLOW_MUTATIONS=1)."
            ),
        ]
    if summary["lost"]:
        views.append(
            Note(
                f"{summary['lost']} probe message(s) of an outage were never received.",
                level="error",
            )
        )
    if not summary["outages"]:
        views.append(Note("The probes saw no outage in the stored history."))
    else:
        views += _outage_views(frames, summary)
    views.append(Table(frames["by_bundle"], title="Per bundle", caption="the longest first"))
    return views


def _outage_views(frames: Mapping[str, pd.DataFrame], summary: Mapping[str, Any]) -> list[View]:
    slope = summary["median_slope_ms_per_day"]
    trend = "" if slope is None else f"; the daily median moves by {slope:+,.1f} ms a day"
    return [
        Section("Over time", caption="Outages by the hour their cut fell in (UTC)."),
        Chart(chart_hours(frames["by_hour"].tail(CHART_HOURS)), title="Outages per hour"),
        Table(frames["trend"], title="Per day", caption=f"outages and median outage{trend}"),
        Section("Where", caption="The bundles and the brokers that owned them at the cut."),
        Chart(chart_bundles(frames["by_bundle"].head(CHART_BUNDLES)), title="Worst bundles"),
        Table(frames["by_broker"], title="Per broker", caption="owner at the poll before the cut"),
        Section("Outages"),
        Table(frames["worst"], title="Worst outages", caption="the longest first"),
        Table(frames["outages"], title="Every outage", caption="oldest first"),
    ]


def chart_hours(by_hour: pd.DataFrame) -> alt.LayerChart:
    """Outages per hour as bars, with the hour's median and max outage as lines on a second
    (log) axis."""
    bars = (
        alt.Chart(by_hour)
        .mark_bar(opacity=0.4)
        .encode(
            x=alt.X("hour:T", title="hour (UTC)"),
            y=alt.Y("outages:Q", title="outages"),
            tooltip=["hour:T", "outages:Q", "lost:Q"],
        )
    )
    long = by_hour.melt(
        id_vars=["hour"], value_vars=["median_ms", "max_ms"], var_name="stat", value_name="ms"
    ).dropna(subset=["ms"])
    lines = (
        alt.Chart(long[long["ms"] > 0])
        .mark_line(point=True)
        .encode(
            x="hour:T",
            y=alt.Y("ms:Q", title="outage (ms)", scale=alt.Scale(type="log")),
            color=alt.Color("stat:N", title=None),
            tooltip=["hour:T", "stat:N", alt.Tooltip("ms:Q", format=",.0f")],
        )
    )
    chart: alt.LayerChart = alt.LayerChart(layer=[bars, lines]).resolve_scale(y="independent")
    return chart


def chart_bundles(by_bundle: pd.DataFrame) -> alt.LayerChart:
    """The worst bundles' longest outage as bars, with their median as a tick."""
    data = by_bundle.dropna(subset=["max_ms"]).assign(
        label=lambda f: f["namespace"] + "/" + f["bundle"]
    )
    order = list(data["label"])
    base = alt.Chart(data).encode(
        y=alt.Y("label:N", title=None, sort=order),
        tooltip=["label:N", "outages:Q", "median_ms:Q", "p99_ms:Q", "max_ms:Q", "lost:Q"],
    )
    bars = base.mark_bar().encode(x=alt.X("max_ms:Q", title="longest outage (ms)"))
    ticks = base.mark_tick(color="black", thickness=2).encode(x="median_ms:Q")
    return alt.LayerChart(layer=[bars, ticks])
