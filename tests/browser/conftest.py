"""Browser tier: the dashboard served for real on 127.0.0.1 and driven in headless Chromium.

Chromium is Debian's (/usr/bin/chromium); Playwright never downloads a browser here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from pulsar_lens.lab.localpulsar import free_port
from tests.waits import wait_until_ok

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1500}
EXPECT_TIMEOUT_MS = 60_000
"""How long an `expect` waits for what it checks when the test names no time. Playwright's
default, 5 s, was too short beside a loaded test run (load 10-17): a Key_Shared page opened
from a link had not drawn its "Draining hashes" heading after 5 s."""
expect.set_options(timeout=EXPECT_TIMEOUT_MS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/browser/" in str(item.path):
            item.add_marker(pytest.mark.browser)


class ServedApp:
    """`streamlit run dashboard/app.py` on a free loopback port, reading `store`."""

    def __init__(self, store: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = store.parent / f"streamlit-{self.port}.log"
        argv = [
            sys.executable, "-m", "streamlit", "run", str(APP),
            "--server.address", "127.0.0.1", "--server.port", str(self.port),
            "--server.headless", "true", "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
        ]  # fmt: skip
        child_env = {**os.environ, "PULSAR_LENS_STORE": str(store), **(env or {})}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                argv, env=child_env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_until_ok(
            f"{self.url}/_stcore/health",
            timeout=timeout,
            exit_code=self.process.poll,
            output=lambda: self.log.read_text(errors="replace"),
            what="streamlit",
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT)
    try:
        yield context.new_page()
    finally:
        context.close()


def serve(store: Path, **env: str) -> ServedApp:
    app = ServedApp(store, env=env)
    try:
        app.wait_ready()
    except BaseException:
        app.stop()
        raise
    return app
