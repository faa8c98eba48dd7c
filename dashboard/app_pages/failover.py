"""Failover: the active consumer of each partition, flapping, and what PIP-392 would change."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, components, data

SLUG = "failover-assignment"

st.title("Failover")
root = data.store_root()
status = components.require_snapshot(root)
labels = data.failover_subscriptions(root, status.snapshot_id)
if not labels:
    st.info(
        "No Failover subscription in the newest snapshot. Subscribe consumers with "
        "`consumer_type=Failover` to a partitioned topic (the demo does) and wait for a poll."
    )
    st.stop()

label = st.selectbox("Subscription", labels, key="failover_subscription")
polls = st.slider("Polls for flapping", 5, 500, 60, key="failover_polls")
with components.guarded("The failover assignment"):
    view = data.failover_view(root, status.snapshot_id, label, polls)
    left, right = st.columns([3, 2])
    with left:
        components.draw_chart(
            charts.chart_failover_heatmap(view.assignment), title="Active consumer per partition"
        )
    with right:
        components.draw_chart(
            charts.chart_bar(view.per_consumer, label="consumer_name", value="partitions"),
            title="Partitions per consumer",
        )
    st.markdown("**Flapping** (active-consumer changes over the stored polls)")
    st.dataframe(view.flaps, hide_index=True, key="failover_flaps")
    st.markdown("**PIP-392 what-if**: modulo (default) vs consistent hashing, same consumers")
    st.metric("Partitions that would change consumer", view.pip392_moves)
    st.dataframe(view.pip392, hide_index=True, key="failover_pip392")
    st.caption(
        "`activeConsumerFailoverConsistentHashing=true` makes the broker hash each partition "
        "name onto a ring, so a joining or leaving consumer moves fewer partitions."
    )

components.draw_plugin_section(
    root, status, SLUG, offer="Check every Failover group against the broker's rules",
    key="failover_all",
)  # fmt: skip
