"""Fixtures for the dashboard tests: a real store written to a tmp dir, and AppTest runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from tests import pages
from tests.dashboard.scenario import write_scenario

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TIMEOUT = 30.0


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty store directory the app reads (PULSAR_LENS_STORE), polls every 10 s."""
    root = tmp_path / "store"
    monkeypatch.setenv("PULSAR_LENS_STORE", str(root))
    monkeypatch.setenv("PULSAR_LENS_POLL_INTERVAL", "10s")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", "")
    return root


@pytest.fixture
def scenario(store_dir: Path) -> Store:
    return write_scenario(store_dir)


@pytest.fixture
def app() -> Callable[[str | None], AppTest]:
    """Run the app, optionally switched to a page file under dashboard/app_pages/."""

    def run(page: str | None = None) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
        if page is not None:
            at.switch_page(f"app_pages/{page}").run()
        return at

    return run


@pytest.fixture
def plugin_page() -> Callable[[str], AppTest]:
    """Run the page of plugin `slug` as the app serves it (its own or the generic one)."""
    return lambda slug: pages.plugin_page(slug, timeout=TIMEOUT)
