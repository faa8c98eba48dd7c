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
    draw_plugin(root, slug, expanded=True)


def draw_plugin(root: str, slug: str, *, expanded: bool = False) -> None:
    """The plugin's params form (in an expander) and its views; errors stay in this block."""
    loaded = data.registry().get(slug)
    with components.guarded(f"The {slug} analysis"):
        params: dict[str, object] = {}
        if loaded.plugin.Params.model_fields:
            with st.expander("Parameters", expanded=expanded):
                choices = data.param_choices(root, slug)
                params = components.params_form(
                    loaded.plugin.Params, choices, key=f"analysis_{slug}"
                )
        output = data.run_plugin(root, slug, params)
        components.draw(output.views)
        st.caption(f"computed in {output.seconds:.2f}s over {len(output.snapshot_ids)} poll(s)")
