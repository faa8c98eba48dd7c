"""`bundle-load-history`'s views: load over time with the load manager's moves, the brokers,
the hot bundles and the ranked candidates."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from plugins.api import Chart, Columns, Metric, Note, Result, Section, Table, View


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    if frames["hot"].empty:
        return [Note("No bundles in the stored polls.")]
    metric = str(summary.get("metric", "msg_rate"))
    unit = "msg/s" if metric == "msg_rate" else "bytes/s"
    violation = summary.get("violation")
    views: list[View] = [
        Metric("Bundles", summary.get("bundles", 0)),
        Metric("Brokers", summary.get("brokers", 0)),
        Metric("Moves seen", summary.get("moves", 0)),
        Metric("Busiest / mean broker", "—" if violation is None else f"{violation:.2f}×"),
        Chart(
            _timeline(frames["timeline"], frames["moves"], metric, unit),
            title=f"Hottest bundles over time ({unit}); rules: owner changes",
        ),
        Columns(
            (
                (Chart(_brokers(frames["brokers"], unit), title="Broker load, newest poll"),),
                (Table(frames["brokers"]),),
            )
        ),
        Section("Candidates", caption="unloads and splits that would even the brokers, best first"),
    ]
    if frames["candidates"].empty:
        views.append(Note("No unload or split would lower the busiest broker's load."))
    else:
        views.append(Table(frames["candidates"]))
    views += [
        Section("Hot bundles", caption="mean load over the stored polls, hottest first"),
        Table(frames["hot"]),
        Section("Moves the load manager made"),
        Table(frames["moves"]) if len(frames["moves"]) else Note("No owner change was seen."),
    ]
    return views


def _timeline(timeline: pd.DataFrame, moves: pd.DataFrame, metric: str, unit: str) -> Any:
    data = timeline.assign(name=timeline["namespace"] + "/" + timeline["bundle"])
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket:T", title=None),
            y=alt.Y(f"{metric}:Q", title=unit),
            color=alt.Color("name:N", title="bundle"),
            tooltip=["name", "bucket:T", "owner_broker", "topics", metric],
        )
    )
    if moves.empty:
        return lines
    shown = set(data["name"])
    marks = moves.assign(name=moves["namespace"] + "/" + moves["bundle"])
    marks = marks[marks["name"].isin(shown)]
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(x="at:T", tooltip=["name", "at:T", "before", "after"])
    )
    return alt.layer(lines, rules)


def _brokers(brokers: pd.DataFrame, unit: str) -> Any:
    return (
        alt.Chart(brokers)
        .mark_bar()
        .encode(
            x=alt.X("load:Q", title=unit),
            y=alt.Y("broker:N", title=None, sort="-x"),
            tooltip=["broker", "bundles", "load"],
        )
    )
