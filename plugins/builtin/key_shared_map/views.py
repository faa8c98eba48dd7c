"""Views of `key-shared-map`: metrics, the hash map, shares and the what-if, as Altair."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from plugins.api import Chart, Metric, Note, Result, Table, View


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    subs = frames["subscriptions"]
    views: list[View] = [
        Metric("Key_Shared subscriptions", summary["subscriptions"]),
        Metric("Drifting from the model", summary["drifting"]),
        Metric("Worst imbalance", f"{summary['max_imbalance']:.2f}x", help="largest share / 1/n"),
    ]
    if subs.empty:
        return [*views, Note("No Key_Shared subscription with consumers in the newest snapshot.")]
    for row in subs[subs["drift"].astype(bool)].itertuples(index=False):
        views.append(Note(f"**{row.label}** drifts from our model: {row.drift_reason}", "warning"))
    views.append(Table(subs, title="Subscriptions"))
    selected = summary["selected"]
    if selected not in set(subs["label"]):
        return [
            *views,
            Note(f"No Key_Shared subscription `{selected}` in the snapshot.", "warning"),
        ]
    ranges = frames["ranges"][frames["ranges"]["label"] == selected]
    consumers = frames["consumers"][frames["consumers"]["label"] == selected]
    views.append(Chart(chart_hash_map(ranges), title=f"Hash ranges of {selected}"))
    views.append(Chart(chart_shares(consumers), title="Share of the hash space"))
    views.append(Table(consumers, title="Consumers", caption="In connection order"))
    views.extend(_what_if_views(frames, summary))
    if "lookup" in summary:
        hit = summary["lookup"]
        views.append(Note(f"Key `{hit['key']}` hashes to {hit['hash']} -> {hit['consumer']}"))
    return views


def _what_if_views(frames: Mapping[str, pd.DataFrame], summary: Mapping[str, Any]) -> list[View]:
    if "what_if" not in summary:
        return []
    facts = summary["what_if"]
    return [
        Metric(f"Moved by '{facts['change']}'", f"{facts['moved_fraction']:.1%}"),
        Chart(chart_what_if(frames["what_if"]), title="Shares before and after"),
        Table(frames["moves"], title="Moved ranges", caption="Hashes that change consumer"),
        Table(frames["what_if"], title="Per consumer"),
    ]


def chart_hash_map(ranges: pd.DataFrame) -> alt.Chart:
    """One lane per consumer (and per source when the model drifts), ranges as bars."""
    data = ranges.assign(
        lane=ranges["consumer_name"].astype(str) + " #" + ranges["position"].astype(str),
        stop=ranges["end"] + 1,
    )
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=alt.Scale(domain=[0, 65536]), title="sticky key hash"),
            x2="stop:Q",
            y=alt.Y("lane:N", title=None),
            color=alt.Color("lane:N", legend=None),
            row=alt.Row("source:N", title=None),
            tooltip=["consumer_name:N", "start:Q", "end:Q", "size:Q", "source:N"],
        )
    )
    return chart


def chart_shares(consumers: pd.DataFrame) -> alt.LayerChart:
    """Each consumer's share with the fair share 1/n as a rule."""
    data = consumers.assign(
        lane=consumers["consumer_name"].astype(str) + " #" + consumers["position"].astype(str)
    )
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("share:Q", axis=alt.Axis(format="%"), title="share of hashes"),
            y=alt.Y("lane:N", title=None, sort=None),
            tooltip=["consumer_name:N", "hashes:Q", alt.Tooltip("share:Q", format=".2%")],
        )
    )
    fair = alt.Chart(data).mark_rule(color="red").encode(x="mean(fair_share):Q")
    return alt.LayerChart(layer=[bars, fair])


def chart_what_if(what_if: pd.DataFrame) -> alt.Chart:
    """Shares before and after the change, side by side per consumer."""
    data = what_if.assign(
        lane=what_if["consumer_name"].astype(str) + " #" + what_if["position"].astype(str)
    ).melt(
        id_vars=["lane"],
        value_vars=["share_before", "share_after"],
        var_name="when",
        value_name="share",
    )
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("share:Q", axis=alt.Axis(format="%")),
            y=alt.Y("when:N", title=None),
            row=alt.Row("lane:N", title=None),
            color="when:N",
        )
    )
    return chart
