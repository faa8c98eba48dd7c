"""One flow: `collect` analyses each new snapshot once; `analyze` reads what it stored."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.plugins import runner
from tests.cli.test_collect_cmd import FakeSource, parse

COUNTING = """
from pathlib import Path

import pandas as pd

from pulsar_lens.api import AnalysisPlugin, Metric, Result

CALLS = Path({calls!r})


class Counting(AnalysisPlugin):
    name = "counting"
    title = "Counting"
    description = "Counts the topics and every time it is asked to."
    version = "1.0"
    inputs = ("topics",)
    outputs = ("topics",)

    def analyze(self, data, params):
        with CALLS.open("a") as out:
            out.write("analyze\\n")
        topics = data.latest("topics")[["topic"]]
        return Result(frames={{"topics": topics}}, summary={{"topics": len(topics)}})

    def render(self, result):
        return [Metric("Topics", result.summary["topics"])]


PLUGINS = (Counting,)
"""


def test_collect_analyses_once_and_analyze_reads_the_stored_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = tmp_path / "calls.txt"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "counting.py").write_text(textwrap.dedent(COUNTING.format(calls=str(calls))))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(plugins))
    store = tmp_path / "store"
    args = parse(
        "--once", "--admin-url", "http://b:8080", "--store", str(store), source=FakeSource()
    )
    assert args.func(args) == 0
    assert calls.read_text() == "analyze\n"  # analysed when the snapshot was written
    capsys.readouterr()
    runner.clear_cache()
    assert main(["analyze", "counting", "--store", str(store), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stored"] is True and out["summary"] == {"topics": 3}
    assert main(["analyze", "subscription-status", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stored"] is True  # built-ins too
    assert calls.read_text() == "analyze\n"  # nobody analysed it again
