"""Every dashboard page, served for real and driven in headless Chromium.

Screenshots of each page land in artifacts/screenshots/ for a human look.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from pulsar_lens.dashboard.navigation import analysis_url
from pulsar_lens.plugins.registry import discover
from tests.browser.conftest import SCREENSHOTS, ServedApp, serve
from tests.dashboard.scenario import write_scenario

TIMEOUT_MS = 90_000
"""The ceiling of every wait for what a page shows. A page that analyses on demand took 25-30 s
at load 6-17 on two cores, and the suite must hold at load 10 and beyond: a quiet page shows
in a second or two, so the ceiling only bounds how long a real failure takes to report."""
PAGES = {
    "": ("Overview", ["Namespaces and bundles", "Errors of the newest poll"]),
    "key-shared": ("Key_Shared", ["Hash space by consumer", "Which consumer gets key K?"]),
    "stuck-hashes": ("Stuck hashes", ["Blocked attempts of stuck hashes"]),
    "failover": ("Failover", ["Partitions per consumer", "Moving with"]),
    "bundles": ("Bundles & unloads", ["Ownership over time", "Broker x bundle"]),
    "subscriptions": ("Subscriptions", ["Backlog"]),
    "plugins": ("Plugins", ["Loaded", "Failed"]),
}
DROP_IN = """
from pulsar_lens.api import AnalysisPlugin, BaseModel, Field, Metric, Note, Result, Table

class TopicCount(AnalysisPlugin):
    name = "topic-count"
    title = "Topic count"
    description = "How many topics each namespace has."
    version = "0.1"
    inputs = ("topics",)
    outputs = ("counts",)

    class Params(BaseModel):
        top_n: int = Field(5, ge=1, le=50, description="Namespaces to show")

    def analyze(self, data, params):
        counts = data.latest("topics").groupby("namespace").size().rename("topics")
        return Result(frames={"counts": counts.reset_index().head(params.top_n)})

    def render(self, result):
        counts = result.frames["counts"]
        return [Metric("Namespaces", len(counts)), Table(counts, title="Topics per namespace"),
                Note("Drawn by the generic analysis page.")]

PLUGINS = (TopicCount,)
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    base = tmp_path_factory.mktemp("browser")
    store = base / "store"
    write_scenario(store, polls=6)
    plugin_dir = base / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / "topic_count.py").write_text(textwrap.dedent(DROP_IN))
    app = serve(store, PULSAR_LENS_PLUGIN_DIRS=str(plugin_dir), PULSAR_LENS_POLL_INTERVAL="1h")
    try:
        yield app
    finally:
        app.stop()


CHARTS_DRAWN = """() => [...document.querySelectorAll('.vega-embed')]
    .every(e => e.querySelector('canvas, svg'))"""


def open_page(page: Page, url: str, title: str) -> None:
    page.goto(url, timeout=TIMEOUT_MS)
    expect(page.locator("h1").first).to_have_text(title, timeout=TIMEOUT_MS)
    settle(page)


def settle(page: Page) -> None:
    """Wait until the script run is over: no placeholders, no running icon, charts drawn."""
    for test_id in ("stSkeleton", "stAppSkeleton", "stStatusWidgetRunningIcon"):
        expect(page.get_by_test_id(test_id)).to_have_count(0, timeout=TIMEOUT_MS)
    page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
    page.wait_for_timeout(300)


def assert_healthy(page: Page) -> None:
    expect(page.get_by_test_id("stException")).to_have_count(0)
    errors = page.get_by_test_id("stAlertContentError").all_inner_texts()
    assert not errors, errors


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.mark.parametrize("path", list(PAGES))
def test_browser_page_shows_its_content(served: ServedApp, page: Page, path: str) -> None:
    title, texts = PAGES[path]
    open_page(page, f"{served.url}/{path}", title)
    for text in texts:
        expect(page.get_by_text(text).first).to_be_visible(timeout=TIMEOUT_MS)
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text("standalone")).to_be_visible()
    assert_healthy(page)
    assert screenshot(page, path or "overview").stat().st_size > 10_000


