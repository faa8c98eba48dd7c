"""benchmarks/cli_start.py runs one round and prints, cold and warm, a figure per case beside
both baselines, every run, and the load average around them."""

from __future__ import annotations

import pytest

from benchmarks import cli_start

NAMES = [*cli_start.BASELINES, *cli_start.CASES]


def test_cli_start_benchmark_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_start.main(["--rounds", "1"]) == 0
    out = capsys.readouterr().out
    medians = [line.strip() for line in out.splitlines() if "ratio" in line]
    assert [line.split("  ")[0] for line in medians] == NAMES * 2
    assert all(float(line.split("ratio")[1]) > 0 for line in medians)
    assert all(float(line.split("cpu")[1].split("s")[0]) > 0 for line in medians)
    assert out.index("cold:") < out.index("warm:") < out.index("runs (wall/cpu seconds):")
    runs = out.split("runs (wall/cpu seconds):")[1].splitlines()
    assert sum(line.strip().startswith(("cold ", "warm ")) for line in runs) == 2 * len(NAMES)
    assert out.count("load average at the") == 2
