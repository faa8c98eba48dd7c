"""`key-distribution`'s views: the chosen subscription's consumers, hashes, hot keys and
what-ifs, with the Pulsar line modelled (`summary["model"]`), then every subscription's
skew."""

from __future__ import annotations

import pandas as pd

from pulsar_lens.api import (
    Chart,
    Columns,
    Metric,
    Note,
    Result,
    Section,
    Table,
    Tabs,
    View,
    escape_markdown,
)
from pulsar_lens.plugins.builtin.key_distribution.charts import (
    chart_consumers,
    chart_hash_bins,
    chart_now_and_planned,
    chart_what_if,
    now_and_planned,
)


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
    label = str(summary.get("selected") or skew["label"].iloc[0])
    if label not in set(skew["label"]):
        return [
            Note(f"No sampled keys for {escape_markdown(label)} in the stored polls."),
            *_every(skew),
        ]
    mine = {name: frame[frame["label"] == label] for name, frame in frames.items()}
    model = str(summary.get("model") or "Pulsar 4.0 model (brokers: version unknown)")
    return [
        Note(f"Subscription {escape_markdown(label)}; {escape_markdown(model)}"),
        Columns(tuple((m,) for m in _metrics(mine["skew"].iloc[0]))),
        Columns(
            (
                (Chart(chart_consumers(mine["consumers"]), title="Messages per consumer"),),
                (Chart(chart_hash_bins(mine["hash_bins"]), title="Messages over the hash space"),),
            )
        ),
        Tabs(
            (
                ("Hot keys", (Table(mine["hot_keys"], caption="most sampled first"),)),
                (
                    "What-if",
                    (
                        Chart(chart_what_if(mine["what_if"]), title="Busiest over fair share"),
                        Table(mine["what_if"]),
                    ),
                ),
                (
                    "Sticky plan",
                    (
                        Chart(
                            chart_now_and_planned(
                                now_and_planned(mine["consumers"], mine["sticky_plan"])
                            ),
                            title="Now and under the planned sticky ranges",
                        ),
                        Table(mine["sticky_plan"]),
                    ),
                ),
            )
        ),
        *_every(skew),
    ]


def _metrics(row: pd.Series) -> list[View]:
    return [
        Metric("Sampled messages", f"{int(row['messages']):,}"),
        Metric("Consumers", int(row["consumers"])),
        Metric("Busiest / fair share", _ratio(row["max_over_fair"])),
        Metric("Gini", "—" if pd.isna(row["gini"]) else f"{float(row['gini']):.2f}"),
        Metric("Planned busiest / fair", _ratio(row["planned_max_over_fair"])),
    ]


def _every(skew: pd.DataFrame) -> list[View]:
    ordered = skew.sort_values(["max_over_fair", "label"], ascending=[False, True])
    return [
        Section("Every subscription", caption="skew of the sampled messages, the worst first"),
        Table(ordered.reset_index(drop=True)),
    ]


def _ratio(value: object) -> str:
    return "—" if value is None or pd.isna(value) else f"{float(value):.2f}×"  # type: ignore[arg-type]
