"""Time travel: the sidebar's choice of the snapshot the pages show, kept in the URL
(`?at=<snapshot id>`), and the banner that says a past snapshot is shown.

The choice lives in `st.session_state[data.SNAPSHOT_KEY]` ("" for the newest), which
`dashboard.data` reads for every table, status and plugin run of the page.
"""

from __future__ import annotations

import datetime as dt
import re

import pandas as pd
import streamlit as st

from pulsar_lens.core.digest import SNAPSHOT_ID_PREFIX, SNAPSHOT_ID_PREFIXES
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard import data
from pulsar_lens.dashboard.frames import format_age

AT_PARAM = "at"
NEWEST = ""
MAX_CHOICES = 500  # the newest snapshots offered (the one in the URL is offered whatever its age)
SNAPSHOT_ID = re.compile(
    "(?:" + "|".join(map(re.escape, SNAPSHOT_ID_PREFIXES)) + ")[0-9a-f]{64}"
)  # the ids of polls stored before `sha256t:` ids too
PROBLEM_KEY = "sidebar_at_problem"  # why the `at` asked for is not shown, said on the page
WRITTEN_KEY = "sidebar_at_url"  # the `at` this session last wrote into the URL


def time_control(root: str) -> None:
    """A choice of the chosen cluster's snapshots, newest first ("Newest" by default; none
    offered before the second poll). The choice is kept across pages and in the URL; one not
    among the snapshots is named and the newest shown."""
    index = data.newest_index(root)
    st.session_state.pop(PROBLEM_KEY, None)
    if index.empty:
        return
    wanted = st.session_state.get(data.SNAPSHOT_KEY)
    url = str(st.query_params.get(AT_PARAM) or NEWEST)
    # the URL's choice on the first run, and when the address names another snapshot than
    # the one written (the back button); a URL without `at` (a page link) keeps the choice
    if wanted is None or (url and url != st.session_state.get(WRITTEN_KEY)):
        wanted = url
    ids = [str(s) for s in index["snapshot_id"]]
    if wanted and wanted not in ids:
        st.session_state[PROBLEM_KEY] = unknown_snapshot(wanted)
        wanted = NEWEST
    if len(ids) < 2:  # nothing to travel to: no control
        back_to_newest()
        return
    offered = list(reversed(ids[-MAX_CHOICES:]))
    if wanted and wanted not in offered:
        offered.append(wanted)
    labels = dict(zip(ids, index["collected_at"], strict=True))
    now = dt.datetime.now(dt.UTC)
    st.session_state[data.SNAPSHOT_KEY] = wanted  # kept when a page has no control of its own
    choice = st.selectbox(
        "Snapshot shown",
        [NEWEST, *offered],
        key=data.SNAPSHOT_KEY,
        format_func=lambda sid: label(labels.get(sid), now=now) if sid else "Newest",
        help="Show every Cluster page as of a stored poll; the History pages always show "
        "their newest Spark result.",
    )
    if choice:
        st.query_params[AT_PARAM] = choice
    elif AT_PARAM in st.query_params:
        del st.query_params[AT_PARAM]
    st.session_state[WRITTEN_KEY] = choice


def unknown_snapshot(wanted: str) -> str:
    """What the page says of an `at` that names no snapshot of the cluster shown."""
    if not SNAPSHOT_ID.fullmatch(wanted):
        return (
            f"The link asks for snapshot {wanted[:80]!r}, which is not a snapshot id "
            f"({SNAPSHOT_ID_PREFIX}<64 hex digits); showing the newest snapshot."
        )
    return (
        f"Snapshot {wanted[:80]} is not in this store for the cluster shown (pruned by "
        "retention, or another store's); showing the newest snapshot."
    )


def label(collected_at: object, *, now: dt.datetime) -> str:
    """A snapshot as the control offers it: its UTC time and age."""
    if collected_at is None:
        return "a snapshot not in this store"
    at = pd.Timestamp(collected_at)
    age = max(0.0, (pd.Timestamp(now) - at).total_seconds())
    return f"{at:%Y-%m-%d %H:%M:%S} UTC · {format_age(age)} ago"


def back_to_newest() -> None:
    """Show the newest snapshot again (and drop `at` from the URL)."""
    st.session_state[data.SNAPSHOT_KEY] = NEWEST
    st.session_state[WRITTEN_KEY] = NEWEST
    if AT_PARAM in st.query_params:
        del st.query_params[AT_PARAM]


def travel_banner(root: str) -> None:
    """At the top of the page: that an `at` was refused, or that a past snapshot is shown
    (with a way back to the newest). Times are text from the index, never Markdown."""
    problem = st.session_state.get(PROBLEM_KEY)
    if problem:
        st.warning(escape_markdown(problem), icon=":material/history:")
    row = data.chosen_snapshot(root)
    if row is None:
        return
    index = data.newest_index(root)
    newer = int((index["collected_at"] > row["collected_at"]).sum())
    text = banner_text(row["collected_at"], newer=newer, now=dt.datetime.now(dt.UTC))
    left, right = st.columns([5, 1], vertical_alignment="center")
    left.info(escape_markdown(text), icon=":material/history:")
    right.button(
        "Back to newest", key="travel_back", on_click=back_to_newest, icon=":material/update:"
    )


def banner_text(collected_at: object, *, newer: int, now: dt.datetime) -> str:
    """What the banner says of the snapshot shown and the `newer` polls it hides."""
    at = pd.Timestamp(collected_at)
    age = max(0.0, (pd.Timestamp(now) - at).total_seconds())
    return (
        f"Viewing the snapshot of {at:%Y-%m-%d %H:%M:%S} UTC, {format_age(age)} ago — "
        f"{newer} newer poll(s) hidden on the Cluster pages."
    )
