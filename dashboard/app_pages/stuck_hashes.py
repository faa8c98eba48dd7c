"""Stuck hashes: draining hashes across the cluster, and one subscription's over time."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, components, data

SLUG = "stuck-hashes"

st.title("Stuck hashes")
st.caption(
    "A hash drains when its range moved to another consumer while the old one still held "
    "unacknowledged messages of it; new messages with that hash wait until they are acked."
)
root = data.store_root()
status = components.require_snapshot(root)

if data.plugin_loaded(SLUG):
    components.draw_plugin(root, SLUG)
else:
    components.plugin_missing(SLUG)
    snap = data.tables(root, status.snapshot_id, "draining_hashes")
    st.dataframe(snap["draining_hashes"], hide_index=True)

st.subheader("Timeline of one subscription")
polls = st.slider("Polls to show", 5, 500, 60, key="stuck_polls")
labels = data.stuck_subscriptions(root, status.snapshot_id, polls)
if not labels:
    st.success(f"No hash was draining in the last {polls} polls.")
    st.stop()
label = st.selectbox("Subscription", labels, key="stuck_subscription")
with components.guarded("The timeline"):
    timeline = data.draining_timeline(root, status.snapshot_id, label, polls)
    components.draw_chart(
        charts.chart_draining_timeline(timeline),
        title="Draining hashes per poll",
        caption="a hash that stays for many polls is stuck behind an unacknowledged message",
    )
