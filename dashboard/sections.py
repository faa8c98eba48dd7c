"""Page sections with several widgets: the Key_Shared traffic, lookup box and what-if.

Kept out of the page scripts so the pages stay thin; widget keys are prefixed by the page.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.limits import MAX_REPLICA_POINTS
from dashboard import charts, components, data
from dashboard.keyshared import KeySharedView

CHANGES = ("add a consumer", "remove a consumer", "change replica points")


def draw_key_traffic(root: str, snapshot_id: str, label: str) -> None:
    st.subheader("Sampled traffic per consumer")
    with components.guarded("The sampled traffic"):
        traffic = data.key_traffic(root, snapshot_id, label)
        if traffic.empty:
            st.caption(
                "No key samples for this topic yet. `pulsar-lens collect --sample-keys` reads "
                "recent message keys with a non-durable reader (the demo does)."
            )
            return
        sampled = int(traffic["sampled_messages"].sum())
        c = st.columns(3)
        c[0].metric("Sampled messages", sampled)
        c[1].metric("Traffic imbalance", f"{traffic['vs_fair'].max():.2f}×", help=TRAFFIC_HELP)
        c[2].metric("Distinct keys", int(traffic["distinct_keys"].sum()))
        left, right = st.columns([3, 2])
        with left:
            components.draw_chart(
                charts.chart_share(traffic, title="share of sampled messages"),
                title="Share of sampled messages",
                caption="hot keys load whichever consumer owns their hashes",
            )
        with right:
            st.dataframe(traffic, hide_index=True, key="key_shared_traffic")


TRAFFIC_HELP = "largest share of the sampled messages / fair share (1/n)"


def draw_key_lookup(root: str, snapshot_id: str, label: str) -> None:
    st.subheader("Which consumer gets key K?")
    key = st.text_input("Message key", key="key_shared_lookup_key", placeholder="customer-42")
    if not key:
        st.caption("Type a partition key to see its sticky hash and the consumer it goes to.")
        return
    with components.guarded("The key lookup"):
        found = data.lookup_key(root, snapshot_id, label, key)
        c = st.columns(3)
        c[0].metric("Sticky hash", found.hash)
        c[1].metric("Consumer", found.consumer or "none")
        c[2].metric("Draining for", found.draining_for or "—")
        if found.draining_for and found.draining_for != found.consumer:
            st.warning(
                f"Hash {found.hash} is still draining for `{found.draining_for}`: new messages "
                f"with key `{key}` wait until it acknowledges the ones it holds."
            )


def what_if_change(view: KeySharedView) -> dict[str, Any]:
    """The controls of the what-if; returns the key-shared-map params of the change."""
    change = st.radio("What if", CHANGES, horizontal=True, key="key_shared_change")
    if change == CHANGES[0]:
        name = st.text_input("New consumer name", key="key_shared_add", placeholder="consumer-x")
        return {"add_consumer": name.strip()} if name.strip() else {}
    if change == CHANGES[1]:
        if not view.consumers:
            return {}
        name = st.selectbox("Consumer that leaves", view.consumers, key="key_shared_remove")
        return {"remove_consumer": name}
    points = st.number_input(
        "Replica points",
        min_value=1,
        max_value=MAX_REPLICA_POINTS,
        value=100,
        key="key_shared_points",
    )
    return {"what_if_points": int(points)}


def draw_what_if(root: str, snapshot_id: str, view: KeySharedView) -> None:
    st.subheader("What if")
    if not data.plugin_loaded(data.KEY_SHARED_MAP):
        components.plugin_missing(data.KEY_SHARED_MAP)
        return
    if view.kind == "sticky":
        st.info("STICKY subscriptions keep the ranges their consumers ask for; nothing moves.")
        return
    change = what_if_change(view)
    if not change:
        st.caption("Name a consumer to see which hashes would move to it.")
        return
    with components.guarded("The what-if"):
        label = f"{view.topic} | {view.subscription}"
        result = data.key_shared_what_if(root, snapshot_id, label, change)
        if result is None:
            st.info("The analysis reported no what-if for this subscription.")
            return
        st.metric(f"Hash space that moves ({result.change})", f"{result.moved_fraction:.1%}")
        components.draw_chart(
            charts.chart_what_if(result.lanes),
            caption="consumers that lose hashes with unacknowledged messages start draining them",
        )
        st.dataframe(result.per_consumer, hide_index=True, key="key_shared_what_if")
