"""What every page shows of plugins: a plugin's section (its controls, its params form, its
views), load failures, and `guarded()`, which keeps one failing block from blanking the page.

The parts live beside it: `views` draws what `render()` returned, `forms` builds the params
form, `status` is the shared sidebar, banner and empty states.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import streamlit as st
from pydantic import BaseModel

from pulsar_lens.core.errors import PluginLoadError, PluginUnavailable, PulsarLensError
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard import data, drill_panel, health_notices, spark_jobs, urlstate
from pulsar_lens.dashboard.forms import params_form
from pulsar_lens.dashboard.views import draw_views
from pulsar_lens.plugins.engines import RunControl, engine_of
from pulsar_lens.plugins.runner import RunOutput

log = logging.getLogger(__name__)


@contextlib.contextmanager
def guarded(what: str) -> Iterator[None]:
    """Show a PulsarLensError as a plain error (with the traceback of what a plugin raised in
    a "Traceback" expander, for its author), anything else as an exception in an expander."""
    try:
        yield
    except PulsarLensError as exc:
        st.error(escape_markdown(exc))
        draw_origin(exc)
    except Exception as exc:
        log.exception("%s failed", what)
        st.error(f"{what} failed: {type(exc).__name__}: {escape_markdown(exc)}")
        with st.expander("details"):
            st.exception(exc)


def draw_origin(exc: PulsarLensError, *, label: str = "") -> None:
    """The traceback beneath `exc`, as code text: a plugin's words are never Markdown here.
    `label` tells one expander from another where a page draws several."""
    if exc.origin is not None and exc.origin.traceback:
        title = f"Traceback: {escape_markdown(label)}" if label else "Traceback"
        with st.expander(title):
            st.code(exc.origin.traceback, language=None)


# --- plugins that failed to load -----------------------------------------------------------


def failure_name(failure: PluginLoadError) -> str:
    """What a load failure is called: its plugin's slug, else its file's or source's name."""
    return failure.plugin or Path(failure.source).name


def plugin_failures_banner() -> None:
    """A warning naming the plugins that failed to load, so nobody misses a silent gap."""
    failures = data.registry().failures
    if failures:
        names = escape_markdown(", ".join(sorted({failure_name(f) for f in failures})))
        st.warning(
            f"{len(failures)} plugin(s) failed to load: {names}. "
            "The Plugins page says why for each."
        )


def plugin_missing(slug: str) -> None:
    try:
        data.registry().get(slug)
        why = ""
    except PluginUnavailable as exc:
        why = f" ({escape_markdown(exc)})"
    st.info(
        f"The `{slug}` analysis is not loaded{why}. The Plugins page lists what loaded and why "
        "a plugin failed."
    )


# --- plugin sections ----------------------------------------------------------------------


def draw_plugin(root: str, slug: str, *, expanded: bool = False) -> None:
    """The plugin's controls, its other params (in an expander), the panels its page asks
    for and its views as its engine's run control obtains them; errors stay in this block.
    The params' values are in the page's URL (`urlstate`), so a link opens this view.
    With default params the views come from a stored result, so the page costs a read and a
    draw."""
    loaded = data.registry().get(slug)
    model = loaded.plugin.Params
    page = loaded.plugin.page
    controls = [c for c in (page.controls if page else ()) if c in model.model_fields]
    others = [name for name in model.model_fields if name not in controls]
    with guarded(f"The {slug} analysis"):
        choices = data.param_choices(root, slug) if model.model_fields else {}
        choices_failure(root, slug, model)
        key = f"analysis_{slug}"
        urlstate.restore(model, choices, key=key)
        params = params_form(model, choices, key=key, only=controls)
        if others:
            with st.expander("Parameters", expanded=expanded and not controls):
                params.update(params_form(model, choices, key=key, only=others))
        urlstate.record(model, params, key=key)
        for panel in page.panels if page else ():
            PANELS[panel](root)
        RUN_CONTROLS[engine_of(loaded).run_control](root, slug, params)
    hook_failure(root, slug)


def draw_analysed(root: str, slug: str, params: Mapping[str, Any]) -> None:
    """The `live` run control: the views of the plugin analysed for these params (for the
    default ones, the result stored for the newest poll)."""
    output = data.run_plugin(root, slug, params)
    draw_views(slug, output.views)
    st.caption(provenance(output))


RUN_CONTROLS: Mapping[RunControl, Callable[[str, str, Mapping[str, Any]], None]] = {
    "live": draw_analysed,
    "job": spark_jobs.draw_job,
}
"""How a plugin's page obtains its views, by its engine's `run_control`."""

PANELS: Mapping[str, Callable[[str], None]] = {
    "unload-drill": drill_panel.drill_panel,
    "collector-health": health_notices.health_panel,
}
"""The panel drawn for each name in `pulsar_lens.api.PANELS`, which a plugin's `Page` lists."""


def choices_failure(root: str, slug: str, model: type[BaseModel]) -> None:
    """A warning when the plugin's param_choices() failed: its choices are typed then."""
    why = data.param_choices_error(root, slug) if model.model_fields else None
    if why:
        st.warning(
            f"The `{slug}` plugin's param_choices() failed: {escape_markdown(why)}. "
            "Its parameters are typed instead of picked from the stored snapshots."
        )


def hook_failure(root: str, slug: str) -> None:
    """A warning when the plugin's metrics() hook failed at the last /metrics build."""
    why = data.metrics_hook_errors(root, data.chosen_cluster(root)).get(slug)
    if why:
        st.warning(
            f"/metrics: the `{slug}` plugin's metrics() hook failed: {escape_markdown(why)}. "
            "Its series are "
            f'missing and `pulsar_lens_plugin_errors{{plugin="{slug}"}}` is 1.'
        )


def provenance(output: RunOutput) -> str:
    """Where the views came from: the stored result of a snapshot, or an analysis just now."""
    polls = f"{len(output.snapshot_ids)} poll(s)"
    if output.stored:
        return f"analysed once when the snapshot arrived (default parameters), over {polls}"
    return f"computed for these parameters in {output.seconds:.2f}s over {polls}"
