"""Pure Altair builders: a frame in, an `alt.Chart` out; no Streamlit, no I/O.

Each builder documents the columns it reads. Tests call `chart.to_dict()` and assert on the
Vega-Lite spec, so a builder must work on an empty frame too (the pages show a note instead,
but a chart of nothing must not raise).
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

HASH_SPACE = 65536
"""Key_Shared sticky hashes lie in [0, 65535] (4.0 uses [1, 65535])."""

DRAINING_COLOR = "#d62728"
UNOWNED = "(unowned)"
UNOWNED_COLOR = "#c7c7c7"
PALETTE = "tableau10"
"""Distinct hues for consumers and brokers (the default theme uses shades of one blue)."""


def _category(field: str, title: str, *, legend: alt.Legend | None = None) -> alt.Color:
    return alt.Color(
        field, title=title, scale=alt.Scale(scheme=PALETTE), legend=legend or alt.Legend()
    )


def _hash_axis() -> alt.Scale:
    return alt.Scale(domain=[0, HASH_SPACE], nice=False, zero=True)


def chart_hash_band(
    ranges: pd.DataFrame, draining: pd.DataFrame | None = None, *, thickness: int = 70
) -> alt.LayerChart:
    """The hash space 0-65535 as one band, coloured by consumer; draining hashes as red rules.

    `ranges`: consumer_name, start, end (inclusive). `draining`: consumer_name, hash,
    unack_msgs, blocked_attempts.
    """
    frame = ranges.assign(
        stop=ranges["end"] + 1, width=ranges["end"] - ranges["start"] + 1, lane="hashes"
    )
    band = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=_hash_axis(), title="sticky key hash (0–65535)"),
            x2="stop:Q",
            y=alt.Y("lane:N", title=None, axis=None),
            color=_category("consumer_name:N", "consumer", legend=alt.Legend(orient="top")),
            tooltip=["consumer_name:N", "start:Q", "end:Q", alt.Tooltip("width:Q", title="hashes")],
        )
    )
    layers: list[alt.Chart] = [band]
    if draining is not None and not draining.empty:
        layers.append(_draining_rules(draining))
    return alt.layer(*layers).properties(height=alt.Step(thickness), width="container")


def _draining_rules(draining: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(draining)
        .mark_rule(color=DRAINING_COLOR, strokeWidth=2)
        .encode(
            x=alt.X("hash:Q", scale=_hash_axis()),
            tooltip=[
                alt.Tooltip("hash:Q", title="draining hash"),
                alt.Tooltip("consumer_name:N", title="draining for"),
                alt.Tooltip("unack_msgs:Q", title="unacked"),
                alt.Tooltip("blocked_attempts:Q", title="blocked attempts"),
            ],
        )
    )


def chart_hash_ring(
    ranges: pd.DataFrame, draining: pd.DataFrame | None = None, *, size: int = 380
) -> alt.LayerChart:
    """The hash space as a ring (0 at the top, clockwise), arcs coloured by consumer.

    Same columns as `chart_hash_band`. Draining hashes are red ticks just outside the ring.
    """
    frame = ranges.assign(stop=ranges["end"] + 1, width=ranges["end"] - ranges["start"] + 1)
    ring = (
        alt.Chart(frame)
        .mark_arc(innerRadius=size * 0.24, outerRadius=size * 0.36, stroke="white", strokeWidth=0.3)
        .encode(
            theta=alt.Theta("start:Q", scale=_ring_scale()),
            theta2="stop:Q",
            color=_category("consumer_name:N", "consumer", legend=alt.Legend(orient="top")),
            tooltip=["consumer_name:N", "start:Q", "end:Q", alt.Tooltip("width:Q", title="hashes")],
        )
    )
    layers: list[alt.Chart] = [ring]
    if draining is not None and not draining.empty:
        layers.append(_draining_ticks(draining, size=size))
    return alt.layer(*layers).properties(width=size, height=size)


def _ring_scale() -> alt.Scale:
    return alt.Scale(domain=[0, HASH_SPACE], range=[0, 2 * math.pi])


RING_TICK_HALF_WIDTH = 150
"""Half the angular width of a draining tick, in hashes, so a single hash stays visible."""


def _draining_ticks(draining: pd.DataFrame, *, size: int) -> alt.Chart:
    ticks = draining.assign(
        from_hash=(draining["hash"] - RING_TICK_HALF_WIDTH).clip(lower=0),
        to_hash=(draining["hash"] + RING_TICK_HALF_WIDTH).clip(upper=HASH_SPACE),
    )
    return (
        alt.Chart(ticks)
        .mark_arc(innerRadius=size * 0.375, outerRadius=size * 0.43, color=DRAINING_COLOR)
        .encode(
            theta=alt.Theta("from_hash:Q", scale=_ring_scale()),
            theta2="to_hash:Q",
            tooltip=[
                alt.Tooltip("hash:Q", title="draining hash"),
                alt.Tooltip("consumer_name:N", title="draining for"),
                alt.Tooltip("unack_msgs:Q", title="unacked"),
                alt.Tooltip("blocked_attempts:Q", title="blocked attempts"),
            ],
        )
    )


def chart_share(shares: pd.DataFrame, *, title: str = "share of hash space") -> alt.LayerChart:
    """A share per consumer (of the hash space by default), with the fair share (1/n) as a
    dashed rule.

    `shares`: consumer_name, share (0-1).
    """
    fair = 1.0 / len(shares) if len(shares) else 0.0
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


def chart_what_if(rows: pd.DataFrame) -> alt.Chart:
    """Hash ranges now and under a what-if, one lane each, plus a lane of what moves.

    `rows`: lane ("now", "what-if", "moves"), consumer_name, start, end.
    """
    frame = rows.assign(stop=rows["end"] + 1, width=rows["end"] - rows["start"] + 1)
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", scale=_hash_axis(), title="sticky key hash (0–65535)"),
            x2="stop:Q",
            y=alt.Y("lane:N", title=None, sort=["now", "what-if", "moves"]),
            color=_category("consumer_name:N", "consumer", legend=alt.Legend(orient="top")),
            tooltip=["lane:N", "consumer_name:N", "start:Q", "end:Q", "width:Q"],
        )
        .properties(width="container", height=alt.Step(40))
    )


def chart_draining_timeline(timeline: pd.DataFrame) -> alt.Chart:
    """Draining hashes over time, one point per hash per poll, coloured by consumer.

    `timeline`: collected_at, hash, consumer_name, unack_msgs.
    """
    return (
        alt.Chart(timeline)
        .mark_tick(thickness=2)
        .encode(
            x=alt.X("collected_at:T", title="poll time"),
            y=alt.Y("hash:Q", scale=_hash_axis(), title="draining hash"),
            color=_category("consumer_name:N", "draining for"),
            tooltip=["collected_at:T", "hash:Q", "consumer_name:N", "unack_msgs:Q"],
        )
        .properties(width="container", height=240)
    )


def chart_failover_heatmap(assignment: pd.DataFrame) -> alt.Chart:
    """Partition x consumer: which consumer is active on each partition.

    `assignment`: partition (int), consumer_name, active (bool).
    """
    return (
        alt.Chart(assignment)
        .mark_rect(stroke="white")
        .encode(
            x=alt.X("partition:O", title="partition", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("consumer_name:N", title="consumer"),
            color=alt.Color(
                "active:N",
                scale=alt.Scale(domain=[True, False], range=["#1f77b4", "#eeeeee"]),
                title="active",
            ),
            tooltip=["partition:O", "consumer_name:N", "active:N"],
        )
        .properties(width="container", height=alt.Step(28))
    )


def chart_bar(frame: pd.DataFrame, *, label: str, value: str, title: str = "") -> alt.Chart:
    """Horizontal bars of `value` by `label`, largest first (whole-number ticks for counts)."""
    counts = pd.api.types.is_integer_dtype(frame[value]) if value in frame else False
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y(f"{label}:N", title=None, sort="-x"),
            x=alt.X(
                f"{value}:Q",
                title=title or value.replace("_", " "),
                axis=alt.Axis(tickMinStep=1, format="d") if counts else alt.Axis(),
            ),
            tooltip=[f"{label}:N", f"{value}:Q"],
        )
        .properties(width="container", height=alt.Step(24))
    )


def chart_ownership(ownership: pd.DataFrame, events: pd.DataFrame | None = None) -> alt.LayerChart:
    """Broker x bundle ownership over time: one lane per bundle, coloured by owner.

    `ownership`: collected_at, bundle_key ("tenant/ns/0x…_0x…"), owner_broker (None when
    unowned). `events`: at, kind, subject — drawn as rules across the chart.
    """
    frame = with_spans(ownership, time="collected_at", lane="bundle_key")
    frame["owner"] = frame["owner_broker"].fillna(UNOWNED)
    lanes = (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("collected_at:T", title="poll time"),
            x2="until:T",
            y=alt.Y("bundle_key:N", title=None, axis=alt.Axis(labelLimit=360)),
            color=alt.Color(
                "owner:N",
                title="owner broker",
                scale=_owner_scale(frame["owner"]),
                legend=alt.Legend(orient="top"),
            ),
            tooltip=["bundle_key:N", "owner:N", "collected_at:T"],
        )
    )
    layers: list[alt.Chart] = [lanes]
    if events is not None and not events.empty:
        rules = (
            alt.Chart(events)
            .mark_rule(color="black", strokeDash=[2, 2])
            .encode(x="at:T", tooltip=["at:T", "kind:N", "subject:N", "before:N", "after:N"])
        )
        layers.append(rules)
    return alt.layer(*layers).properties(width="container", height=alt.Step(22))


TABLEAU10 = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip


def _owner_scale(owners: pd.Series) -> alt.Scale:
    """A hue per broker, grey for a bundle nobody owns."""
    brokers = sorted(set(owners) - {UNOWNED})
    colors = [TABLEAU10[i % len(TABLEAU10)] for i in range(len(brokers))]
    return alt.Scale(domain=[*brokers, UNOWNED], range=[*colors, UNOWNED_COLOR])


def with_spans(frame: pd.DataFrame, *, time: str, lane: str) -> pd.DataFrame:
    """Add `until`: the next poll time in the same lane (the last row gets a typical gap)."""
    ordered = frame.sort_values([lane, time]).copy()
    until = ordered.groupby(lane)[time].shift(-1)
    times = pd.Series(ordered[time].unique()).sort_values()
    gap = times.diff().median() if len(times) > 1 else pd.Timedelta(seconds=10)
    if pd.isna(gap):
        gap = pd.Timedelta(seconds=10)
    ordered["until"] = until.fillna(ordered[time] + gap)
    return ordered


def chart_series(frame: pd.DataFrame, *, x: str, y: str, color: str | None = None) -> alt.Chart:
    """A line over time of `y`, one line per `color` value when given."""
    encoding: dict[str, object] = {
        "x": alt.X(f"{x}:T", title=None),
        "y": alt.Y(f"{y}:Q", title=y.replace("_", " ")),
        "tooltip": [f"{x}:T", f"{y}:Q", *([f"{color}:N"] if color else [])],
    }
    if color:
        encoding["color"] = alt.Color(f"{color}:N", title=color.replace("_", " "))
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(**encoding)
        .properties(width="container", height=200)
    )
