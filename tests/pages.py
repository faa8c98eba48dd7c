"""Run one plugin's dashboard page in Streamlit's AppTest, as the app serves it."""

from __future__ import annotations

from collections.abc import Mapping

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
    from pulsar_lens.dashboard.app_pages.analysis import draw_analysis

    draw_analysis(slug)


LOGIN = {
    "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
    "cookie_secret": "cookie-secret-0123456789",
    "client_id": "pulsar-lens",
    "client_secret": "client-secret-Zq81",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
}
"""An `[auth]` table: the dashboard's login configured (its provider is never reached)."""


def plugin_page(
    slug: str,
    *,
    timeout: float = 30.0,
    user: dict[str, object] | None = None,
    query: Mapping[str, str] | None = None,
    state: dict[str, object] | None = None,
) -> AppTest:
    """The page of plugin `slug` after its first run (the store comes from PULSAR_LENS_STORE);
    with `user`, as that user sees it through the dashboard's login (LOGIN); with `query`,
    opened at a URL with that query string; with `state`, what the session holds before it
    (such as the sidebar's choices)."""
    at = AppTest.from_function(_page_script, args=(slug,), default_timeout=timeout)
    at.query_params.update(query or {})
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if user is not None:
        at.secrets["auth"] = LOGIN
        at.user = user
    return at.run()
