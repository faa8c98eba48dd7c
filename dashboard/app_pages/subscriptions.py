"""Subscriptions: every subscription with its status, backlog and time lag, sortable."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data

SLUG = "subscription-status"

st.title("Subscriptions")
root = data.store_root()
status = components.require_snapshot(root)
if data.plugin_loaded(SLUG):
    components.draw_plugin(root, SLUG)
else:
    components.plugin_missing(SLUG)
    with components.guarded("The subscriptions table"):
        st.dataframe(data.subscriptions_table(root, status.snapshot_id), hide_index=True)
