"""`bundle-load-history`'s views: the hottest bundles' load over time with the load manager's
moves on it, the brokers' load, the ranked candidates, the hot bundles and the moves."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from pulsar_lens.api import Chart, Columns, Metric, Note, Result, Section, Table, View

UNITS = {"msg_rate": "msg/s", "throughput": "bytes/s"}


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    if frames["hot"].empty:
        return [Note("No bundles in the stored polls.")]
    metric = str(summary.get("metric", "msg_rate"))
    unit = UNITS.get(metric, "")
    views: list[View] = [
        Metric("Bundles", summary.get("bundles", 0)),
        Metric("Brokers", summary.get("brokers", 0)),
        Metric("Moves seen", summary.get("moves", 0)),
        Metric("Hottest bundle", summary.get("hottest") or "—"),
        Metric("Busiest / mean broker, newest", _ratio(summary.get("violation"))),
        Metric("Busiest / mean broker, window mean", _ratio(summary.get("mean_violation"))),
        Chart(
            chart_timeline(frames["timeline"], frames["moves"], metric, unit),
            title=f"Hottest bundles over time ({unit})",
            caption="dashed rules: owner changes of the bundles drawn (the points name them)",
        ),
        Columns(
            (
                (Chart(chart_brokers(frames["brokers"], unit), title="Broker load"),),
                (Table(frames["brokers"]),),
            )
        ),
        Section("Candidates", caption="unloads and splits that would even the brokers, best first"),
    ]
    if frames["candidates"].empty:
        views.append(Note("No unload or split would lower the busiest broker's share."))
    else:
        views.append(Table(frames["candidates"]))
    views += [
        Section("Hot bundles", caption="mean load over the stored polls, hottest first"),
        Table(frames["hot"]),
        Section("Moves the load manager made"),
        Table(frames["moves"]) if len(frames["moves"]) else Note("No owner change was seen."),
    ]
    return views


def _ratio(value: Any) -> str:
    return "—" if value is None else f"{float(value):.2f}×"


def chart_timeline(timeline: pd.DataFrame, moves: pd.DataFrame, metric: str, unit: str) -> Any:
    """Load per bundle and bucket, with each owner change as a rule and a point."""
    shown = ["bucket", "owner_broker", "topics", "polls", metric]
    data = timeline[shown].assign(name=timeline["namespace"] + "/" + timeline["bundle"])
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket:T", title=None),
            y=alt.Y(f"{metric}:Q", title=unit),
            color=alt.Color("name:N", title="bundle"),
            tooltip=["name", "bucket:T", "owner_broker", "topics", "polls", metric],
        )
    )
    if moves.empty:
        return lines
    marks = moves.assign(name=moves["namespace"] + "/" + moves["bundle"])
    marks = marks[marks["name"].isin(set(data["name"]))]
    if marks.empty:
        return lines
    tooltip = ["name", "at:T", "before", "after", "source"]
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(x="at:T", tooltip=tooltip)
    )
    points = (
        alt.Chart(marks)
        .mark_point(shape="triangle-down", size=80, filled=True, y=0)
        .encode(x="at:T", color=alt.Color("name:N", title="bundle"), tooltip=tooltip)
    )
    return alt.layer(lines, rules, points)


def chart_brokers(brokers: pd.DataFrame, unit: str) -> Any:
    """Each broker's load in the newest poll (bars) and its mean over the window (ticks)."""
    base = alt.Chart(brokers).encode(
        y=alt.Y("broker:N", title=None, sort="-x"),
        tooltip=["broker", "bundles", "load", "share", "mean_load"],
    )
    bars = base.mark_bar().encode(x=alt.X("load:Q", title=unit))
    ticks = base.mark_tick(color="black", thickness=2).encode(x="mean_load:Q")
    return alt.layer(bars, ticks)
