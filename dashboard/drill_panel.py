"""The unload drill button of the Bundles & unloads page, shown only when mutations are on.

The page queues the drill (`collectors.drill_queue`); the collect process, which holds the
admin credentials, runs it and the page follows its steps. When it ends, the page draws the
`unload-latency` result again, now with the drill's probe rows and polls.
"""

from __future__ import annotations

import streamlit as st

from collectors.drill_queue import DrillQueue
from core.markdown import escape_markdown
from core.mutations import mutations_allowed
from dashboard import data

FOLLOW_SECONDS = 1.0
DRILL_PAGE = "unload-latency"  # the plugin whose page (Bundles & unloads) holds the button
ANY_BROKER = "(the load manager's choice)"


def drill_panel(root: str) -> None:
    """Bundle and destination choices and a Run button; nothing when mutations are off."""
    if not mutations_allowed():
        return
    queue = DrillQueue(root)
    latest = queue.latest()
    busy = latest is not None and not latest.ended
    with st.expander("Unload drill", expanded=busy):
        st.caption(
            "Probes the bundle, unloads it, measures the outage, deletes the probe topic. "
            "This moves a bundle on the cluster (PULSAR_LENS_ALLOW_MUTATIONS is on); the "
            "collect process runs it."
        )
        snapshot = data.snapshot_index(root)
        if snapshot.empty:
            st.info("No poll stored yet: the drill needs the bundles a poll lists.")
            return
        sid = str(snapshot["snapshot_id"].iloc[-1])
        bundles = data.latest_table(root, sid, "bundles")
        brokers = data.latest_table(root, sid, "brokers")
        names = sorted(f"{r.namespace}/{r.bundle}" for r in bundles.itertuples())
        if not names:
            st.info("The newest poll lists no bundle.")
            return
        bundle = st.selectbox("Bundle", names, key="drill_bundle")
        to = st.selectbox("Move it to", [ANY_BROKER, *sorted(brokers["broker_id"])], key="drill_to")
        if st.button("Run unload drill", disabled=busy, key="drill_run", icon=":material/bolt:"):
            latest = queue.request(bundle, None if to == ANY_BROKER else to)
            busy = True
        if latest is not None and busy:
            follow(root, latest.id)
        elif latest is not None and latest.state == "failed":
            st.error(
                f"The last drill ({escape_markdown(latest.bundle)}) failed: "
                f"{escape_markdown(latest.error)}"
            )
        elif latest is not None:
            st.success(
                f"The last drill moved {escape_markdown(latest.bundle)} from "
                f"{escape_markdown(latest.owner_before)} to {escape_markdown(latest.owner_after)}; "
                "its events are below."
            )


@st.fragment(run_every=FOLLOW_SECONDS)
def follow(root: str, drill_id: str) -> None:
    """The drill's steps, redrawn every second; the whole page reruns when it ends."""
    status = DrillQueue(root).status(drill_id)
    if status is None:
        return
    st.markdown(f"Drill on {escape_markdown(status.bundle)}: {escape_markdown(status.state)}")
    for step in status.steps:
        st.text(step)
    if status.ended:
        st.rerun()
