"""Views of `key-shared-map`, laid out as its page: the selected subscription first (hash
space, draining hashes, sampled traffic, key lookup, what-if), then every subscription."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
from pulsar_lens.plugins.builtin.key_shared_map.charts import (
    chart_hash_band,
    chart_hash_map,
    chart_hash_ring,
    chart_share,
    chart_shares,
    chart_what_if,
)

DRAINING_MARKS = "red marks are draining hashes"
TRAFFIC_HELP = "largest share of the sampled messages / fair share (1/n)"
NO_SAMPLES = (
    "No key samples for this topic yet. `pulsar-lens collect --sample-keys` reads recent "
    "message keys with a non-durable reader (the demo does)."
)


def render_views(result: Result) -> list[View]:
    frames, summary = result.frames, result.summary
    subs = frames["subscriptions"]
    if subs.empty:
        return [
            Note(
                "No Key_Shared subscription with consumers in the newest snapshot. Subscribe "
                "a consumer with `consumer_type=KeyShared` (the demo does) and wait for a poll."
            )
        ]
    selected = summary["selected"]
    views: list[View] = []
    if (subs["label"] == selected).any():  # no set of every label: 224,000 at 1,000,000 topics
        views.extend(_selected_views(frames, summary, selected))
    else:
        views.append(
            Note(
                f"No Key_Shared subscription {escape_markdown(selected)} in the snapshot.",
                "warning",
            )
        )
    views.extend(_every_subscription(subs, summary))
    return views


def _selected_views(
    frames: Mapping[str, pd.DataFrame], summary: Mapping[str, Any], selected: str
) -> list[View]:
    subs = frames["subscriptions"]
    row = subs[subs["label"] == selected].iloc[0]  # no index of every label to find one
    ranges = frames["ranges"][frames["ranges"]["label"] == selected]
    broker = ranges[ranges["source"] == "broker"]
    consumers = frames["consumers"][frames["consumers"]["label"] == selected]
    draining = frames["draining"][frames["draining"]["label"] == selected]
    views: list[View] = [
        Section(
            selected,
            caption=f"selector: {escape_markdown(row['selector'])}; "
            f"{escape_markdown(summary['model'])}; {DRAINING_MARKS}",
        ),
        Metric("Consumers", int(row["consumers"])),
        Metric("Imbalance", f"{row['imbalance']:.2f}×", help="largest share / fair share"),
        Metric("Draining hashes", len(draining)),
        Metric("Backlog", int(row["msg_backlog"])),
        Metric("In replay", int(row["msg_in_replay"]), help="messages held back for ordering"),
    ]
    if bool(row["drift"]):
        reason = escape_markdown(row["drift_reason"])
        views.append(Note(f"Drifts from our model: {reason}", "warning"))
    shape = Tabs(
        (
            ("Ring", (Chart(chart_hash_ring(broker, draining), title="Hash space by consumer"),)),
            ("Band", (Chart(chart_hash_band(broker, draining), title="Hash space by consumer"),)),
            ("Lanes", (Chart(chart_hash_map(ranges), title="Ranges per consumer and source"),)),
        )
    )
    shares = (Chart(chart_shares(consumers), title="Share of the hash space"),)
    views.append(Columns(((shape,), shares), widths=(3, 2)))
    views.append(Table(consumers, title="Consumers", caption="In connection order"))
    if len(draining):
        views.append(
            Table(draining, title="Draining hashes", caption="held until their consumer acks")
        )
    views.extend(_traffic_views(frames["traffic"]))
    views.extend(_lookup_views(summary))
    views.extend(_what_if_views(frames, summary))
    return views


def _traffic_views(traffic: pd.DataFrame) -> list[View]:
    views: list[View] = [Section("Sampled traffic per consumer")]
    if traffic.empty:
        return [*views, Note(NO_SAMPLES)]
    views += [
        Metric("Sampled messages", int(traffic["sampled_messages"].sum())),
        Metric("Traffic imbalance", f"{traffic['vs_fair'].max():.2f}×", help=TRAFFIC_HELP),
        Metric("Distinct keys", int(traffic["distinct_keys"].sum())),
        Columns(
            (
                (
                    Chart(
                        chart_share(traffic, title="share of sampled messages"),
                        title="Share of sampled messages",
                        caption="hot keys load whichever consumer owns their hashes",
                    ),
                ),
                (Table(traffic.drop(columns=["label"])),),
            ),
            widths=(3, 2),
        ),
    ]
    return views


def _lookup_views(summary: Mapping[str, Any]) -> list[View]:
    views: list[View] = [Section("Which consumer gets key K?")]
    hit = summary.get("lookup")
    if hit is None:
        return [*views, Note("Type a message key to see its sticky hash and its consumer.")]
    views += [
        Metric("Sticky hash", hit["hash"]),
        Metric("Consumer", hit["consumer"] or "none"),
        Metric("Draining for", hit["draining_for"] or "—"),
    ]
    holder = hit["draining_for"]
    if holder and holder != hit["consumer"]:
        views.append(
            Note(
                f"Hash {hit['hash']} is still draining for {escape_markdown(holder)}: new "
                f"messages with key {escape_markdown(hit['key'])} wait until it acknowledges "
                "the ones it holds.",
                "warning",
            )
        )
    return views


def _what_if_views(frames: Mapping[str, pd.DataFrame], summary: Mapping[str, Any]) -> list[View]:
    views: list[View] = [Section("What if")]
    if "what_if" not in summary:
        return [*views, Note("Name a consumer that joins or leaves, or other replica points.")]
    facts = summary["what_if"]
    return [
        *views,
        Metric(f"Hash space that moves ({facts['change']})", f"{facts['moved_fraction']:.1%}"),
        Chart(
            chart_what_if(frames["what_if"]),
            title="Shares before and after",
            caption="consumers that lose hashes with unacknowledged messages start draining them",
        ),
        Table(frames["moves"], title="Moved ranges", caption="Hashes that change consumer"),
        Table(frames["what_if"], title="Per consumer"),
    ]


def _every_subscription(subs: pd.DataFrame, summary: Mapping[str, Any]) -> list[View]:
    views: list[View] = [
        Section("Every Key_Shared subscription"),
        Metric("Key_Shared subscriptions", summary["subscriptions"]),
        Metric("Drifting from the model", summary["drifting"]),
        Metric("Worst imbalance", f"{summary['max_imbalance']:.2f}x", help="largest share / 1/n"),
    ]
    for row in subs[subs["drift"].astype(bool)].head(20).itertuples(index=False):
        label, reason = escape_markdown(row.label), escape_markdown(row.drift_reason)
        views.append(Note(f"**{label}** drifts from our model: {reason}", "warning"))
    ranked = subs.sort_values(
        ["draining_hashes", "imbalance", "label"], ascending=[False, False, True]
    )
    views.append(Table(ranked, title="Subscriptions", caption="most draining hashes first"))
    return views
