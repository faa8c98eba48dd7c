"""The shared building blocks: the params form, views, error display, the generic page."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from tests.markdown import shown

TIMEOUT = 30.0


def _form_script() -> None:
    import enum
    from typing import Literal

    import streamlit as st
    from pydantic import BaseModel, Field

    from pulsar_lens.dashboard.forms import params_form

    class Mode(enum.Enum):
        FAST = "fast"
        SLOW = "slow"

    class Params(BaseModel):
        top_n: int = Field(10, ge=1, le=100, description="Rows")
        ratio: float = Field(0.5, gt=0.0, lt=1.0)
        exact: bool = False
        order: Literal["asc", "desc"] = "desc"
        mode: Mode = Mode.SLOW
        topic: str = ""
        label: str | None = None

    values = params_form(Params, {"topic": ["", "a", "b"]}, key="t")
    st.json(values)


def test_params_form_builds_one_widget_per_field() -> None:
    at = AppTest.from_function(_form_script, default_timeout=TIMEOUT).run()
    assert not at.exception
    top_n = at.number_input(key="t_top_n")
    assert (top_n.value, top_n.min, top_n.max) == (10, 1, 100)
    assert at.checkbox(key="t_exact").value is False
    assert at.selectbox(key="t_order").options == ["asc", "desc"]
    assert at.selectbox(key="t_order").value == "desc"
    assert at.selectbox(key="t_mode").value == "slow"
    assert at.selectbox(key="t_topic").options == ["(all)", "a", "b"]
    assert at.text_input(key="t_label").value == ""


def test_params_form_returns_the_chosen_values() -> None:
    at = AppTest.from_function(_form_script, default_timeout=TIMEOUT).run()
    at.number_input(key="t_top_n").set_value(25)
    at.selectbox(key="t_topic").set_value("b")
    at.text_input(key="t_label").input("x").run()
    values = at.json[0].value
    assert '"top_n":25' in values.replace(" ", "")
    assert '"topic":"b"' in values.replace(" ", "")
    assert '"label":"x"' in values.replace(" ", "")


def _draw_script() -> None:
    import altair as alt
    import pandas as pd

    from pulsar_lens.api import Chart, Metric, Note, Table
    from pulsar_lens.dashboard.views import draw

    frame = pd.DataFrame({"a": [1, 2]})
    draw(
        [
            Metric("One", 1),
            Metric("Two", "2", delta="+1"),
            Table(frame, title="The table", caption="a caption"),
            Chart(alt.Chart(frame).mark_bar().encode(x="a:Q"), title="The chart"),
            Note("careful", level="warning"),
            Note("broken", level="error"),
            Note("fyi"),
        ]
    )


def test_draw_renders_every_kind_of_view() -> None:
    at = AppTest.from_function(_draw_script, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert [m.label for m in at.metric] == ["One", "Two"]
    assert at.metric[1].delta == "+1"
    assert list(at.dataframe[0].value["a"]) == [1, 2]
    assert [w.value for w in at.warning] == ["careful"]
    assert [e.value for e in at.error] == ["broken"]
    assert [i.value for i in at.info] == ["fyi"]
    assert "**The chart**" in [m.value for m in at.markdown]


def _guarded_script(kind: str) -> None:
    import streamlit as st

    from pulsar_lens.core.errors import SnapshotError
    from pulsar_lens.dashboard.components import guarded

    with guarded("The block"):
        if kind == "ours":
            raise SnapshotError("snapshot 7 is unreadable; run pulsar-lens collect again")
        raise ValueError("unexpected")
    st.write("the page goes on")


def _layout_script() -> None:
    import pandas as pd

    from pulsar_lens.api import Columns, Metric, Note, Section, Table, Tabs
    from pulsar_lens.dashboard.views import MAX_TABLE_ROWS, draw

    big = pd.DataFrame({"n": range(MAX_TABLE_ROWS + 7)})
    draw(
        [
            Section("Part one", caption="its caption"),
            Columns(((Metric("Left", 1),), (Metric("Right", 2), Note("under right"))), (2, 1)),
            Tabs((("First", (Table(big, title="Big"),)), ("Second", (Note("in tab two"),)))),
        ]
    )


def test_draw_lays_out_sections_columns_and_tabs_and_caps_long_tables() -> None:
    at = AppTest.from_function(_layout_script, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert [s.value for s in at.subheader] == ["Part one"]
    assert [m.label for m in at.metric] == ["Left", "Right"]
    assert len(at.columns) >= 2 and [t.label for t in at.tabs] == ["First", "Second"]
    assert [i.value for i in at.tabs[1].info] == ["in tab two"]
    shown = at.tabs[0].dataframe[0].value
    assert len(shown) == 5000
    assert any("the first 5,000 of 5,007 rows" in c.value for c in at.caption)


def test_guarded_shows_our_errors_plainly() -> None:
    at = AppTest.from_function(_guarded_script, args=("ours",), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert [shown(e.value) for e in at.error] == [
        "snapshot 7 is unreadable; run pulsar-lens collect again"
    ]
    assert at.markdown[-1].value == "the page goes on"


def test_guarded_shows_other_errors_with_details_and_goes_on() -> None:
    at = AppTest.from_function(_guarded_script, args=("other",), default_timeout=TIMEOUT).run()
    assert [e.value for e in at.error] == ["The block failed: ValueError: unexpected"]
    assert len(at.expander) == 1
    assert at.exception[0].message == "unexpected"  # inside the expander, not the page
    assert at.markdown[-1].value == "the page goes on"


BROKEN_RUN = """
from pulsar_lens.api import AnalysisPlugin, Result

