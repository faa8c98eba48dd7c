"""Altair charts of `key-shared-map`: the hash space as a ring and a band (draining hashes
marked), each consumer's lane of ranges, shares against the fair share, and the what-if.

Every builder takes frames of the plugin's result and works on an empty frame too.
"""

from __future__ import annotations

import math
from typing import Final

import altair as alt
import numpy as np
import pandas as pd

from pulsar_lens.core.secrets import clean

HASH_SPACE = 65536
"""Key_Shared sticky hashes lie in [0, 65535] (4.0 uses [1, 65535])."""
WIDE_SPACE = 2**31
"""A 3.0 broker's consistent hashing lists its ring in 31 bits, [0, 2147483646]."""

DRAINING_COLOR = "#d62728"
UNOWNED = "(unowned)"
UNOWNED_COLOR = "#c7c7c7"
PALETTE: Final = "tableau10"
"""Distinct hues for consumers and brokers (the default theme uses shades of one blue)."""


SHOWN_NAME = 80
"""Characters of a consumer name a chart shows; the tables keep the whole name."""


def shown(names: pd.Series) -> pd.Series:
    """Names as a chart shows them, at most SHOWN_NAME characters: each distinct name is
    shortened once, and the chart's data stays small however long the names are."""
    codes, uniques = pd.factorize(names)
    short = np.asarray([*(clean(v, limit=SHOWN_NAME) for v in uniques), ""], dtype=object)
    return pd.Series(short[codes], index=names.index)


def _for_chart(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Only the columns a chart encodes (Altair embeds every column it is given), names
    shortened."""
    return frame[columns].assign(consumer_name=shown(frame["consumer_name"]))


def _category(field: str, title: str, *, legend: alt.Legend | None = None) -> alt.Color:
    return alt.Color(
        field, title=title, scale=alt.Scale(scheme=PALETTE), legend=legend or alt.Legend()
    )


def space_of(ranges: pd.DataFrame) -> int:
    """The hash space the ranges lie in: 0..65536, or the 31 bits of 3.0's consistent hashing."""
    if len(ranges) and int(ranges["end"].max()) > HASH_SPACE:
        return WIDE_SPACE
    return HASH_SPACE


def _hash_axis(space: int = HASH_SPACE) -> alt.Scale:
    return alt.Scale(domain=[0, space], nice=False, zero=True)


def chart_hash_band(
    ranges: pd.DataFrame, draining: pd.DataFrame | None = None, *, thickness: int = 70
) -> alt.TopLevelMixin:
    """The hash space 0-65535 as one band, coloured by consumer; draining hashes as red rules.

    `ranges`: consumer_name, start, end (inclusive). `draining`: consumer_name, hash,
    unack_msgs, blocked_attempts.
    """
    frame = _for_chart(ranges, ["consumer_name", "start", "end"])
    space = space_of(frame)
    frame = frame.assign(
        stop=frame["end"] + 1, width=frame["end"] - frame["start"] + 1, lane="hashes"
    )
    band = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=_hash_axis(space), title=f"sticky key hash (0–{space - 1})"),
            x2="stop:Q",
            y=alt.Y("lane:N", title=None, axis=None),
            color=_category("consumer_name:N", "consumer", legend=alt.Legend(orient="top")),
            tooltip=["consumer_name:N", "start:Q", "end:Q", alt.Tooltip("width:Q", title="hashes")],
        )
    )
    layers: list[alt.Chart] = [band]
    if draining is not None and not draining.empty:
        layers.append(_draining_rules(draining, space))
    return alt.layer(*layers).properties(height=alt.Step(thickness), width="container")


DRAINING_TOOLTIP = [
    alt.Tooltip("hash:Q", title="draining hash"),
    alt.Tooltip("consumer_name:N", title="draining for"),
    alt.Tooltip("unack_msgs:Q", title="unacked"),
    alt.Tooltip("blocked_attempts:Q", title="blocked attempts"),
]


DRAINING_FIELDS = ["hash", "consumer_name", "unack_msgs", "blocked_attempts"]


def _draining_rules(draining: pd.DataFrame, space: int = HASH_SPACE) -> alt.Chart:
    draining = _for_chart(draining, DRAINING_FIELDS)
    chart: alt.Chart = (
        alt.Chart(draining)
        .mark_rule(color=DRAINING_COLOR, strokeWidth=2)
        .encode(
            x=alt.X("hash:Q", scale=_hash_axis(space)),
            tooltip=DRAINING_TOOLTIP,
        )
    )
    return chart


