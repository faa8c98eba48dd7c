"""The `unload-drill` panel: the drill button of a plugin page whose `Page.panels` asks for it
(the built-in `unload-latency`'s Bundles & unloads page does).

The page queues the drill (`collectors.drill_queue`), naming the logged-in user who asked; the
collect process, which holds the admin credentials, checks the request against its own
settings, runs it, and the page follows its steps. When it ends, the page draws the
plugin's result again, now with the drill's probe rows and polls.

Nothing is drawn while mutations are off. With them on, the button is there only when
PULSAR_LENS_DASHBOARD_MUTATIONS is on too and the visitor is a logged-in user (`access.
requester`); otherwise the panel says which of the two is missing.
"""

from __future__ import annotations

import streamlit as st

from pulsar_lens.collectors.drill_queue import DrillQueue, DrillStatus
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.core.mutations import (
    DASHBOARD_MUTATIONS,
    TRUSTED_USER_HEADER,
    dashboard_mutations_problem,
    mutations_allowed,
)
from pulsar_lens.dashboard import access, data

FOLLOW_SECONDS = 1.0
ANY_BROKER = "(the load manager's choice)"
CLI_HINT = "`pulsar-lens drill unload --bundle TENANT/NS/0xLO_0xHI` runs it from a shell"


def drill_panel(root: str) -> None:
    """Bundle and destination choices and a Run button; nothing when mutations are off."""
    if not mutations_allowed(data.settings().mutations):
        return
    who = access.requester()
    blocked = blocked_reason(who)
    if blocked is not None or who is None:
        with st.expander("Unload drill"):
            st.info(f"The dashboard runs no drill here: {blocked}. {CLI_HINT}.")
        return
    queue = DrillQueue(root)
    latest = queue.latest()
    busy = latest is not None and not latest.ended
    with st.expander("Unload drill", expanded=busy):
        st.caption(
            "Probes the bundle, unloads it, measures the outage, deletes the probe topic. "
            "This moves a bundle on the cluster; the collect process runs it, asked for by "
            f"{escape_markdown(who)}."
        )
        asked = choose_and_ask(root, queue, who, busy=busy)
        if asked is not None:
            latest, busy = asked, True
        if latest is not None and busy:
            follow(root, latest.id)
        elif latest is not None:
            draw_outcome(latest)


def blocked_reason(who: str | None) -> str | None:
    """Why this visitor gets no drill button, in plain words; None when they get one."""
    off = dashboard_mutations_problem(data.settings().mutations)
    if off is not None:
        return f"{DASHBOARD_MUTATIONS} is not set to 1 (drills from the dashboard are off)"
    if who is not None:
        return None
    if access.login_configured():
        return "nobody is logged in"
    header = access.trusted_user_header()
    if header is not None:
        return f"nobody is logged in (this request carries no user in the {header} header)"
    return (
        "nobody is logged in (this dashboard has no login: set PULSAR_LENS_OIDC_*, or "
        f"{TRUSTED_USER_HEADER} behind a login proxy)"
    )


def choose_and_ask(root: str, queue: DrillQueue, who: str, *, busy: bool) -> DrillStatus | None:
    """The bundle and destination choices and the button; the drill queued by a click."""
    snapshot = data.newest_index(root)  # a drill acts now: on the newest poll's bundles
    if snapshot.empty:
        st.info("No poll stored yet: the drill needs the bundles a poll lists.")
        return None
    sid = str(snapshot["snapshot_id"].iloc[-1])
    bundles = data.latest_table(root, sid, "bundles")
    brokers = data.latest_table(root, sid, "brokers")
    names = sorted(f"{r.namespace}/{r.bundle}" for r in bundles.itertuples())
    if not names:
        st.info("The newest poll lists no bundle.")
        return None
    bundle = st.selectbox("Bundle", names, key="drill_bundle")
    to = st.selectbox("Move it to", [ANY_BROKER, *sorted(brokers["broker_id"])], key="drill_to")
    if st.button("Run unload drill", disabled=busy, key="drill_run", icon=":material/bolt:"):
        return queue.request(bundle, None if to == ANY_BROKER else to, requested_by=who)
    return None


def draw_outcome(latest: DrillStatus) -> None:
    """How the newest drill ended; names from the cluster and the store shown as text."""
    bundle, why, before, after = (
        escape_markdown(str(value))
        for value in (latest.bundle, latest.error, latest.owner_before, latest.owner_after)
    )
    if latest.state == "refused":
        st.error(f"The collect process refused the last drill ({bundle}): {why}")
    elif latest.state == "failed":
        st.error(f"The last drill ({bundle}) failed: {why}")
    else:
        st.success(f"The last drill moved {bundle} from {before} to {after}; its events are below.")


@st.fragment(run_every=FOLLOW_SECONDS)
def follow(root: str, drill_id: str) -> None:
    """The drill's steps, redrawn every second; the whole page reruns when it ends."""
    status = DrillQueue(root).status(drill_id)
    if status is None:
        return
    st.write(f"Drill on {escape_markdown(str(status.bundle))}: {status.state}")
    for step in status.steps:
        st.text(step)
    if status.ended:
        st.rerun()
