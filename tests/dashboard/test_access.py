"""dashboard.access in the real entry script: the login page, the logged-in sidebar, and the
notice of an open dashboard."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from pulsar_lens.dashboard import access
from tests.dashboard.conftest import APP, TIMEOUT
from tests.markdown import shown
from tests.pages import LOGIN


def run(*, auth: bool, user: dict[str, object] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if auth:
        at.secrets["auth"] = LOGIN
    if user is not None:
        at.user = user
    return at.run()


def test_open_dashboard_says_so_in_the_sidebar(scenario: Store) -> None:
    at = run(auth=False)
    assert not at.exception
    assert any(access.OPEN_NOTICE in c.value for c in at.sidebar.caption)
    assert [t.value for t in at.title] == ["Overview"]


def test_anonymous_visit_sees_the_login_page_and_no_data(scenario: Store) -> None:
    at = run(auth=True, user={"is_logged_in": False})
    assert not at.exception
    assert [t.value for t in at.title] == [access.LOGIN_TITLE]
    assert [b.label for b in at.button] == ["Log in"]
    assert not at.metric and not at.dataframe
    assert not any("standalone" in m.value for m in at.sidebar.markdown)


def test_logged_in_user_sees_the_pages_and_their_name(scenario: Store) -> None:
    at = run(auth=True, user={"is_logged_in": True, "name": "Ada *Lovelace*", "sub": "ada"})
    assert not at.exception
    assert [t.value for t in at.title] == ["Overview"]
    assert any("Ada \\*Lovelace\\*" in c.value for c in at.sidebar.caption)
    assert "Log out" in [b.label for b in at.sidebar.button]
    assert not any(access.OPEN_NOTICE in c.value for c in at.sidebar.caption)


def test_user_name_falls_back_to_email_then_subject(scenario: Store) -> None:
    at = run(auth=True, user={"is_logged_in": True, "email": "ops@example.com", "sub": "x"})
    assert any("**ops@example.com**" in shown(c.value) for c in at.sidebar.caption)
