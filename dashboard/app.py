"""Pulsar Lens dashboard entry: `streamlit run dashboard/app.py`.

Builds the navigation from the plugin registry (see dashboard/navigation.py), draws the shared
sidebar (with the snapshot shown, `timetravel`) and the time-travel banner, then runs the
chosen page. A registry that fails to load leaves the cluster pages.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pulsar_lens.core.logs import setup_logging
from pulsar_lens.dashboard import access, components, data, navigation, status, timetravel
from pulsar_lens.dashboard.app_pages import analysis

PAGES = Path(__file__).parent / "app_pages"


def to_page(spec: navigation.PageSpec) -> st.Page:
    target = PAGES / spec.target if spec.kind == "file" else analysis.page_for(spec.target)
    return st.Page(
        target, title=spec.title, icon=spec.icon, url_path=spec.url_path, default=spec.default
    )


def build_pages() -> dict[str, list[st.Page]]:
    plugins: list = []
    with components.guarded("Loading the plugins"):
        plugins = list(data.registry())
    plan = navigation.page_plan(plugins)
    return {section: [to_page(s) for s in specs] for section, specs in plan.items()}


def main() -> None:
    # the page script is the dashboard's entry point: it loads the settings for this run
    setup_logging(data.settings().logs, unless_configured=True)  # AppTest: pytest's stay
    st.set_page_config(page_title="Pulsar Lens", page_icon=":material/flare:", layout="wide")
    access.guard()  # an anonymous visit stops here when a login is configured
    page = st.navigation(build_pages())
    with st.sidebar:
        status.sidebar_status(data.store_root())
    timetravel.travel_banner(data.store_root())  # above every page, past snapshot or not
    page.run()


main()
