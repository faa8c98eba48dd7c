"""The Plugins page shows a drop-in's load failure as its author needs it: the file and line to
look at, and (for an import that raised) the author's traceback in an expander, as a plugin's
page does for an analysis that raised."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from tests.markdown import shown

TIMEOUT = 30.0

RAISES = """
RAISING = {}


def lookup():
    return RAISING["missing"]  # the author's line


lookup()
"""

BAD_CLASS = """
from pulsar_lens.api import AnalysisPlugin


class NoName(AnalysisPlugin):
    title = "No name"


PLUGINS = (NoName,)
"""


def _line_of(source: str, text: str) -> int:
    (number,) = [i for i, line in enumerate(source.splitlines(), 1) if text in line]
    return number


@pytest.fixture
def drop_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "raises_at_import.py").write_text(textwrap.dedent(RAISES))
    (folder / "bad_class.py").write_text(textwrap.dedent(BAD_CLASS))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    return folder


def test_plugins_page_shows_a_load_failures_file_line_and_traceback(
    scenario: Store, drop_ins: Path, app: Callable[..., AppTest]
) -> None:
    at = app("plugins.py")
    assert not at.exception
    assert "Failed (2)" in [s.value for s in at.subheader]
    failed = at.dataframe[1].value.set_index("source")

    raises = drop_ins / "raises_at_import.py"
    at_line = _line_of(RAISES, "the author's line")
    assert failed.loc[str(raises), "where"] == f"{raises}:{at_line}"
    assert "KeyError" in failed.loc[str(raises), "error"]

    bad = drop_ins / "bad_class.py"
    class_line = _line_of(BAD_CLASS, "class NoName")
    (bad_source,) = [s for s in failed.index if s.startswith(str(bad))]
    assert failed.loc[bad_source, "where"] == f"{bad}:{class_line}"

    expanders = [e for e in at.expander if shown(e.label).startswith("Traceback")]
    assert [shown(e.label) for e in expanders] == ["Traceback: raises_at_import.py"]
    (code,) = expanders[0].code
    assert f'File "{raises}", line {at_line}, in lookup' in code.value
    assert "KeyError: 'missing'" in code.value
