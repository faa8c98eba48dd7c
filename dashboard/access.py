"""Who may see the dashboard: Streamlit's OIDC login when `[auth]` is configured, else a
notice that the dashboard is open to anyone who reaches its port.

`pulsar-lens serve` writes the `[auth]` secrets from PULSAR_LENS_OIDC_* (core.oidc); a
`.streamlit/secrets.toml` with an `[auth]` table works the same for `streamlit run`.
`requester()` names the user a change to the cluster is asked for by: the logged-in user, or
the one a trusted login proxy names in the header PULSAR_LENS_TRUSTED_USER_HEADER names.
"""

from __future__ import annotations

import streamlit as st

from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.core.mutations import requester_of

OPEN_NOTICE = (
    "open: anyone who reaches this port sees the cluster; put it behind a login — see README"
)
LOGIN_TITLE = "Pulsar Lens"
LOGIN_TEXT = "Log in to see the cluster."


def login_configured() -> bool:
    """True when the secrets hold an `[auth]` table (Streamlit then serves /auth/login)."""
    try:
        return bool(st.secrets.get("auth"))
    except FileNotFoundError:  # no secrets file at all: no login
        return False


def user_name() -> str:
    """The logged-in user's name as the provider gave it (name, else email, else subject)."""
    for claim in ("name", "email", "preferred_username", "sub"):
        value = st.user.get(claim)
        if value:
            return str(value)
    return "unknown user"


def trusted_user_header() -> str | None:
    """The header a login proxy names the user in (PULSAR_LENS_TRUSTED_USER_HEADER), if set."""
    from pulsar_lens.dashboard import data

    return data.settings().mutations.trusted_user_header


def requester() -> str | None:
    """Who is asking, for the record of a change they ask for: the user of the dashboard's
    login (e-mail, else username, else subject), else the user the trusted proxy header
    names; None for a visitor nobody vouches for."""
    if login_configured():  # the login's word only: a header could be anyone's
        if not st.user.is_logged_in:
            return None
        claims = ("email", "preferred_username", "sub")
        return requester_of(next((st.user.get(c) for c in claims if st.user.get(c)), None))
    header = trusted_user_header()
    return None if header is None else requester_of(st.context.headers.get(header))


def guard() -> None:
    """Stop this run with a login page for an anonymous visitor when a login is configured;
    otherwise draw who is logged in (and a logout button), or the open notice, in the sidebar.
    """
    if not login_configured():
        st.sidebar.caption(f":material/lock_open: {OPEN_NOTICE}")
        return
    if not st.user.is_logged_in:
        draw_login_page()
        st.stop()
    with st.sidebar:
        st.caption(f":material/account_circle: Logged in as **{escape_markdown(user_name())}**")
        if st.button("Log out", key="access_logout", icon=":material/logout:"):
            st.logout()


def draw_login_page() -> None:
    st.title(LOGIN_TITLE)
    st.write(LOGIN_TEXT)
    if st.button("Log in", key="access_login", type="primary", icon=":material/login:"):
        st.login()
