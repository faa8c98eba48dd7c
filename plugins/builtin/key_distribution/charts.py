"""`key-distribution`'s Altair charts: pure frame -> chart builders."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from pulsar_lens.core.keyload import UNCOVERED


def chart_consumers(consumers: pd.DataFrame) -> Any:
    """Sampled messages per consumer, the busiest first; the uncovered ones in grey."""
    covered = alt.condition(
        alt.datum.consumer_name == UNCOVERED, alt.value("#9e9e9e"), alt.value("#4c78a8")
    )
    return (
        alt.Chart(consumers)
        .mark_bar()
        .encode(
            x=alt.X("messages:Q", title="sampled messages"),
            y=alt.Y("consumer_name:N", title=None, sort="-x"),
            color=covered,
            tooltip=[
                "consumer_name",
                "messages",
                alt.Tooltip("share:Q", format=".1%"),
                alt.Tooltip("over_fair:Q", format=".2f", title="over fair share"),
            ],
        )
    )


def chart_hash_bins(bins: pd.DataFrame) -> Any:
    """Sampled messages over the hash space (0..65535, or 3.0's 31-bit ring), in 256 bins."""
    top = max(65536, int(bins["bin_end"].max()) + 1) if len(bins) else 65536
    return (
        alt.Chart(bins)
        .mark_bar()
        .encode(
            x=alt.X("bin_start:Q", bin="binned", title="hash", scale=alt.Scale(domain=[0, top])),
            x2="bin_end:Q",
            y=alt.Y("messages:Q", title="sampled messages"),
            tooltip=["bin_start", "bin_end", "messages"],
        )
    )


def chart_what_if(what_if: pd.DataFrame) -> Any:
    """Busiest consumer over the fair share by consumer count, one line per replica points."""
    return (
        alt.Chart(what_if)
        .mark_line(point=True)
        .encode(
            x=alt.X("consumers:O", title="consumers"),
            y=alt.Y("max_over_fair:Q", title="busiest share / fair share"),
            color=alt.Color("points:N", title="replica points"),
            tooltip=[
                "consumers",
                "points",
                alt.Tooltip("max_over_fair:Q", format=".2f"),
                alt.Tooltip("moved_share:Q", format=".1%", title="messages moved"),
            ],
        )
    )


def now_and_planned(consumers: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """Each consumer's share over the fair share now, beside each planned node's."""
    now = consumers[consumers["consumer_name"] != UNCOVERED]
    return pd.concat(
        [
            pd.DataFrame(
                {"ranges": "now", "consumer": now["consumer_name"], "over_fair": now["over_fair"]}
            ),
            pd.DataFrame(
                {"ranges": "planned", "consumer": plan["node"], "over_fair": plan["over_fair"]}
            ),
        ],
        ignore_index=True,
    )


def chart_now_and_planned(frame: pd.DataFrame) -> Any:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("over_fair:Q", title="share / fair share"),
            y=alt.Y("consumer:N", title=None),
            color=alt.Color("ranges:N", title="ranges"),
            row=alt.Row("ranges:N", title=None),
            tooltip=["ranges", "consumer", alt.Tooltip("over_fair:Q", format=".2f")],
        )
    )
