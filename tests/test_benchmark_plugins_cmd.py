"""benchmarks/plugins_cmd.py runs one round and prints a figure per case against its baseline:
the built-ins, a drop-in folder with an empty listing cache (cold) and with a filled one
(warm), and the load average around them."""

from __future__ import annotations

import pytest

from benchmarks import plugins_cmd

CASES = ["built-ins", "built-ins + a drop-in, cold", "built-ins + a drop-in, warm"]


def test_plugins_cmd_benchmark_reports_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert plugins_cmd.main(["--rounds", "1"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "ratio" in line]
    assert [line.removeprefix("plugins, ").split("  ")[0].strip() for line in lines] == CASES
    assert all(float(line.split("ratio")[1].split()[0]) > 0 for line in lines)
    assert ["(not checked)" in line for line in lines] == [False, True, False]
    assert "baseline (import pandas, pydantic, pyarrow)" in out
    assert out.count("load average at the") == 2