class Explodes(AnalysisPlugin):
    name = "explodes"
    title = "Explodes"
    description = "Always fails."
    version = "0.1"
    inputs = ("topics",)
    outputs = ("x",)

    def analyze(self, data, params):
        raise RuntimeError("kaboom")

    def render(self, result):
        return []

PLUGINS = (Explodes,)
"""


@pytest.fixture
def broken_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "explodes.py").write_text(textwrap.dedent(BROKEN_RUN))
    (folder / "syntax.py").write_text("this is not python\n")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    return folder


def _analysis_script(slug: str) -> None:
    from pulsar_lens.dashboard.app_pages.analysis import draw_analysis

    draw_analysis(slug)


def test_a_failing_plugin_shows_its_error_on_its_own_page(
    scenario: Store, broken_plugins: Path
) -> None:
    at = AppTest.from_function(_analysis_script, args=("explodes",), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Explodes"]
    assert any("analyze raised RuntimeError: kaboom" in shown(e.value) for e in at.error)


def test_broken_plugins_leave_the_app_and_are_listed(
    scenario: Store, broken_plugins: Path, app
) -> None:
    at = app()
    assert not at.exception
    assert [t.value for t in at.title] == ["Overview"]
    assert any(
        "1 plugin(s) failed to load: syntax.py" in shown(w.value) and "Plugins page" in w.value
        for w in at.warning
    )
    at.switch_page("app_pages/plugins.py").run()
    failed = at.dataframe[1].value
    assert any("syntax.py" in source for source in failed["source"])
    assert "Failed (1)" in [s.value for s in at.subheader]


def test_unknown_plugin_page_says_it_is_not_loaded(scenario: Store) -> None:
    at = AppTest.from_function(_analysis_script, args=("nope",), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("`nope` analysis is not loaded" in i.value for i in at.info)


EXITS = """
import os
from pulsar_lens.api import AnalysisPlugin, Result

class Exits(AnalysisPlugin):
    name = "exits"
    title = "Exits"
    description = "Ends its process."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    def analyze(self, data, params):
        os._exit(3)

    def render(self, result):
        return []

PLUGINS = (Exits,)
"""


def test_a_plugin_that_exits_shows_its_failure_and_the_app_goes_on(
    scenario: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, app
) -> None:
    folder = tmp_path / "exiting"
    folder.mkdir()
    (folder / "exits.py").write_text(textwrap.dedent(EXITS))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    at = AppTest.from_function(_analysis_script, args=("exits",), default_timeout=60).run()
    assert not at.exception
    assert any("analyze ended its worker process (exit code 3)" in shown(e.value) for e in at.error)
    again = app()
    assert not again.exception and [t.value for t in again.title] == ["Overview"]
