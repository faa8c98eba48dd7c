"""benchmarks/steps.py runs at a tiny size: each plugin with steps analysed the three ways
(whole window, first pass, after a poll) in processes of their own, with wall, CPU and peak
memory for each, and the results equal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import steps


def test_steps_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert steps.main(["--topics", "200", "--polls", "4", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 polls in ")
    lines = [line for line in out.splitlines() if "results equal" in line]
    assert [line.split()[0] for line in lines] == list(steps.PLUGINS)
    for line in lines:
        for label in steps.LABELS.values():
            assert re.search(rf"{label} +\d+\.\d\d s wall +\d+\.\d\d s CPU +[\d,]+ MiB", line), line
        assert re.search(r"CPU ratio +\d+\.\d", line)
