"""Overview: the cluster as of the newest poll (or the past one the sidebar chose), its errors,
and whether polls still arrive."""

from __future__ import annotations

import streamlit as st

from pulsar_lens.dashboard import components, data, frames, health_notices
from pulsar_lens.dashboard.status import poll_banner, refresh_seconds, require_snapshot

st.title("Overview")
root = data.store_root()
# first: a store that refuses every write holds no snapshot for the page to wait for
health_notices.health_banner(root, every=refresh_seconds())
status = require_snapshot(root)

poll_banner(root)
components.plugin_failures_banner()

OVERVIEW_PLUGIN = "cluster-overview"
"""The analysis the Overview presents: the counts, brokers and namespaces of the snapshot."""

with components.guarded("The cluster overview"):
    if data.plugin_loaded(OVERVIEW_PLUGIN):
        components.draw_analysed(root, OVERVIEW_PLUGIN, {})
    else:
        components.plugin_missing(OVERVIEW_PLUGIN)

with components.guarded("The poll's errors"):  # shown even when the analysis failed
    which = "the newest poll" if data.upto(root) is None else "this poll"
    st.subheader(f"Errors of {which}")
    if status.errors.empty:
        st.success(f"Every admin call of {which} succeeded.")
    else:
        if not (refused := frames.answer_problems(status.errors)).empty:
            st.warning(
                f"The cluster's answers held {len(refused)} kind(s) of item this snapshot "
                "left out or cut (each line below says what, why, how many times, and the "
                "first names); everything else they held is shown."
            )
        failed = frames.compute_broker_failures(status.errors)
        if not failed.empty:
            # names are the cluster's data: shown in a table, never inside Markdown
            st.warning(
                f"{len(failed)} call(s) to {failed['broker'].nunique()} broker(s) failed; "
                "only what each one gives is missing from this snapshot:"
            )
            st.dataframe(failed, hide_index=True)
        st.dataframe(status.errors, hide_index=True)
