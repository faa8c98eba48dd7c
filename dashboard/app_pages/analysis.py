"""A plugin's page: its controls and Params as a form, its views drawn; no plugin code.

Every plugin page is this one, built-in or third party: a plugin with a `Page` gets its
title, caption and controls above the views; the others get the plugin's title and
description.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from pulsar_lens.dashboard import components, data
from pulsar_lens.dashboard.status import require_snapshot


def page_for(slug: str) -> Callable[[], None]:
    """A page callable for `st.Page` that shows plugin `slug`."""

    def page() -> None:
        draw_analysis(slug)

    page.__name__ = "analysis_" + slug.replace("-", "_")
    return page


def draw_analysis(slug: str) -> None:
    root = data.store_root()
    loaded = data.registry().plugins.get(slug)
    if loaded is None:
        st.title(slug)
        components.plugin_missing(slug)
        return
    page = loaded.plugin.page
    st.title(page.title if page else loaded.title)
    about = (page.caption if page else "") or loaded.plugin.description
    st.caption(f"{about} · `{slug}` {loaded.version} · {loaded.engine}")
    require_snapshot(root)
    components.draw_plugin(root, slug, expanded=page is None)
