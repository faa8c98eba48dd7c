"""Plugins: what loaded (name, version, engine, source) and what failed, with the reason, the
file and line its author looks at, and (for an import that raised) the author's traceback."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pulsar_lens.dashboard import components, data

st.title("Plugins")
with components.guarded("Listing the plugins"):
    registry = data.registry()
    loaded = pd.DataFrame(
        [
            {
                "name": p.name,
                "title": p.title,
                "version": p.version,
                "engine": p.engine,
                "history": p.plugin.history,
                "inputs": ", ".join(p.plugin.inputs),
                "source": p.source,
            }
            for p in registry
        ],
        columns=["name", "title", "version", "engine", "history", "inputs", "source"],
    )
    st.subheader(f"Loaded ({len(loaded)})")
    st.dataframe(loaded, hide_index=True)
    st.subheader(f"Failed ({len(registry.failures)})")
    if registry.failures:
        failed = pd.DataFrame(
            [
                {"plugin": f.plugin or "", "source": f.source, "where": f.where, "error": f.message}
                for f in registry.failures
            ],
            columns=["plugin", "source", "where", "error"],
        )
        st.dataframe(failed, hide_index=True)
        for failure in registry.failures:
            components.draw_origin(failure, label=components.failure_name(failure))
    else:
        st.success("Every configured plugin loaded.")
    st.caption(
        "Plugins come from the built-ins, installed packages (entry-point group "
        "`pulsar_lens.plugins`) and `*.py` files in the directories of PULSAR_LENS_PLUGIN_DIRS."
    )
