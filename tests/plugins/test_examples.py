"""The docs' example plugins are the files in examples/ (a block marked with the file's path
is that file, whole), and those files' own tests pass as the docs tell to run them."""

from __future__ import annotations

import re
from pathlib import Path

from pulsar_lens.plugins.registry import discover
from tests.example_runs import run_example_tests

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "plugins.md"
MARKED = re.compile(r"<!-- file: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)```", re.S)


def marked_blocks() -> list[tuple[str, str]]:
    return [(m["path"], m["body"]) for m in MARKED.finditer(DOCS.read_text(encoding="utf-8"))]


def test_the_docs_show_the_example_files_whole() -> None:
    blocks = marked_blocks()
    assert {path for path, _ in blocks} >= {
        "examples/drop-in/backlog_top.py",
        "examples/drop-in/tests/test_backlog_top.py",
        "examples/drop-in/pytest.ini",
        "examples/spark-drop-in/pytest.ini",
        "examples/hello-plugin/pyproject.toml",
    }
    for path, body in blocks:
        assert body == (ROOT / path).read_text(encoding="utf-8"), f"docs/plugins.md shows {path}"


def test_the_drop_in_example_loads_from_its_folder() -> None:
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[ROOT / "examples/drop-in"])
    assert registry.failures == []
    assert registry.get("backlog-top").source == str(ROOT / "examples/drop-in/backlog_top.py")


def test_the_drop_in_examples_own_tests_pass() -> None:
    assert "6 passed" in run_example_tests("drop-in", timeout=600)
