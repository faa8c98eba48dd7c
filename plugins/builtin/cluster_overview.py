"""`cluster-overview`: the cluster at a glance, as the Overview page shows it.

Of the newest snapshot: how many brokers, namespaces, bundles, topics, subscriptions and
consumers it holds, how many subscriptions are Key_Shared and how many hashes drain; per
broker, the bundles it owns; per namespace, its bundles, how many are owned and by whom, its
topics and their backlog. Analysed once per snapshot like every light plugin, so the Overview
reads these small frames instead of the large tables (at a million topics, reading and
grouping the topics alone took seconds on every cold page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    Chart,
    Columns,
    Inputs,
    Metric,
    Note,
    Result,
    Section,
    Table,
    View,
    empty_frame,
)

if TYPE_CHECKING:
    import altair as alt

COUNTS = ("brokers", "namespaces", "bundles", "topics", "subscriptions", "consumers")
"""The headline counts, in the order the Overview shows them."""
COUNT_COLUMNS = [*COUNTS, "key_shared", "draining_hashes"]
BROKER_COLUMNS = ["broker_id", "version", "is_leader", "owned_bundles", "num_topics", "msg_rate_in"]
NAMESPACE_COLUMNS = ["namespace", "bundles", "owned", "owners", "topics", "backlog_bytes"]


class ClusterOverview(AnalysisPlugin):
    name = "cluster-overview"
    title = "Cluster overview"
    description = (
        "Brokers, namespaces, bundles, topics, subscriptions and consumers of the newest "
        "snapshot; the bundles each broker owns; per namespace its bundles, owners, topics "
        "and backlog."
    )
    version = "1.0"
    engine = "light"
    inputs = ("brokers", "bundles", "topics", "subscriptions", "consumers", "draining_hashes")
    history = 1
    columns_of = {  # of the large tables, one narrow column each: the rows are what counts
        "topics": ("namespace", "backlog_size"),
        "subscriptions": ("type",),
        "consumers": ("unacked_messages",),
        "draining_hashes": ("hash",),
    }
    outputs = ("counts", "brokers", "namespaces")

    def analyze(self, data: Inputs, params: BaseModel) -> Result:
        tables = {name: data.latest(name) for name in self.inputs}
        counts = compute_counts(tables)
        return Result(
            frames={
                "counts": pd.DataFrame([counts], columns=COUNT_COLUMNS),
                "brokers": compute_brokers(tables["brokers"], tables["bundles"]),
                "namespaces": compute_namespaces(tables["bundles"], tables["topics"]),
            },
            summary=counts,
        )

    def render(self, result: Result, params: BaseModel | None = None) -> list[View]:
        counts = result.frames["counts"]
        row = counts.iloc[0] if len(counts) else pd.Series(0, index=COUNT_COLUMNS)
        brokers, namespaces = result.frames["brokers"], result.frames["namespaces"]
        views: list[View] = [
            Columns([[Metric(name.capitalize(), int(row[name]))] for name in COUNTS]),
            Section("Brokers"),
        ]
        if len(brokers):
            views.append(Chart(chart_owned(brokers), title="Bundles owned per broker"))
        views += [
            Table(brokers),
            Section("Namespaces and bundles"),
            Table(namespaces),
            Note(
                f"{int(row['key_shared'])} Key_Shared subscription(s); "
                f"{int(row['draining_hashes'])} hash(es) draining right now."
            ),
        ]
        return views


def compute_counts(tables: dict[str, pd.DataFrame]) -> dict[str, int]:
    """Headline counts of one snapshot's tables (`subscriptions` needs its `type`)."""
    subs, bundles = tables["subscriptions"], tables["bundles"]
    counts = {name: len(tables[name]) for name in tables}
    return {
        "brokers": counts["brokers"],
        "namespaces": int(bundles["namespace"].nunique()) if len(bundles) else 0,
        "bundles": counts["bundles"],
        "topics": counts["topics"],
        "subscriptions": counts["subscriptions"],
        "consumers": counts["consumers"],
        "key_shared": int((subs["type"] == "Key_Shared").sum()) if len(subs) else 0,
        "draining_hashes": counts["draining_hashes"],
    }


def compute_namespaces(bundles: pd.DataFrame, topics: pd.DataFrame) -> pd.DataFrame:
    """Per namespace: bundles, bundles owned, owners, topics, backlog (bytes)."""
    if bundles.empty and topics.empty:
        return empty_frame(NAMESPACE_COLUMNS)
    per_bundle = bundles.groupby("namespace").agg(
        bundles=("bundle", "size"),
        owned=("owner_broker", "count"),
        owners=("owner_broker", lambda s: ", ".join(sorted(set(s.dropna())))),
    )
    # rows counted on backlog_size ("size" counts nulls too): no topic name is read, most of
    # the table's bytes at a million topics
    per_topic = topics.groupby("namespace").agg(
        topics=("backlog_size", "size"), backlog_bytes=("backlog_size", "sum")
    )
    out = per_bundle.join(per_topic, how="outer").reset_index()
    out[["bundles", "owned", "topics"]] = out[["bundles", "owned", "topics"]].fillna(0).astype(int)
    return out[NAMESPACE_COLUMNS].sort_values("namespace").reset_index(drop=True)


def compute_brokers(brokers: pd.DataFrame, bundles: pd.DataFrame) -> pd.DataFrame:
    """Brokers with the bundles they own in this snapshot."""
    if brokers.empty:
        return empty_frame(BROKER_COLUMNS)
    owned = bundles.groupby("owner_broker").size() if len(bundles) else pd.Series(dtype=int)
    out = brokers.assign(owned_bundles=brokers["broker_id"].map(owned).fillna(0).astype(int))
    return out[BROKER_COLUMNS].sort_values("broker_id").reset_index(drop=True)


def chart_owned(brokers: pd.DataFrame) -> alt.Chart:
    """One bar per broker: the bundles it owns, the load manager's leader marked."""
    import altair as alt  # on use: discovering plugins needs no altair

    frame = brokers[["broker_id", "owned_bundles", "is_leader"]].assign(
        leader=brokers["is_leader"].astype("boolean").fillna(False).map({True: "yes", False: "no"})
    )
    chart: alt.Chart = (
        alt.Chart(frame.drop(columns="is_leader"))
        .mark_bar()
        .encode(
            x=alt.X("owned_bundles:Q", title="bundles owned"),
            y=alt.Y("broker_id:N", sort="-x", title="broker"),
            color=alt.Color("leader:N", title="load-manager leader"),
            tooltip=["broker_id:N", "owned_bundles:Q", "leader:N"],
        )
    )
    return chart
