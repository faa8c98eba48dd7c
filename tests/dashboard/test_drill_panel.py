"""The unload drill button of the Bundles & unloads page: there only when mutations are on,
and a click queues a drill for the collect process (the page itself changes nothing)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from collectors.drill_queue import DrillQueue
from core.store import Store

PageRunner = Callable[[str], AppTest]


def test_no_drill_button_while_mutations_are_off(
    scenario: Store, plugin_page: PageRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULSAR_LENS_ALLOW_MUTATIONS", raising=False)
    at = plugin_page("unload-latency")
    assert not at.exception
    assert not [b for b in at.button if b.label == "Run unload drill"]
    assert not [e for e in at.expander if e.label == "Unload drill"]


def test_the_drill_button_queues_a_drill_on_the_chosen_bundle(
    scenario: Store, plugin_page: PageRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_LENS_ALLOW_MUTATIONS", "1")
    at = plugin_page("unload-latency")
    assert not at.exception
    bundle = at.selectbox(key="drill_bundle")
    assert "public/default/0x40000000_0x80000000" in bundle.options
    bundle.select("public/default/0x40000000_0x80000000")
    at.selectbox(key="drill_to").select("broker-b:8080")
    at.button(key="drill_run").click().run()
    asked = DrillQueue(scenario.root).latest()
    assert asked is not None and asked.state == "queued"
    assert (asked.bundle, asked.to) == ("public/default/0x40000000_0x80000000", "broker-b:8080")
    assert at.run().button(key="drill_run").disabled  # one drill at a time