def chart_hash_ring(
    ranges: pd.DataFrame, draining: pd.DataFrame | None = None, *, size: int = 380
) -> alt.TopLevelMixin:
    """The hash space as a ring (0 at the top, clockwise), arcs coloured by consumer.

    Same columns as `chart_hash_band`. Draining hashes are red ticks just outside the ring.
    """
    frame = _for_chart(ranges, ["consumer_name", "start", "end"])
    space = space_of(frame)
    frame = frame.assign(stop=frame["end"] + 1, width=frame["end"] - frame["start"] + 1)
    ring = (
        alt.Chart(frame)
        .mark_arc(innerRadius=size * 0.24, outerRadius=size * 0.36, stroke="white", strokeWidth=0.3)
        .encode(
            theta=alt.Theta("start:Q", scale=_ring_scale(space)),
            theta2="stop:Q",
            color=_category("consumer_name:N", "consumer", legend=alt.Legend(orient="top")),
            tooltip=["consumer_name:N", "start:Q", "end:Q", alt.Tooltip("width:Q", title="hashes")],
        )
    )
    layers: list[alt.Chart] = [ring]
    if draining is not None and not draining.empty:
        layers.append(_draining_ticks(draining, size=size, space=space))
    return alt.layer(*layers).properties(width=size, height=size)


def _ring_scale(space: int = HASH_SPACE) -> alt.Scale:
    return alt.Scale(domain=[0, space], range=[0, 2 * math.pi])


RING_TICK_HALF_WIDTH = 150
"""Half the angular width of a draining tick, in hashes, so a single hash stays visible."""


def _draining_ticks(draining: pd.DataFrame, *, size: int, space: int = HASH_SPACE) -> alt.Chart:
    draining = _for_chart(draining, DRAINING_FIELDS)
    half = RING_TICK_HALF_WIDTH * space // HASH_SPACE
    ticks = draining.assign(
        from_hash=(draining["hash"] - half).clip(lower=0),
        to_hash=(draining["hash"] + half).clip(upper=space),
    )
    chart: alt.Chart = (
        alt.Chart(ticks)
        .mark_arc(innerRadius=size * 0.375, outerRadius=size * 0.43, color=DRAINING_COLOR)
        .encode(
            theta=alt.Theta("from_hash:Q", scale=_ring_scale(space)),
            theta2="to_hash:Q",
            tooltip=DRAINING_TOOLTIP,
        )
    )
    return chart


def chart_share(shares: pd.DataFrame, *, title: str = "share of hash space") -> alt.TopLevelMixin:
    """A share per consumer (of the hash space by default), with the fair share (1/n) as a
    dashed rule.

    `shares`: consumer_name, share (0-1).
    """
    fair = 1.0 / len(shares) if len(shares) else 0.0
    shares = _for_chart(shares, ["consumer_name", "share"])
    bars = (
        alt.Chart(shares)
        .mark_bar()
        .encode(
            y=alt.Y("consumer_name:N", title=None, sort="-x"),
            x=alt.X("share:Q", title=title, axis=alt.Axis(format="%")),
            color=alt.Color("consumer_name:N", scale=alt.Scale(scheme=PALETTE), legend=None),
            tooltip=["consumer_name:N", alt.Tooltip("share:Q", format=".1%")],
        )
    )
    rule = (
        alt.Chart(pd.DataFrame({"fair": [fair]}))
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(x="fair:Q", tooltip=[alt.Tooltip("fair:Q", title="fair share", format=".1%")])
    )
    return alt.layer(bars, rule).properties(width="container", height=alt.Step(28))


def chart_hash_map(ranges: pd.DataFrame) -> alt.Chart:
    """One lane per consumer (and per source when the model drifts), ranges as bars."""
    data = _for_chart(ranges, ["consumer_name", "position", "start", "end", "size", "source"])
    data = data.assign(
        lane=data["consumer_name"] + " #" + data["position"].astype(str),
        source=data["source"].astype(str),
        stop=data["end"] + 1,
    )
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=_hash_axis(space_of(data)), title="sticky key hash"),
            x2="stop:Q",
            y=alt.Y("lane:N", title=None),
            color=alt.Color("lane:N", legend=None),
            row=alt.Row("source:N", title=None),
            tooltip=["consumer_name:N", "start:Q", "end:Q", "size:Q", "source:N"],
        )
    )
    return chart


def chart_shares(consumers: pd.DataFrame) -> alt.TopLevelMixin:
    """Each consumer's share with the fair share 1/n as a rule."""
    data = _for_chart(consumers, ["consumer_name", "position", "hashes", "share", "fair_share"])
    data = data.assign(lane=data["consumer_name"] + " #" + data["position"].astype(str))
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
    data = _for_chart(what_if, ["consumer_name", "position", "share_before", "share_after"])
    data = data.assign(lane=data["consumer_name"] + " #" + data["position"].astype(str)).melt(
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
