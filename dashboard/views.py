"""Drawing what a plugin's `render()` returned: sections, columns, tabs, charts, tables,
metrics and notes, in order. Only this module turns `pulsar_lens.api` views into Streamlit."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import altair as alt
import streamlit as st

from pulsar_lens.api import Chart, Columns, Metric, Note, Section, Table, Tabs, View
from pulsar_lens.core.markdown import escape_markdown

log = logging.getLogger(__name__)

METRICS_PER_ROW = 4


def draw(views: Sequence[View]) -> None:
    """Draw views in order; consecutive metrics share a row of columns; sections, columns
    and tabs lay out the views they hold.

    Titles, labels, metric values and tab labels are text (a plugin puts names in them as
    they are); captions, notes and metric help are Markdown the plugin wrote, with names in
    them escaped by the plugin (`pulsar_lens.api.escape_markdown`)."""
    pending: list[Metric] = []
    for view in views:
        if isinstance(view, Metric):
            pending.append(view)
            continue
        _flush_metrics(pending)
        pending = []
        if isinstance(view, Section):
            st.subheader(escape_markdown(view.title))
            if view.caption:
                st.caption(view.caption)
        elif isinstance(view, Columns):
            widths = list(view.widths) if view.widths else len(view.columns)
            for column, inner in zip(st.columns(widths), view.columns, strict=False):
                with column:
                    draw(inner)
        elif isinstance(view, Tabs):
            labels = [escape_markdown(label) for label, _ in view.tabs]
            for tab, (_, inner) in zip(st.tabs(labels), view.tabs, strict=True):
                with tab:
                    draw(inner)
        elif isinstance(view, Chart):
            draw_chart(view.chart, title=view.title, caption=view.caption)
        elif isinstance(view, Table):
            draw_table(view)
        elif isinstance(view, Note):
            draw_note(view.markdown, level=view.level)
    _flush_metrics(pending)


def draw_views(slug: str, views: Sequence[View]) -> None:
    """A plugin's views; one the page cannot draw (a chart whose spec Altair refuses, say)
    is that plugin's failure, said plainly, not a traceback."""
    try:
        draw(views)
    except Exception as exc:
        log.exception("drawing the views of plugin %s failed", slug)
        st.error(
            f"plugin {slug!r}: a view it rendered could not be drawn: "
            f"{type(exc).__name__}: {escape_markdown(str(exc))}"
        )


MAX_TABLE_ROWS = 5000
"""A table shows at most this many rows (the plugin's order: worst first); the CLI's
`analyze --json` has them all."""


def draw_table(view: Table) -> None:
    _heading(view.title)
    frame = view.frame
    shown = frame.head(MAX_TABLE_ROWS)
    config = {}
    if view.links:
        shown = shown.assign(**{c: shown[c].map(safe_link) for c in view.links})
        config = {c: st.column_config.LinkColumn(c, display_text="open") for c in view.links}
    st.dataframe(shown, hide_index=True, column_config=config)
    notes = [view.caption] if view.caption else []
    if len(frame) > MAX_TABLE_ROWS:
        notes.append(
            f"the first {MAX_TABLE_ROWS:,} of {len(frame):,} rows; "
            "`pulsar-lens analyze SLUG --json` prints them all"
        )
    if notes:
        st.caption(" · ".join(notes))


def safe_link(value: object) -> str | None:
    """A table's link cell as drawn: a relative URL on this host, or an http(s) one; anything
    else (`javascript:`, `//elsewhere`, not text) is no link."""
    if not isinstance(value, str) or not value or value.startswith(("//", "\\")):
        return None
    try:
        scheme = urlsplit(value).scheme
    except ValueError:
        return None
    return value if scheme in ("", "http", "https") else None


def _heading(title: str) -> None:
    if title:
        st.markdown(f"**{escape_markdown(title)}**")


def draw_chart(chart: alt.TopLevelMixin, *, title: str = "", caption: str = "") -> None:
    _heading(title)
    st.altair_chart(chart)
    if caption:
        st.caption(caption)


def draw_note(markdown: str, *, level: str = "info") -> None:
    {"warning": st.warning, "error": st.error}.get(level, st.info)(markdown)


def _flush_metrics(metrics: Sequence[Metric]) -> None:
    for start in range(0, len(metrics), METRICS_PER_ROW):
        row = metrics[start : start + METRICS_PER_ROW]
        for column, metric in zip(st.columns(len(row)), row, strict=True):
            column.metric(
                escape_markdown(metric.label),
                escape_markdown(metric.value) if isinstance(metric.value, str) else metric.value,
                delta=None if metric.delta is None else _delta(metric.delta),
                help=metric.help,
            )


def _delta(text: str) -> str:
    """The delta as text, its leading sign kept bare: Streamlit colours a delta by it."""
    if text[:1] in ("-", "+") and not text[1:2].isspace():
        return text[0] + escape_markdown(text[1:])
    return escape_markdown(text)
