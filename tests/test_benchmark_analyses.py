"""benchmarks/analyses.py runs at a tiny size: with `--topics`, every case compares old and new
results (equal) and prints wall, CPU and the ratio for reading and analysing, and for a whole
results pass with its table reads, and for pruning and reading the results a collect process
keeps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import analyses


def test_analyses_benchmark_at_scale_runs_tiny(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--topics", "300", "--polls", "3", "--store", str(tmp_path / "store")]
    assert analyses.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("results equal") == len(analyses.CASES)
    figures = [line for line in out.splitlines() if "CPU ratio" in line]
    assert len(figures) == 2 * (len(analyses.CASES) - 2) + 2  # the pass and kept: one line
    assert all(line.count(" s wall") == 2 and line.count(" s CPU") == 2 for line in figures)
    whole = [line for line in figures if line.lstrip().startswith("pass ")]
    assert len(whole) == 1
    assert re.search(r"whole results pass \(\d+ light plugins\): results equal", out)
    reads = re.search(r"table reads (\d+) -> (\d+) \((\d+) of them by steps\)", whole[0])
    assert reads, whole[0]
    old, new, by_steps = (int(n) for n in reads.groups())
    assert by_steps > 0  # a first pass: every step of the window read
    assert new - by_steps < old  # the windows' reads, shared
    (kept,) = [line for line in figures if line.lstrip().startswith("kept ")]
    assert re.search(r"\d+ kept results of each of \d+ light plugins: results equal", out)
    assert re.search(r"MB on disk \d+\.\d -> \d+\.\d$", kept)
