"""Overview: the cluster as of the newest poll, its errors, and whether polls still arrive."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data, frames
from dashboard.frames import format_age

st.title("Overview")
root = data.store_root()
status = components.require_snapshot(root)

if status.stale:
    st.error(
        f"Polls have stopped: the newest snapshot is {format_age(status.age_seconds)} old "
        f"(expected one every {data.poll_interval_seconds():.0f}s). Is `pulsar-lens collect` "
        "running and can it reach the admin API?"
    )
if status.partial:
    st.warning(
        f"The newest snapshot is partial: {len(status.errors)} admin call(s) failed, so some "
        "tables may be incomplete. The failed calls are listed below."
    )

with components.guarded("The overview"):
    names = ("brokers", "bundles", "topics", "subscriptions", "consumers", "draining_hashes")
    snap = data.tables(root, status.snapshot_id, *names)
    counts = frames.compute_counts(snap)
    st.caption(
        f"Cluster `{status.cluster}` · snapshot {status.collected_at:%Y-%m-%d %H:%M:%S} UTC "
        f"({format_age(status.age_seconds)} ago) · {status.requests} admin requests"
    )
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
        st.dataframe(status.errors, hide_index=True)
