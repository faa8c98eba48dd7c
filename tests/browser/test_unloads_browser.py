"""The Bundles & unloads page on live data: an unload drill on the test run's broker, then the
page served for real in headless Chromium shows the probe latency with the unload overlaid,
and the Incident timeline links the drill to that page as of the poll that saw it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests
from playwright.sync_api import Page, expect

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.drill import DrillPlan, run_drill
from pulsar_lens.core.mutations import MutationSettings
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover
from tests.browser.conftest import ServedApp, serve
from tests.browser.test_dashboard_browser import (
    TIMEOUT_MS,
    assert_healthy,
    open_page,
    screenshot,
)


@pytest.fixture(scope="module")
def drilled(pulsar: LocalPulsar, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    store = Store(tmp_path_factory.mktemp("unloads") / "store")
    answer = requests.get(
        f"{pulsar.admin_url}/admin/v2/namespaces/public/default/bundles", timeout=30
    )
    bounds = answer.json()["boundaries"]
    plan = DrillPlan("public/default", f"{bounds[0]}_{bounds[1]}", baseline=2.0, settle=2.0)
    with AdminClient(pulsar.admin_url) as admin:
        allowed = MutationSettings(allow=True)
        run_drill(plan, admin=admin, service_url=None, store=store, mutations=allowed)
    app = serve(store.root, PULSAR_LENS_POLL_INTERVAL="1h", PULSAR_LENS_PLUGIN_DIRS="")
    try:
        yield app
    finally:
        app.stop()


def test_browser_bundles_page_overlays_the_unload_on_live_probe_latency(
    drilled: ServedApp, page: Page
) -> None:
    open_page(page, f"{drilled.url}/bundles", "Bundles & unloads")
    for text in (
        "Broker x bundle",
        "Ownership over time",
        "Probe publish latency, with unloads",
        "Unload events",
        "Probes",
    ):
        expect(page.get_by_text(text, exact=True).first).to_be_visible(timeout=TIMEOUT_MS)
    events = page.get_by_test_id("stMetric").filter(has_text="Unload events")
    expect(events).to_contain_text(re.compile(r"Unload events\s*[1-9]"), timeout=TIMEOUT_MS)
    lost = page.get_by_test_id("stMetric").filter(has_text="Probe messages lost")
    expect(lost).to_contain_text(re.compile(r"Probe messages lost\s*0$"))
    charts = page.locator(".vega-embed canvas, .vega-embed svg")
    expect(charts.nth(2)).to_be_attached(timeout=TIMEOUT_MS)  # charts draw after the text
    assert_healthy(page)
    screenshot(page, "bundles-live-unload")


def test_browser_timeline_links_the_drill_to_the_bundles_page_at_its_poll(
    drilled: ServedApp, page: Page
) -> None:
    open_page(page, f"{drilled.url}/timeline", "Incident timeline")
    for text in ("Events over time", "Events"):
        expect(page.get_by_text(text, exact=True).first).to_be_visible(timeout=TIMEOUT_MS)
    assert_healthy(page)
    screenshot(page, "timeline-live-unload")
    store = Store(drilled.store)
    plugin = discover().get("incident-timeline")
    events = runner.run(plugin, store, None, use_cache=False).result.frames["events"]
    drill = events[events["page"] == "bundles"]
    assert len(drill), events[["at", "kind", "subject"]].to_string()
    target = drill.iloc[0]["link"]
    parts = urlsplit(target)
    query = parse_qs(parts.query)
    assert parts.path == "bundles"
    assert query["at"] == [drill.iloc[0]["snapshot_id"]]
    assert query["at"][0] in set(store.snapshots()["snapshot_id"])
    assert query["cluster"] == [str(store.snapshots()["cluster"].iloc[-1])]
    # the link is relative: from the timeline it opens the sibling page
    open_page(page, urljoin(f"{drilled.url}/timeline", target), "Bundles & unloads")
    expect(page.get_by_text("Unload events", exact=True).first).to_be_visible(timeout=TIMEOUT_MS)
    # at that moment: the page is shown as of the poll the link names
    banner = page.get_by_text(re.compile(r"Viewing the snapshot of .* UTC"))
    expect(banner).to_be_visible(timeout=TIMEOUT_MS)
    assert parse_qs(urlsplit(page.url).query)["at"] == query["at"]
    assert_healthy(page)
