"""Bundles & unloads: which broker owned each bundle, poll by poll, with the moves marked."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, components, data

SLUG = "bundle-ownership"

st.title("Bundles & unloads")
root = data.store_root()
status = components.require_snapshot(root)
polls = st.slider("Polls to show", 5, 500, 60, key="bundles_polls")
with components.guarded("The ownership timeline"):
    view = data.ownership_view(root, status.snapshot_id, polls)
    if view.ownership.empty:
        st.info("No bundle in the stored polls yet.")
    else:
        components.draw_chart(
            charts.chart_ownership(view.ownership, view.events),
            title="Owner broker per bundle over time",
            caption="dashed rules mark recorded bundle events; (unowned) is a bundle mid-unload",
        )
        c = st.columns(2)
        c[0].markdown(f"**Owner changes seen between polls** ({len(view.changes)})")
        c[0].dataframe(view.changes, hide_index=True, key="bundles_changes")
        c[1].markdown(f"**Recorded bundle events** ({len(view.events)})")
        c[1].dataframe(view.events, hide_index=True, key="bundles_events")

if data.plugin_loaded(SLUG):
    st.subheader("Analysis")
    components.draw_plugin(root, SLUG)
else:
    components.plugin_missing(SLUG)
