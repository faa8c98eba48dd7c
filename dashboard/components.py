"""Streamlit building blocks shared by every page: views, the params form, error display.

`draw(views)` renders what any plugin's `render()` returned; `params_form(Params, choices)`
builds widgets from a pydantic model's fields; `guarded()` keeps one failing block from
blanking the page.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import types
import typing
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt
import annotated_types
import streamlit as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pulsar_lens.api import Chart, Columns, Metric, Note, Section, Table, Tabs, View
from pulsar_lens.core.errors import PluginUnavailable, PulsarLensError
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard import data, drill_panel, health_notices, spark_jobs
from pulsar_lens.dashboard.frames import PollStatus, answer_problems, format_age
from pulsar_lens.plugins.runner import RunOutput

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


MAX_TABLE_ROWS = 5000
"""A table shows at most this many rows (the plugin's order: worst first); the CLI's
`analyze --json` has them all."""


def draw_table(view: Table) -> None:
    _heading(view.title)
    frame = view.frame
    st.dataframe(frame.head(MAX_TABLE_ROWS), hide_index=True)
    notes = [view.caption] if view.caption else []
    if len(frame) > MAX_TABLE_ROWS:
        notes.append(
            f"the first {MAX_TABLE_ROWS:,} of {len(frame):,} rows; "
            "`pulsar-lens analyze SLUG --json` prints them all"
        )
    if notes:
        st.caption(" · ".join(notes))


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


def draw_origin(exc: PulsarLensError) -> None:
    """The traceback beneath `exc`, as code text: a plugin's words are never Markdown here."""
    if exc.origin is not None and exc.origin.traceback:
        with st.expander("Traceback"):
            st.code(exc.origin.traceback, language=None)


# --- the shared sidebar and empty states -------------------------------------------------

SEEN_KEY = "app_seen_snapshot"
NO_SNAPSHOTS = (
    "No snapshots yet — start `pulsar-lens collect` (or `pulsar-lens serve`, which runs it) "
    "against your cluster; this page fills in after the first poll."
)


def refresh_seconds() -> float:
    """How often the sidebar checks for a new poll: half the poll interval, 2-10 s."""
    return min(10.0, max(2.0, data.poll_interval_seconds() / 2))


def cluster_selector(root: str) -> None:
    """A choice of the store's clusters (none shown when it holds one); every page then
    shows the chosen cluster's data. The choice is kept across pages and in the URL."""
    names = data.cluster_names(root)
    if len(names) < 2:
        return
    wanted = st.session_state.get(data.CLUSTER_KEY) or st.query_params.get("cluster")
    if wanted not in names:
        if wanted:
            shown = escape_markdown(str(wanted)[:100])
            st.warning(
                f"No cluster named {shown} in this store; showing {escape_markdown(names[0])}."
            )
        wanted = names[0]
    st.session_state[data.CLUSTER_KEY] = wanted  # kept when a page has no selector of its own
    choice = st.selectbox("Cluster", names, key=data.CLUSTER_KEY)
    st.query_params["cluster"] = choice


def sidebar_status(root: str) -> None:
    """Cluster, snapshot age and warnings; reruns the app when a new poll lands."""
    cluster_selector(root)
    status = data.poll_status(root)
    st.session_state[SEEN_KEY] = status.snapshot_id if status else None

    @st.fragment(run_every=refresh_seconds())
    def _status() -> None:
        current = data.poll_status(root)
        if (current.snapshot_id if current else None) != st.session_state.get(SEEN_KEY):
            st.rerun()
        draw_status(current, root)
        health_notices.sidebar_notices(root)
        quarantined = data.quarantined_files(root)
        if quarantined:
            st.warning(f"{quarantined} unreadable store file(s) moved to quarantine/.")

    _status()


def draw_status(status: PollStatus | None, root: str) -> None:
    if status is None:
        st.info("No snapshots yet.")
        st.caption(f"store: `{root}`")
        return
    st.markdown(f"**Cluster** {escape_markdown(status.cluster)}")
    st.markdown(f"**Last poll** {format_age(status.age_seconds)} ago")
    st.caption(f"{status.collected_at:%Y-%m-%d %H:%M:%S} UTC · {status.polls} polls stored")
    if status.stale:
        st.error(f"Polls stopped: the newest snapshot is {format_age(status.age_seconds)} old.")
    if status.partial:
        st.warning(f"Partial snapshot: {partial_reason(status)}.")


def poll_banner(root: str) -> None:
    """The newest poll's age, and a banner when polls stopped or the poll was partial.

    Redrawn on its own every few seconds, so the banner appears when polls stop even though
    no new snapshot triggers a rerun.
    """

    @st.fragment(run_every=refresh_seconds())
    def _banner() -> None:
        status = data.poll_status(root)
        if status is not None:
            draw_banner(status, interval=data.poll_interval_seconds())

    _banner()


def draw_banner(status: PollStatus, *, interval: float) -> None:
    st.caption(
        f"Cluster {escape_markdown(status.cluster)} · "
        f"snapshot {status.collected_at:%Y-%m-%d %H:%M:%S} UTC "
        f"({format_age(status.age_seconds)} ago) · {status.requests} admin requests"
    )
    if status.stale:
        st.error(
            f"Polls have stopped: the newest snapshot is {format_age(status.age_seconds)} old "
            f"(expected one every {format_age(interval)}). Is `pulsar-lens collect` running "
            "and can it reach the admin API?"
        )
    if status.partial:
        st.warning(
            f"The newest snapshot is partial: {partial_reason(status)}, so some tables may "
            "be incomplete. They are listed below."
        )


def partial_reason(status: PollStatus) -> str:
    """What made a snapshot partial: failed calls, and items refused or cut from answers."""
    items = len(answer_problems(status.errors))
    calls = len(status.errors) - items
    reasons = [f"{calls} admin call(s) failed"] if calls else []
    if items:
        reasons.append(
            f"{items} kind(s) of item in the cluster's answers were refused or cut "
            "(malformed, or beyond Pulsar's own limits), the rest kept"
        )
    return "; ".join(reasons) or "the poll recorded errors"


def require_snapshot(root: str) -> PollStatus:
    """The newest poll, or an empty state that tells the user what to do (and stops the page)."""
    status = data.poll_status(root)
    quarantined = data.quarantined_files(root)
    if quarantined:
        st.warning(
            f"{quarantined} file(s) of the store could not be read as its tables (corrupt, "
            f"empty or foreign) and were moved to `{root}/quarantine/`; what they held is "
            "missing from the pages. Remove them once looked at."
        )
    if status is None:
        st.info(NO_SNAPSHOTS)
        st.caption(f"Reading snapshots from `{root}` (set PULSAR_LENS_STORE to change it).")
        st.stop()
    return status


def plugin_failures_banner() -> None:
    """A warning naming the plugins that failed to load, so nobody misses a silent gap."""
    failures = data.registry().failures
    if failures:
        names = escape_markdown(
            ", ".join(sorted({f.plugin or Path(f.source).name for f in failures}))
        )
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
    """The plugin's controls, its other params (in an expander) and its views; errors stay in
    this block. With default params the views come from the result stored for the newest
    snapshot, so the page costs a read and a draw."""
    loaded = data.registry().get(slug)
    model = loaded.plugin.Params
    page = loaded.plugin.page
    controls = [c for c in (page.controls if page else ()) if c in model.model_fields]
    others = [name for name in model.model_fields if name not in controls]
    with guarded(f"The {slug} analysis"):
        choices = data.param_choices(root, slug) if model.model_fields else {}
        choices_failure(root, slug, model)
        key = f"analysis_{slug}"
        params = params_form(model, choices, key=key, only=controls)
        if others:
            with st.expander("Parameters", expanded=expanded and not controls):
                params.update(params_form(model, choices, key=key, only=others))
        if loaded.engine == "spark":
            spark_output = spark_jobs.stored_output(root, slug, params)
            if spark_output is not None:
                draw_views(slug, spark_output.views)
                st.caption(spark_jobs.provenance(spark_output))
            spark_jobs.job_panel(root, slug, params)
            return
        if slug == drill_panel.DRILL_PAGE:
            drill_panel.drill_panel(root)
        output = data.run_plugin(root, slug, params)
        draw_views(slug, output.views)
        st.caption(provenance(output))
    hook_failure(root, slug)


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
    why = data.metrics_hook_errors(root).get(slug)
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


# --- the params form ----------------------------------------------------------------------


MAX_CHOICES = 5000
"""Above this many allowed values a str param is typed, not picked from a list."""

MAX_TEXT_CHARS = 1000
"""The longest text a params field takes when its model sets no `max_length`."""
INT_LIMIT = 2**53 - 1
FLOAT_LIMIT = 1e15
"""The range of a number field whose model sets no bound of its own (the built-ins all do)."""


def params_form(
    model: type[BaseModel],
    choices: Mapping[str, Sequence[str]] | None = None,
    *,
    key: str,
    only: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One widget per field of `model` (or of the fields in `only`); returns the raw values
    (the runner validates them).

    A str field listed in `choices` becomes a selectbox of those values (a text box when
    there are more than MAX_CHOICES). Widget keys are `{key}_{field}`, so tests can set them.
    """
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if only is not None and name not in only:
            continue
        options = (choices or {}).get(name)
        if options is not None and len(options) > MAX_CHOICES:
            field = _with_hint(field, f"{len(options):,} values: type one")
            options = None
        values[name] = _field_widget(name, field, options, key=f"{key}_{name}")
    return values


def _with_hint(field: FieldInfo, hint: str) -> FieldInfo:
    merged = FieldInfo.merge_field_infos(field)
    merged.description = f"{field.description} ({hint})" if field.description else hint
    return merged


def _field_widget(name: str, field: FieldInfo, options: Sequence[str] | None, *, key: str) -> Any:
    label = field.title or name.replace("_", " ")
    hint = field.description
    kind, optional = _unwrap(field.annotation)
    default = field.get_default(call_default_factory=True)
    if options is not None or typing.get_origin(kind) is typing.Literal or _is_enum(kind):
        return _choice_widget(label, hint, kind, default, options, optional, key=key)
    if kind is bool:
        return st.checkbox(label, value=bool(default), help=hint, key=key)
    if kind in (int, float):
        return _number_widget(label, hint, kind, field, default, key=key)
    start = "" if default is None else str(default)
    limit = max(_max_length(field) or MAX_TEXT_CHARS, len(start))
    text = st.text_input(label, value=start, max_chars=limit, help=hint, key=key)
    problem = text_problem(text, limit)
    if problem:
        st.error(f"{label}: {problem}; the default ({start!r}) is used instead.")
        text = start
    return None if optional and text == "" else text


def _number_widget(
    label: str, hint: str | None, kind: Any, field: FieldInfo, default: Any, *, key: str
) -> Any:
    """A number box bounded by the field's rules (or ±INT_LIMIT, ±FLOAT_LIMIT without any);
    the bounds are in its help."""
    low, high = _bounds(field, whole=kind is int)
    cast = int if kind is int else float
    limit = INT_LIMIT if kind is int else FLOAT_LIMIT
    low = cast(-limit if low is None else low)
    high = cast(limit if high is None else high)
    value = cast(default) if default is not None else low
    bounds = f"from {low:,} to {high:,}"
    number = st.number_input(
        label,
        min_value=low,
        max_value=high,
        value=value,
        step=1 if kind is int else None,
        help=f"{hint} ({bounds})" if hint else bounds.capitalize(),
        key=key,
    )
    if number is None or not math.isfinite(number) or not low <= number <= high:
        st.error(f"{label}: a number {bounds}; the default ({value:,}) is used instead.")
        return value
    return number


def text_problem(text: str, limit: int) -> str:
    """Why typed text is refused (too long, control characters, not Unicode), or ''."""
    if len(text) > limit:
        return f"at most {limit:,} characters, got {len(text):,}"
    for char in text:
        category = unicodedata.category(char)
        if category == "Cc":
            return f"control characters are not accepted (found U+{ord(char):04X})"
        if category == "Cs":
            return "not valid Unicode text (a lone surrogate)"
    return ""


def _max_length(field: FieldInfo) -> int | None:
    for item in field.metadata:
        if isinstance(item, annotated_types.MaxLen):
            return int(item.max_length)
    return None


def _choice_widget(
    label: str,
    hint: str | None,
    kind: Any,
    default: Any,
    options: Sequence[str] | None,
    optional: bool,
    *,
    key: str,
) -> Any:
    if options is None:
        if _is_enum(kind):
            options = [member.value for member in kind]
            default = default.value if isinstance(default, enum.Enum) else default
        else:
            options = list(typing.get_args(kind))
    listed: list[Any] = ([None] if optional else []) + list(options)
    index = listed.index(default) if default in listed else 0
    if not listed:
        st.caption(f"{label}: nothing to choose from yet")
        return default
    return st.selectbox(
        label,
        listed,
        index=index,
        format_func=lambda v: "(all)" if v is None or v == "" else str(v),
        help=hint,
        key=key,
    )


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(inner type, optional?) for `X | None`; other annotations unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _is_enum(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, enum.Enum)


def _bounds(field: FieldInfo, *, whole: bool = True) -> tuple[float | None, float | None]:
    """The field's range; a strict bound of a whole-number field moves in by one, that of a
    float field stays (the model refuses the bound itself: `gt=0` on seconds takes 0.5)."""
    step = 1 if whole else 0
    low: float | None = None
    high: float | None = None
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge  # type: ignore[assignment]
        elif isinstance(item, annotated_types.Gt):
            low = item.gt + step  # type: ignore[operator]
        elif isinstance(item, annotated_types.Le):
            high = item.le  # type: ignore[assignment]
        elif isinstance(item, annotated_types.Lt):
            high = item.lt - step  # type: ignore[operator]
    return low, high
