"""benchmarks/plugins_cmd.py runs one round and prints a figure per case against its baseline."""

from __future__ import annotations

import pytest

from benchmarks import plugins_cmd


def test_plugins_cmd_benchmark_runs_one_round(capsys: pytest.CaptureFixture[str]) -> None:
    assert plugins_cmd.main(["--rounds", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "ratio" in line]
    assert [line.split(",")[1].split()[0] for line in lines] == ["built-ins", "built-ins"]
    assert all(float(line.split("ratio")[1].split()[0]) > 0 for line in lines)
