"""Key_Shared: how one subscription splits the hash space, what is stuck, where a key goes."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, components, data, sections

SLUG = "key-shared-map"

st.title("Key_Shared")
root = data.store_root()
status = components.require_snapshot(root)
subs = data.key_shared_subscriptions(root, status.snapshot_id)
if subs.empty:
    st.info(
        "No Key_Shared subscription in the newest snapshot. Subscribe a consumer with "
        "`consumer_type=KeyShared` (the demo does) and wait for the next poll."
    )
    st.stop()

label = st.selectbox("Subscription", list(subs["label"]), key="key_shared_subscription")
view = None
with components.guarded("Reading the subscription"):
    view = data.key_shared_view(root, status.snapshot_id, label)
if view is None:
    st.stop()

with components.guarded("The hash space"):
    m = st.columns(5)
    m[0].metric("Consumers", len(view.consumers))
    m[1].metric("Imbalance", f"{view.imbalance:.2f}×", help="largest share / fair share")
    m[2].metric("Draining hashes", len(view.draining))
    m[3].metric("Backlog", view.msg_backlog)
    m[4].metric("In replay", view.msg_in_replay, help="messages held back, e.g. for ordering")
    style = st.radio("Draw as", ["Ring", "Band"], horizontal=True, key="key_shared_style")
    left, right = st.columns([3, 2])
    with left:
        chart = charts.chart_hash_ring if style == "Ring" else charts.chart_hash_band
        components.draw_chart(
            chart(view.ranges, view.draining),
            title="Hash space by consumer",
            caption=f"selector: {view.kind}; red marks are draining hashes",
        )
    with right:
        components.draw_chart(charts.chart_share(view.shares), title="Share per consumer")
        st.dataframe(view.shares, hide_index=True, key="key_shared_shares")
    if not view.draining.empty:
        st.markdown("**Draining hashes** (held until their consumer acknowledges)")
        st.dataframe(view.draining, hide_index=True, key="key_shared_draining")

sections.draw_key_traffic(root, status.snapshot_id, label)
sections.draw_key_lookup(root, status.snapshot_id, label)
sections.draw_what_if(root, status.snapshot_id, view)

components.draw_plugin_section(
    root, status, SLUG, offer="Check every subscription against our selector model",
    key="key_shared_all",
)  # fmt: skip
