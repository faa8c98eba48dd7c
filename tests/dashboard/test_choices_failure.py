"""A plugin whose param_choices() fails says so on its page; its form still works (typed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from tests.markdown import shown

CHOOSY = """
from pulsar_lens.api import AnalysisPlugin, BaseModel, Field, Metric, Result

class Choosy(AnalysisPlugin):
    name = "choosy"
    title = "Choosy"
    description = "Offers namespaces it cannot find."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    class Params(BaseModel):
        namespace: str = Field("", description="a namespace")

    def analyze(self, data, params):
        return Result(frames={"x": data.latest("topics")[["topic"]]})

    def render(self, result, params):
        return [Metric("namespace", params.namespace or "all")]

    def param_choices(self, data):
        raise KeyError("namespaces")

PLUGINS = (Choosy,)
"""


def _analysis_script(slug: str) -> None:
    from pulsar_lens.dashboard.app_pages.analysis import draw_analysis

    draw_analysis(slug)


def test_a_failing_param_choices_shows_on_the_page(
    scenario: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "choosy.py").write_text(textwrap.dedent(CHOOSY))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    at = AppTest.from_function(_analysis_script, args=("choosy",), default_timeout=60).run()
    assert not at.exception
    warnings = [shown(w.value) for w in at.warning]
    assert any(
        "`choosy` plugin's param_choices() failed: param_choices raised KeyError: 'namespaces'" in w
        for w in warnings
    ), warnings
    assert [m.value for m in at.metric] == ["all"]
    assert not at.selectbox and len(at.text_input) == 1  # typed, not picked


def test_a_stored_list_gone_while_read_makes_a_text_box(tmp_path: Path) -> None:
    """The collector pruned the entry after the page read its meta.json: a select box of no
    values would refuse every value, a text box takes one."""
    from pulsar_lens.dashboard.forms import widget_options
    from pulsar_lens.plugins.results import StoredValues

    gone = StoredValues(tmp_path / "pruned" / "choices.parquet", "topic", 600)
    assert widget_options({"topic": gone}, "topic") is None and gone.lost
    assert widget_options({"topic": ["", "a"]}, "topic") == ["", "a"]
