"""The shared sidebar, the poll banner and the empty states: how fresh the store is, said on
every page, and what to do when it holds no snapshot yet."""

from __future__ import annotations

import streamlit as st

from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard import data, health_notices, timetravel
from pulsar_lens.dashboard.frames import PollStatus, answer_problems, format_age

SEEN_KEY = "app_seen_snapshot"
NO_SNAPSHOTS = (
    "No snapshots yet — start `pulsar-lens collect` (or `pulsar-lens serve`, which runs it) "
    "against your cluster; this page fills in after the first poll."
)


def refresh_seconds() -> float:
    """How often the sidebar checks for a new poll: half the poll interval, 2-10 s."""
    return min(10.0, max(2.0, data.poll_interval_seconds() / 2))


def cluster_selector(root: str) -> None:
    """A choice of the store's clusters (none shown when it holds one); every page then
    shows the chosen cluster's data. The choice is kept across pages and in the URL."""
    names = data.cluster_names(root)
    if len(names) < 2:
        return
    wanted = st.session_state.get(data.CLUSTER_KEY) or st.query_params.get("cluster")
    if wanted not in names:
        if wanted:
            shown = escape_markdown(str(wanted)[:100])
            st.warning(
                f"No cluster named {shown} in this store; showing {escape_markdown(names[0])}."
            )
        wanted = names[0]
    st.session_state[data.CLUSTER_KEY] = wanted  # kept when a page has no selector of its own
    choice = st.selectbox("Cluster", names, key=data.CLUSTER_KEY)
    st.query_params["cluster"] = choice


def sidebar_status(root: str) -> None:
    """Cluster, the snapshot shown, the newest poll's age and warnings; reruns the app when a
    new poll lands."""
    cluster_selector(root)
    timetravel.time_control(root)
    status = data.newest_poll_status(root)
    st.session_state[SEEN_KEY] = status.snapshot_id if status else None

    @st.fragment(run_every=refresh_seconds())
    def _status() -> None:
        current = data.newest_poll_status(root)
        if (current.snapshot_id if current else None) != st.session_state.get(SEEN_KEY):
            st.rerun()
        draw_status(current, root)
        health_notices.sidebar_notices(root)
        quarantined = data.quarantined_files(root)
        if quarantined:
            st.warning(f"{quarantined} unreadable store file(s) moved to quarantine/.")

    _status()


def draw_status(status: PollStatus | None, root: str) -> None:
    if status is None:
        st.info("No snapshots yet.")
        st.caption(f"store: `{root}`")
        return
    st.markdown(f"**Cluster** {escape_markdown(status.cluster)}")
    st.markdown(f"**Last poll** {format_age(status.age_seconds)} ago")
    st.caption(f"{status.collected_at:%Y-%m-%d %H:%M:%S} UTC · {status.polls} polls stored")
    if status.stale:
        st.error(f"Polls stopped: the newest snapshot is {format_age(status.age_seconds)} old.")
    if status.partial:
        st.warning(f"Partial snapshot: {partial_reason(status)}.")


def poll_banner(root: str) -> None:
    """The newest poll's age, and a banner when polls stopped or the poll was partial.

    Redrawn on its own every few seconds, so the banner appears when polls stop even though
    no new snapshot triggers a rerun.
    """

    @st.fragment(run_every=refresh_seconds())
    def _banner() -> None:
        status = data.poll_status(root)
        if status is not None:
            past = data.upto(root) is not None
            draw_banner(status, interval=data.poll_interval_seconds(), past=past)

    _banner()


def draw_banner(status: PollStatus, *, interval: float, past: bool = False) -> None:
    """The shown snapshot's line, and its warnings; `past` when the sidebar chose a snapshot
    other than the newest (then only the chosen one's being partial is said)."""
    st.caption(
        f"Cluster {escape_markdown(status.cluster)} · "
        f"snapshot {status.collected_at:%Y-%m-%d %H:%M:%S} UTC "
        f"({format_age(status.age_seconds)} ago) · {status.requests} admin requests"
    )
    if status.stale:
        st.error(
            f"Polls have stopped: the newest snapshot is {format_age(status.age_seconds)} old "
            f"(expected one every {format_age(interval)}). Is `pulsar-lens collect` running "
            "and can it reach the admin API?"
        )
    if status.partial:
        which = "This" if past else "The newest"
        st.warning(
            f"{which} snapshot is partial: {partial_reason(status)}, so some tables may be "
            "incomplete. They are listed below."
        )


def partial_reason(status: PollStatus) -> str:
    """What made a snapshot partial: failed calls, and items refused or cut from answers."""
    items = len(answer_problems(status.errors))
    calls = len(status.errors) - items
    reasons = [f"{calls} admin call(s) failed"] if calls else []
    if items:
        reasons.append(
            f"{items} kind(s) of item in the cluster's answers were refused or cut "
            "(malformed, or beyond Pulsar's own limits), the rest kept"
        )
    return "; ".join(reasons) or "the poll recorded errors"


def require_snapshot(root: str) -> PollStatus:
    """The newest poll, or an empty state that tells the user what to do (and stops the page)."""
    status = data.poll_status(root)
    quarantined = data.quarantined_files(root)
    if quarantined:
        st.warning(
            f"{quarantined} file(s) of the store could not be read as its tables (corrupt, "
            f"empty or foreign) and were moved to `{root}/quarantine/`; what they held is "
            "missing from the pages. Remove them once looked at."
        )
    if status is None:
        st.info(NO_SNAPSHOTS)
        st.caption(f"Reading snapshots from `{root}` (set PULSAR_LENS_STORE to change it).")
        st.stop()
    return status
