"""The timeline chart: one row per kind of event, a point per event at its time, coloured by
who made it; clicking a point follows its link (the page that explains it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from pulsar_lens.plugins.builtin.incident_timeline.frames import KIND_ORDER

if TYPE_CHECKING:
    import altair as alt

MAX_POINTS = 5000
"""Events drawn (the newest); the table lists them all."""
TOOLTIP = ["at", "kind", "source", "namespace", "topic", "subscription", "subject", "detail"]


def chart_events(events: pd.DataFrame) -> alt.Chart:
    """Events as points on a time axis, one row per kind (in KIND_ORDER), coloured by source;
    the tooltip shows the names and the detail as text, a click opens the row's link."""
    import altair as alt  # on use: discovering plugins needs no altair

    shown = events.tail(MAX_POINTS)
    present = set(shown["kind"])
    kinds = [k for k in KIND_ORDER if k in present] + sorted(present - set(KIND_ORDER))
    chart: alt.Chart = (
        alt.Chart(shown[[*TOOLTIP, "link"]])
        .mark_point(filled=True, size=80, cursor="pointer")
        .encode(
            x=alt.X("at:T", title="Time (UTC)", axis=alt.Axis(format="%H:%M:%S")),
            y=alt.Y("kind:N", title=None, sort=kinds),
            color=alt.Color("source:N", title="Made by"),
            shape=alt.Shape("source:N", title="Made by"),
            href=alt.Href("link:N"),
            tooltip=[alt.Tooltip("at:T", format="%Y-%m-%d %H:%M:%S.%L"), *TOOLTIP[1:]],
        )
    )
    return chart
