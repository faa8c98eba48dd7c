"""The Overview in Chromium while a real `pulsar-lens collect` polls a slow admin API into a
store that turned read-only: it says that the store refuses writes, why, and that the last
poll took longer than its interval."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import SCREENSHOTS, ServedApp, serve
from tests.collecting import Collector, mounted_tmpfs, not_stored, remount, stored
from tests.fake_admin import Answer, FakeAdmin, Seen

TIMEOUT_MS = 60_000
SLOW_PATH = "/admin/v2/tenants"  # asked at every poll
SLOW_SECONDS = 1.5  # every poll then takes longer than its 1 s interval


def slowly(fake: FakeAdmin) -> None:
    """Answer SLOW_PATH as recorded, SLOW_SECONDS late: a slow admin API."""
    gate = threading.Event()  # never set: its wait is the delay the rule stands for

    def answer(seen: Seen) -> Answer:
        gate.wait(SLOW_SECONDS)
        status, body = fake.recorded(SLOW_PATH, seen.query)
        return status, {"Content-Type": "application/json"}, body

    fake.rule(SLOW_PATH, answer)


def test_overview_shows_the_refused_writes_and_the_overrun_in_the_browser(
    tmp_path: Path, page: Page
) -> None:
    # the dashboard's log goes beside the store it is given: a link keeps it off the tmpfs
    link = tmp_path / "store"
    app: ServedApp | None = None
    with mounted_tmpfs(tmp_path / "disk") as disk, FakeAdmin() as fake:
        (disk / "store").mkdir()
        link.symlink_to(disk / "store")
        slowly(fake)
        with Collector(link, fake.url) as collector:
            try:
                collector.beats(1, stored)
                remount(disk, "ro")
                collector.beats(2, not_stored)
                app = serve(link, PULSAR_LENS_POLL_INTERVAL="1s")
                page.goto(app.url, timeout=TIMEOUT_MS)
                expect(page.locator("h1").first).to_have_text("Overview", timeout=TIMEOUT_MS)
                refused = page.get_by_text(re.compile(r"^The store refused the last \d+ write"))
                expect(refused).to_be_visible(timeout=TIMEOUT_MS)
                expect(refused).to_contain_text("EROFS: Read-only file system")
                expect(refused).to_contain_text(
                    "snapshots are kept in memory (up to 5) and retried"
                )
                overran = page.get_by_text(re.compile(r"^The last poll took [\d.]+s, over the 1s"))
                expect(overran).to_be_visible(timeout=TIMEOUT_MS)
                expect(overran).to_contain_text("PULSAR_LENS_POLL_INTERVAL")
                sidebar = page.locator("[data-testid='stSidebar']")
                expect(sidebar.get_by_text(re.compile("Store refuses writes"))).to_be_visible()
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / "overview-health.png"), full_page=True)
            finally:
                if app is not None:
                    app.stop()
    assert "Traceback" not in collector.stderr, collector.stderr
