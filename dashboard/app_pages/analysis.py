"""The generic analysis page: any plugin's Params as a form, its views drawn; no plugin code."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from dashboard import components, data


def page_for(slug: str) -> Callable[[], None]:
    """A page callable for `st.Page` that shows plugin `slug`."""

    def page() -> None:
        draw_analysis(slug)

    page.__name__ = "analysis_" + slug.replace("-", "_")
    return page


def draw_analysis(slug: str) -> None:
    root = data.store_root()
    loaded = data.registry().plugins.get(slug)
    st.title(loaded.title if loaded else slug)
    if loaded is None:
        components.plugin_missing(slug)
        return
    st.caption(f"{loaded.plugin.description} · `{slug}` {loaded.version} · {loaded.engine}")
    components.require_snapshot(root)
    components.draw_plugin(root, slug, expanded=True)
