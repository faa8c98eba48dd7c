"""Names a cluster chose reach every page as text: each kind of name (tenant, namespace,
topic, subscription, consumer, broker) carrying every kind of Markdown (images, links, HTML,
LaTeX, colours, emoji, backticks, line breaks, web addresses) goes through every built-in
plugin's analysis and views and the dashboard's drawing of them, and the Overview; whatever
Streamlit receives as Markdown holds it escaped, and it is still shown.

`escape_markdown` itself is checked over generated text: what it returns is plain text to
Streamlit's Markdown and reads as the text it was given.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.markdown import WORD_JOINER, escape_markdown
from pulsar_lens.core.secrets import escape_controls
from tests.hostile_names import CONSTRUCTS, FIELDS, FRAGMENTS, HOSTILE, write_hostile_scenario
from tests.markdown import escaped_text_problem, shown, syntax_of
from tests.pages import PAGE_SLUGS, plugin_page
from tests.props.strategies import NAME_SAMPLES, props

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TIMEOUT = 60.0
PROSE = ("title", "header", "subheader", "markdown", "caption")
ALERTS = ("info", "warning", "error", "success")
TEXT_KINDS = ("subheader", "metric label", "metric value", "metric delta", "tab")
"""What draw() shows as text, so what reaches Streamlit is escaped text as a whole."""


@dataclass
class Pages:
    field: str
    pages: dict[str, AppTest]


@pytest.fixture(scope="module", params=FIELDS)
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pages:
    field = str(request.param)
    root = tmp_path_factory.mktemp(field) / "store"
    env = {
        "PULSAR_LENS_STORE": str(root),
        "PULSAR_LENS_POLL_INTERVAL": "10m",
        "PULSAR_LENS_PLUGIN_DIRS": "",
        "PULSAR_LENS_SPARK_JOBS": "0",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        write_hostile_scenario(root, field)
        pages = {slug: plugin_page(slug, timeout=TIMEOUT) for slug in PAGE_SLUGS}
        pages["overview"] = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    return Pages(field, pages)


def markdown_sent(at: AppTest) -> Iterator[tuple[str, str]]:
    """(kind, Markdown) of everything on the page Streamlit renders as Markdown."""
    for kind in (*PROSE, *ALERTS):
        for element in getattr(at, kind):
            yield kind, str(element.value)
    for metric in at.metric:
        proto: Any = metric.proto
        yield "metric label", proto.label
        yield "metric value", proto.body
        yield "metric delta", proto.delta
        yield "metric help", proto.help
    for tab in at.tabs:
        yield "tab", tab.label
    for expander in at.expander:
        yield "expander", expander.label


def texts_shown(at: AppTest) -> Iterator[str]:
    """What a reader sees: Markdown as read, table cells and choices as they are."""
    yield from (shown(markdown) for _, markdown in markdown_sent(at))
    for table in at.dataframe:
        yield from (str(cell) for cell in table.value.to_numpy().ravel())
    for box in at.selectbox:
        yield from (str(option) for option in box.options)


def test_hostile_names_reach_streamlit_only_escaped(hostile: Pages) -> None:
    raw = [
        (slug, kind, fragment, markdown[:200])
        for slug, at in hostile.pages.items()
        for kind, markdown in markdown_sent(at)
        for fragment in FRAGMENTS
        if fragment in syntax_of(markdown)
    ]
    assert not raw, (hostile.field, raw)
    assert not [slug for slug, at in hostile.pages.items() if at.exception], hostile.field


def test_text_views_with_hostile_names_are_escaped_text(hostile: Pages) -> None:
    problems = [
        (slug, kind, problem)
        for slug, at in hostile.pages.items()
        if slug != "overview"
        for kind, markdown in markdown_sent(at)
        if kind in TEXT_KINDS and markdown
        if (problem := escaped_text_problem(markdown))
    ]
    assert not problems, (hostile.field, problems)


def test_hostile_names_are_still_shown(hostile: Pages) -> None:
    seen = {
        slug
        for slug, at in hostile.pages.items()
        if any(escape_controls(HOSTILE) in text or HOSTILE in text for text in texts_shown(at))
    }
    assert seen, f"no page shows a {hostile.field} named {HOSTILE!r}"


names = (
    st.sampled_from([*CONSTRUCTS.values(), HOSTILE, *NAME_SAMPLES])
    | st.text(max_size=40)
    | st.lists(st.sampled_from([*CONSTRUCTS.values(), " ", "-", ">", "@", "http://", "  "])).map(
        "".join
    )
)


@props(400)
@given(text=names)
def test_escape_markdown_gives_plain_text_that_reads_as_the_name(text: str) -> None:
    escaped = escape_markdown(text)
    assert escaped_text_problem(escaped) == ""
    assert shown(escaped) == escape_controls(text).replace(WORD_JOINER, "")
