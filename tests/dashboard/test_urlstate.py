"""A plugin page's controls live in its URL's query: a link restores them, changing one
rewrites the query, a value the control would refuse is left out and said as plain text."""

from __future__ import annotations

from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.urlstate import RESERVED
from tests.markdown import escaped_text_problem, shown
from tests.pages import plugin_page

KS = "analysis_key-shared-map"
ORDERS = "persistent://public/default/orders | orders-ks"
PAYMENTS = "persistent://public/default/payments | payments-ks"


def test_urlstate_a_query_restores_the_page_controls(scenario: Store) -> None:
    at = plugin_page(
        "key-shared-map", query={"subscription": ORDERS, "key": "9", "what_if_points": "200"}
    )
    assert not at.exception
    assert at.selectbox(key=f"{KS}_subscription").value == ORDERS
    assert at.text_input(key=f"{KS}_key").value == "9"
    assert at.number_input(key=f"{KS}_what_if_points").value == 200
    assert shown(at.subheader[0].value) == ORDERS
    labels = [shown(m.label) for m in at.metric]
    assert "Sticky hash" in labels and "Hash space that moves (replica points 200)" in labels
    assert not [w for w in at.warning if "link" in shown(w.value)]
    assert at.query_params == {"subscription": ORDERS, "key": "9", "what_if_points": "200"}


def test_urlstate_changing_a_control_rewrites_the_query(scenario: Store) -> None:
    at = plugin_page("key-shared-map")
    assert at.query_params == {}  # the defaults: nothing to say
    at.selectbox(key=f"{KS}_subscription").set_value(ORDERS).run()
    at.text_input(key=f"{KS}_add_consumer").input("c3").run()
    assert at.query_params == {"subscription": ORDERS, "add_consumer": "c3"}
    at.text_input(key=f"{KS}_add_consumer").input("").run()  # back to its default: dropped
    assert at.query_params == {"subscription": ORDERS}
    at.query_params["subscription"] = PAYMENTS  # the URL changes (back button): it wins
    at.run()
    assert at.selectbox(key=f"{KS}_subscription").value == PAYMENTS
    assert shown(at.subheader[0].value) == PAYMENTS


def test_urlstate_refuses_what_the_controls_refuse_and_says_so_as_plain_text(
    scenario: Store,
) -> None:
    hostile = "![b](http://evil.example/b.png) | <img src=x>"
    at = plugin_page(
        "key-shared-map",
        query={
            "subscription": hostile,  # not among the offered subscriptions
            "what_if_points": "99999999",  # beyond the field's bound
            "key": "a\x1bb",  # a control character
            "cluster": "elsewhere",  # the sidebar's, not a control
        },
    )
    assert not at.exception
    assert at.selectbox(key=f"{KS}_subscription").value == ""
    assert at.number_input(key=f"{KS}_what_if_points").value == 0
    assert at.text_input(key=f"{KS}_key").value == ""
    warnings = [w.value for w in at.warning if "link" in shown(w.value)]
    assert len(warnings) == 1, [w.value for w in at.warning]
    assert escaped_text_problem(warnings[0]) == ""
    text = shown(warnings[0])
    assert "subscription=" in text and "what_if_points=" in text and "key=" in text
    assert "![b](http://evil.example/b.png)" in text
    assert at.query_params == {"cluster": "elsewhere"}  # the refused ones dropped
    at.run()  # said once: the next run has nothing to refuse
    assert not [w for w in at.warning if "link" in shown(w.value)]


def test_urlstate_a_failover_group_and_a_checkbox_round_trip(scenario: Store) -> None:
    group = "events-fo @ persistent://public/default/events"
    at = plugin_page("failover-assignment", query={"subscription": group, "flap_changes": "3"})
    assert at.selectbox(key="analysis_failover-assignment_subscription").value == group
    assert at.number_input(key="analysis_failover-assignment_flap_changes").value == 3
    status = plugin_page("subscription-status", query={"include_system": "true"})
    assert status.checkbox(key="analysis_subscription-status_include_system").value is True
    status.checkbox(key="analysis_subscription-status_include_system").uncheck().run()
    assert status.query_params == {}


def test_urlstate_leaves_the_sidebar_and_time_names_alone() -> None:
    assert {"cluster", "at"} <= RESERVED


def test_urlstate_coming_back_without_a_query_shows_the_page_as_left(scenario: Store) -> None:
    """Streamlit's page links and the back button drop the query: the page's last view in
    this session comes back, and into the URL again."""
    at = plugin_page("key-shared-map", query={"subscription": ORDERS})
    at.text_input(key=f"{KS}_key").input("9").run()
    at.query_params.clear()  # the widgets' own return: tests/browser/test_links_browser.py
    at.run()
    assert at.selectbox(key=f"{KS}_subscription").value == ORDERS
    assert at.text_input(key=f"{KS}_key").value == "9"
    assert at.query_params == {"subscription": ORDERS, "key": "9"}
