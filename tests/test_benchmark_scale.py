"""benchmarks/scale.py runs at a tiny size and prints a figure per case and size."""

from __future__ import annotations

import pytest

from benchmarks import scale


def test_scale_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    assert scale.main(["--sizes", "20,40", "--name-length", "50", "--rounds", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "ratio" in line]
    assert len(lines) == 3 * 2
    assert all(line.split("ratio")[1].strip() for line in lines)
