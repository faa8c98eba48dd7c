"""A drop-in whose `analyze` divides by zero, on its page in headless Chromium: the error names
the file and line of the author's code, and a "Traceback" expander holds the author's
traceback as code text (the plugin's words are never Markdown there). Both ways a page meets
the failure: analysed by the page (in the plugin worker) and stored by the collector."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.navigation import analysis_url
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.browser.conftest import ServedApp, serve
from tests.browser.test_dashboard_browser import TIMEOUT_MS, open_page, screenshot
from tests.crashing_plugin import FILE_NAME, RAISING, SLUG, TITLE, raising_line, write_plugin
from tests.dashboard.scenario import write_scenario


@pytest.fixture(scope="module", params=["now", "stored"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedApp]:
    base = tmp_path_factory.mktemp(f"traceback-{request.param}")
    store = base / "store"
    write_scenario(store, polls=2)
    plugin = write_plugin(base / "plugins")
    if request.param == "stored":  # as the collector does after each poll
        loaded = discover(plugin_dirs=[plugin.parent]).get(SLUG)
        (outcome,) = compute_results(Store(store), [loaded], results=ResultStore(store))
        assert outcome.status == "failed"
    app = serve(store, PULSAR_LENS_PLUGIN_DIRS=str(plugin.parent), PULSAR_LENS_POLL_INTERVAL="1h")
    try:
        yield app
    finally:
        app.stop()


def test_browser_a_drop_ins_crash_shows_its_file_line_and_traceback(
    served: ServedApp, page: Page
) -> None:
    plugin = served.store.parent / "plugins" / FILE_NAME
    where = f"{plugin}:{raising_line()}"
    open_page(page, f"{served.url}/{analysis_url(SLUG)}", TITLE)
    error = page.get_by_test_id("stAlertContentError")
    expect(error).to_have_count(1, timeout=TIMEOUT_MS)
    expect(error).to_contain_text(f"plugin '{SLUG}' failed: analyze raised ZeroDivisionError")
    expect(error).to_contain_text(where)
    expander = page.get_by_test_id("stExpander").filter(has_text="Traceback")
    expect(expander).to_have_count(1)
    expander.get_by_text("Traceback", exact=True).click()
    code = expander.get_by_test_id("stCode")
    expect(code).to_be_visible(timeout=TIMEOUT_MS)
    expect(code).to_contain_text(f'File "{plugin}", line {raising_line()}, in share')
    expect(code).to_contain_text("ZeroDivisionError: division by zero")
    expect(code).to_contain_text(RAISING)  # `**not bold**` stays as written: text, not Markdown
    expect(expander.locator("strong")).to_have_count(0)
    expect(page.get_by_test_id("stException")).to_have_count(0)  # said, not a crash of the page
    screenshot(page, served.store.parent.name.rstrip("0123456789"))
