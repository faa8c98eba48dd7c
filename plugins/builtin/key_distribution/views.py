"""`key-distribution`'s views: the chosen subscription's consumers, hashes, hot keys and
what-ifs, and every subscription's skew."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from plugins.api import Chart, Columns, Metric, Note, Result, Section, Table, Tabs, View


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    skew = frames["skew"]
    if skew.empty:
        return [
            Note(
                "No sampled keys of a Key_Shared subscription in the stored polls: turn key "
                "sampling on (`collect --sample-keys`) to see where the keys go."
            )
        ]
    label = str(summary.get("selected") or summary.get("most_skewed") or skew["label"].iloc[0])
    mine = {name: frame[frame["label"] == label] for name, frame in frames.items()}
    row = skew[skew["label"] == label]
    views: list[View] = [Note(f"Subscription: `{label}`")]
    if len(row):
        r = row.iloc[0]
        views += [
            Metric("Sampled messages", f"{int(r['messages']):,}"),
            Metric("Consumers", int(r["consumers"])),
            Metric("Busiest / fair share", _ratio(r["max_over_fair"])),
            Metric("Gini", "—" if pd.isna(r["gini"]) else f"{r['gini']:.2f}"),
        ]
    views.append(
        Columns(
            (
                (Chart(_consumer_bars(mine["consumers"]), title="Messages per consumer"),),
                (Chart(_hash_histogram(mine["hash_bins"]), title="Messages over the hash space"),),
            )
        )
    )
    views.append(
        Tabs(
            (
                ("Hot keys", (Table(mine["hot_keys"], caption="most sampled first"),)),
                (
                    "What-if",
                    (
                        Chart(_what_if_lines(mine["what_if"]), title="Busiest over fair share"),
                        Table(mine["what_if"]),
                    ),
                ),
                ("Sticky plan", (Table(mine["sticky_plan"], caption="planner, 100 points"),)),
            )
        )
    )
    views += [
        Section("Every subscription", caption="skew of the sampled messages, worst first"),
        Table(skew.sort_values(["max_over_fair", "label"], ascending=[False, True])),
    ]
    return views


def _ratio(value: object) -> str:
    return "—" if value is None or pd.isna(value) else f"{float(value):.2f}×"  # type: ignore[arg-type]


def _consumer_bars(consumers: pd.DataFrame) -> Any:
    return (
        alt.Chart(consumers)
        .mark_bar()
        .encode(
            x=alt.X("messages:Q", title="sampled messages"),
            y=alt.Y("consumer_name:N", title=None, sort="-x"),
            tooltip=["consumer_name", "messages", alt.Tooltip("share:Q", format=".1%")],
        )
    )


def _hash_histogram(bins: pd.DataFrame) -> Any:
    return (
        alt.Chart(bins)
        .mark_bar()
        .encode(
            x=alt.X("bin_start:Q", bin="binned", title="hash", scale=alt.Scale(domain=[0, 65536])),
            x2="bin_end:Q",
            y=alt.Y("messages:Q", title="sampled messages"),
            tooltip=["bin_start", "bin_end", "messages"],
        )
    )


def _what_if_lines(what_if: pd.DataFrame) -> Any:
    return (
        alt.Chart(what_if)
        .mark_line(point=True)
        .encode(
            x=alt.X("consumers:O", title="consumers"),
            y=alt.Y("max_over_fair:Q", title="busiest share / fair share"),
            color=alt.Color("points:N", title="replica points"),
            tooltip=["consumers", "points", "max_over_fair", "moved_share"],
        )
    )
