"""Names a cluster chose, served for real and opened in headless Chromium: a subscription and
a consumer named like a Markdown image, a link and an HTML image pointing at a beacon on
loopback. The pages show the names as text; the browser fetches nothing from the beacon and
finds no link to follow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page, expect

from pulsar_lens.core.markdown import WORD_JOINER
from tests.browser.conftest import ServedApp, serve
from tests.browser.test_dashboard_browser import TIMEOUT_MS, assert_healthy, open_page, screenshot
from tests.dashboard.scenario import write_scenario
from tests.hostile_names import renamer

LINK = "https://evil.example/login"
PAGES = {
    "key-shared": ("Key_Shared", "persistent://public/default/payments | {name} payments-ks"),
    "failover": ("Failover", "Active consumers of {name} events-fo @ "),
    "stuck-hashes": ("Stuck hashes", "holder(s) {name} c1 must acknowledge"),
}
"""Page, its title, and a line of its Markdown (subheader, chart title, note) holding a name;
the line's last words are drawn whatever becomes of the name."""


@dataclass
class Beacon:
    """An HTTP server on loopback that remembers every request it gets."""

    server: ThreadingHTTPServer
    requests: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def beacon() -> Iterator[Beacon]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(f"{self.path} (Referer: {self.headers.get('Referer')})")
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Beacon(server, seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def hostile_name(beacon: Beacon) -> str:
    return f'![b]({beacon.url}/md.png) [click me]({LINK}) <img src="{beacon.url}/html.png">'


@pytest.fixture(scope="module")
def served(beacon: Beacon, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    store = tmp_path_factory.mktemp("names") / "store"
    name = hostile_name(beacon)
    subscription, consumer = renamer("subscription", name), renamer("consumer", name)
    write_scenario(store, polls=6, rename=lambda value: consumer(subscription(value)))
    app = serve(store, PULSAR_LENS_POLL_INTERVAL="1h", PULSAR_LENS_PLUGIN_DIRS="")
    try:
        yield app
    finally:
        app.stop()


LINKS_AND_IMAGES = """url => [
    ...[...document.querySelectorAll('a[href]')].map(a => a.href),
    ...[...document.querySelectorAll('img[src], image')].map(i => i.src || i.href.baseVal),
].filter(target => target.startsWith(url) || target.startsWith('https://evil.example'))"""


@pytest.mark.parametrize("path", list(PAGES))
def test_browser_names_like_markdown_are_text_and_fetch_nothing(
    served: ServedApp, beacon: Beacon, page: Page, path: str
) -> None:
    title, line = PAGES[path]
    beacon.requests.clear()
    open_page(page, f"{served.url}/{path}", title)
    last_words = line.rpartition("}")[2].strip()
    drawn = page.get_by_test_id("stMarkdownContainer").filter(has_text=last_words)
    expect(drawn.first).to_be_visible(timeout=TIMEOUT_MS)
    page.wait_for_load_state("networkidle", timeout=TIMEOUT_MS)
    assert beacon.requests == [], beacon.requests
    assert page.evaluate(LINKS_AND_IMAGES, beacon.url) == []
    shown = page.locator("body").inner_text().replace(WORD_JOINER, "")
    assert line.format(name=hostile_name(beacon)) in shown
    assert_healthy(page)
    screenshot(page, f"names-{path}")
