"""Overview: the cluster as of the newest poll, its errors, and whether polls still arrive."""

from __future__ import annotations

import streamlit as st

from core.markdown import escape_markdown
from dashboard import components, data, frames

st.title("Overview")
root = data.store_root()
status = components.require_snapshot(root)

components.poll_banner(root)
components.plugin_failures_banner()

with components.guarded("The overview"):
    names = ("brokers", "bundles", "topics", "subscriptions")
    snap = data.tables(root, status.snapshot_id, *names)
    counts = frames.compute_counts(snap, status.row_counts)
    row = st.columns(6)
    for column, (label, key) in zip(
        row,
        [
            ("Brokers", "brokers"),
            ("Namespaces", "namespaces"),
            ("Bundles", "bundles"),
            ("Topics", "topics"),
            ("Subscriptions", "subscriptions"),
            ("Consumers", "consumers"),
        ],
        strict=True,
    ):
        column.metric(label, counts[key])
    st.subheader("Brokers")
    st.dataframe(frames.compute_brokers(snap["brokers"], snap["bundles"]), hide_index=True)
    st.subheader("Namespaces and bundles")
    st.dataframe(frames.compute_namespaces(snap["bundles"], snap["topics"]), hide_index=True)
    st.caption(
        f"{counts['key_shared']} Key_Shared subscription(s); "
        f"{counts['draining_hashes']} hash(es) draining right now."
    )
    st.subheader("Errors of the newest poll")
    if status.errors.empty:
        st.success("Every admin call of the newest poll succeeded.")
    else:
        if failed := frames.failed_brokers(status.errors):
            st.warning(
                f"The calls to broker(s) {escape_markdown(', '.join(failed))} failed: their "
                "topics, bundles and load are missing from this snapshot (is the broker down?)."
            )
        st.dataframe(status.errors, hide_index=True)