def test_browser_key_shared_draws_charts_and_answers_a_lookup(
    served: ServedApp, page: Page
) -> None:
    open_page(page, f"{served.url}/key-shared", "Key_Shared")
    expect(page.locator(".vega-embed").first).to_be_visible(timeout=TIMEOUT_MS)
    assert page.locator(".vega-embed").count() >= 2
    box = page.get_by_role("textbox", name="Message key")
    box.fill("9")
    box.press("Enter")
    metric = page.get_by_test_id("stMetric").filter(has_text="Sticky hash")
    expect(metric).to_contain_text("2862", timeout=TIMEOUT_MS)
    expect(page.get_by_text("still draining for")).to_be_visible()
    settle(page)
    screenshot(page, "key-shared-lookup")


def test_browser_sidebar_navigates_between_pages(served: ServedApp, page: Page) -> None:
    open_page(page, served.url, "Overview")
    page.get_by_test_id("stSidebar").get_by_text("Failover", exact=True).click()
    expect(page.locator("h1").first).to_have_text("Failover", timeout=TIMEOUT_MS)
    assert page.url.endswith("/failover")


def test_browser_every_plugin_without_a_dedicated_page_has_one(
    served: ServedApp, page: Page
) -> None:
    registry = discover(plugin_dirs=[served.store.parent / "plugins"])
    generic = [p for p in registry if p.plugin.page is None]
    assert "topic-count" in {p.name for p in generic}
    for loaded in generic:
        open_page(page, f"{served.url}/{analysis_url(loaded.name)}", loaded.title)
        assert_healthy(page)
        screenshot(page, analysis_url(loaded.name))


def test_browser_drop_in_plugin_gets_a_form_and_its_views(served: ServedApp, page: Page) -> None:
    open_page(page, f"{served.url}/{analysis_url('topic-count')}", "Topic count")
    expect(page.get_by_text("Drawn by the generic analysis page.")).to_be_visible()
    expect(page.get_by_label("top n", exact=True)).to_have_value("5")
    metric = page.get_by_test_id("stMetric").filter(has_text="Namespaces")
    expect(metric).to_contain_text("1")


def test_browser_follows_new_polls_and_flags_when_they_stop(tmp_path: Path, page: Page) -> None:
    import dataclasses
    import datetime as dt

    from pulsar_lens.core.model import TopicRecord
    from pulsar_lens.core.store import Store
    from tests.dashboard.scenario import make_poll

    store = tmp_path / "store"
    write_scenario(store, polls=2)
    app = serve(store, PULSAR_LENS_POLL_INTERVAL="4s", PULSAR_LENS_PLUGIN_DIRS="")
    try:
        open_page(page, app.url, "Overview")
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_text("2 polls stored", exact=False)).to_be_visible()
        topics = page.get_by_test_id("stMetric").filter(has_text="Topics")
        expect(topics).to_contain_text("6")
        poll = make_poll(dt.datetime.now(dt.UTC), 2)
        extra = TopicRecord("persistent://public/default/new", "public", "public/default")
        Store(store).write(dataclasses.replace(poll, topics=(*poll.topics, extra)))
        # the sidebar checks every 2 s (half the interval) and reruns the page on a new poll
        expect(sidebar.get_by_text("3 polls stored", exact=False)).to_be_visible(timeout=15_000)
        expect(topics).to_contain_text("7", timeout=15_000)
        # no poll for 3 intervals (12 s): the sidebar says the polls stopped
        expect(sidebar.get_by_text("Polls stopped", exact=False)).to_be_visible(timeout=25_000)
        main = page.get_by_test_id("stMain")
        expect(main.get_by_text("Polls have stopped", exact=False)).to_be_visible(timeout=15_000)
        screenshot(page, "overview-stale")
    finally:
        app.stop()
