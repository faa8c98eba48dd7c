"""The unload drill button of a page that asks for it (`Page.panels`; the built-in Bundles &
unloads page does): there only when mutations, and mutations from the dashboard, are on and
the visitor is a logged-in user; a click queues a drill for the collect process naming that
user (the page itself changes nothing)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import streamlit
from streamlit.testing.v1 import AppTest

from pulsar_lens.collectors.drill_queue import DrillQueue
from pulsar_lens.core.mutations import ALLOW_MUTATIONS, DASHBOARD_MUTATIONS, TRUSTED_USER_HEADER
from pulsar_lens.core.store import Store
from tests.dashboard.conftest import TIMEOUT
from tests.pages import plugin_page

ADA = {"is_logged_in": True, "name": "Ada", "email": "ada@example.com", "sub": "ada"}
ANONYMOUS = {"is_logged_in": False}


def drill_page(
    monkeypatch: pytest.MonkeyPatch, *switches: str, user: dict[str, object] | None
) -> AppTest:
    for name in (ALLOW_MUTATIONS, DASHBOARD_MUTATIONS):
        if name in switches:
            monkeypatch.setenv(name, "1")
        else:
            monkeypatch.delenv(name, raising=False)
    at = plugin_page("unload-latency", timeout=TIMEOUT, user=user)
    assert not at.exception
    return at


def drill_buttons(at: AppTest) -> list[object]:
    return [b for b in at.button if b.label == "Run unload drill"]


def shown(elements: object) -> str:
    """The text of `elements` as a reader sees it: Markdown escapes taken out."""
    return re.sub(r"\\(.)", r"\1", "\n".join(str(e.value) for e in elements))  # type: ignore[attr-defined]


def test_no_drill_panel_while_mutations_are_off(
    scenario: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = drill_page(monkeypatch, DASHBOARD_MUTATIONS, user=ADA)
    assert not drill_buttons(at)
    assert not [e for e in at.expander if e.label == "Unload drill"]


@pytest.mark.parametrize("user", [None, ANONYMOUS], ids=["no-login", "not-logged-in"])
def test_no_drill_button_for_a_visitor_nobody_logged_in(
    scenario: Store, monkeypatch: pytest.MonkeyPatch, user: dict[str, object] | None
) -> None:
    at = drill_page(monkeypatch, ALLOW_MUTATIONS, DASHBOARD_MUTATIONS, user=user)
    assert not drill_buttons(at)
    assert "nobody is logged in" in shown(at.info)
    assert not (scenario.root / "drills").exists()


def test_no_drill_button_without_the_trusted_proxy_header(
    scenario: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRUSTED_USER_HEADER, "X-Forwarded-User")
    at = drill_page(monkeypatch, ALLOW_MUTATIONS, DASHBOARD_MUTATIONS, user=None)
    assert not drill_buttons(at)
    assert "no user in the X-Forwarded-User header" in shown(at.info)


def test_no_drill_button_for_a_logged_in_user_while_dashboard_mutations_are_off(
    scenario: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = drill_page(monkeypatch, ALLOW_MUTATIONS, user=ADA)
    assert not drill_buttons(at)
    assert f"{DASHBOARD_MUTATIONS} is not set to 1" in shown(at.info)


def test_the_drill_button_queues_a_drill_for_the_logged_in_user(
    scenario: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = drill_page(monkeypatch, ALLOW_MUTATIONS, DASHBOARD_MUTATIONS, user=ADA)
    bundle = at.selectbox(key="drill_bundle")
    assert "public/default/0x40000000_0x80000000" in bundle.options
    bundle.select("public/default/0x40000000_0x80000000")
    at.selectbox(key="drill_to").select("broker-b:8080")
    at.button(key="drill_run").click().run()
    asked = DrillQueue(scenario.root).latest()
    assert asked is not None and asked.state == "queued"
    assert (asked.bundle, asked.to) == ("public/default/0x40000000_0x80000000", "broker-b:8080")
    assert asked.requested_by == "ada@example.com"
    assert at.run().button(key="drill_run").disabled  # one drill at a time


def test_a_drill_the_collect_process_refused_shows_why(
    scenario: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = DrillQueue(scenario.root)
    asked = queue.request("public/default/0x40000000_0x80000000", requested_by="ada")
    why = f"the collect process takes no drill from the dashboard: {DASHBOARD_MUTATIONS} is off"
    queue.save(dataclasses.replace(asked, state="refused", error=why))
    at = drill_page(monkeypatch, ALLOW_MUTATIONS, DASHBOARD_MUTATIONS, user=ADA)
    errors = shown(at.error)
    assert f"refused the last drill (public/default/0x40000000_0x80000000): {why}" in errors


class ProxiedContext:
    """Stands in for `st.context` of a request that came through the login proxy: AppTest
    cannot seed request headers (a real session takes them from its WebSocket handshake)."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


@pytest.mark.parametrize(
    ("value", "requester"),
    [
        ("ada@example.com", "ada@example.com"),
        ("  ada  ", "ada"),
        ("", None),
        ("   ", None),
        ("ada\nINFO forged log line", None),
        ("ada\x1b[31m", None),
        ("ada\u2028bob", None),
        ("a" * 201, None),
    ],
)
def test_the_trusted_proxy_header_names_the_requester_or_nobody(
    scenario: Store, monkeypatch: pytest.MonkeyPatch, value: str, requester: str | None
) -> None:
    monkeypatch.setenv(TRUSTED_USER_HEADER, "X-Forwarded-User")
    monkeypatch.setattr(streamlit, "context", ProxiedContext({"X-Forwarded-User": value}))
    at = drill_page(monkeypatch, ALLOW_MUTATIONS, DASHBOARD_MUTATIONS, user=None)
    if requester is None:
        assert not drill_buttons(at)
        assert "no user in the X-Forwarded-User header" in shown(at.info)
        return
    at.button(key="drill_run").click().run()
    asked = DrillQueue(scenario.root).latest()
    assert asked is not None and asked.requested_by == requester


DRILL_PLUGIN = """
from pulsar_lens.api import AnalysisPlugin, Page, Result, Table

class Outages(AnalysisPlugin):
    name = "outages"
    title = "Outages"
    description = "A third-party page about unloads."
    version = "1"
    inputs = ("bundles",)
    outputs = ("bundles",)
    page = Page(title="Outages", panels=("unload-drill",))

    def analyze(self, data, params):
        return Result(frames={"bundles": data.latest("bundles")})

    def render(self, result):
        return [Table(result.frames["bundles"], title="Bundles now")]

PLUGINS = (Outages,)
"""


def test_a_third_party_page_gets_the_drill_panel_it_asks_for(
    scenario: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The panel follows `Page.panels`, not a slug: a drop-in plugin's page asking for it
    gets the same button, and a built-in page that does not ask gets none."""
    folder = scenario.root.parent / "drop-ins"
    folder.mkdir()
    (folder / "outages.py").write_text(DRILL_PLUGIN)
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    for name in (ALLOW_MUTATIONS, DASHBOARD_MUTATIONS):
        monkeypatch.setenv(name, "1")
    at = plugin_page("outages", timeout=TIMEOUT, user=ADA)
    assert not at.exception and not at.error
    assert [t.value for t in at.title] == ["Outages"]
    at.button(key="drill_run").click().run()
    asked = DrillQueue(scenario.root).latest()
    assert asked is not None and asked.requested_by == "ada@example.com"
    other = plugin_page("stuck-hashes", timeout=TIMEOUT, user=ADA)
    assert not other.exception and not drill_buttons(other)
