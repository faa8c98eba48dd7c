"""Run one plugin's dashboard page in Streamlit's AppTest, as the app serves it."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

PAGE_SLUGS = (
    "key-shared-map",
    "stuck-hashes",
    "failover-assignment",
    "bundle-ownership",
    "unload-latency",
    "subscription-status",
    "sticky-ranges",
    "stuck-hash-history",
    "key-distribution",
    "bundle-load-history",
    "failover-history",
    "unload-history",
)
"""Every built-in plugin: five with a page of their own, sticky-ranges and bundle-ownership on
the generic one, and the Spark analyses' pages (they show stored results; a page never starts
Spark)."""


def _page_script(slug: str) -> None:
    from dashboard.app_pages.analysis import draw_analysis

    draw_analysis(slug)


def plugin_page(slug: str, *, timeout: float = 30.0) -> AppTest:
    """The page of plugin `slug` after its first run (the store comes from PULSAR_LENS_STORE)."""
    return AppTest.from_function(_page_script, args=(slug,), default_timeout=timeout).run()
