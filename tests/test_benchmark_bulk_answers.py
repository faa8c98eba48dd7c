"""benchmarks/bulk_answers.py runs at a tiny size and prints every figure of every case."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks import bulk_answers


def test_bulk_answers_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--topics", "60", "--brokers", "2", "--recorded", "--old-revision", "HEAD"]
    assert bulk_answers.main(argv) == 0
    out = capsys.readouterr().out
    assert "old: collectors/ and core/ of HEAD" in out
    synthetic, recorded = out.split("recorded 4.0.7")
    cases = [c for c in bulk_answers.CASES if c != "orjson" or importlib.util.find_spec(c)]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in synthetic.splitlines()[2:]}
    for case in cases:
        stages = bulk_answers.STAGES if case in bulk_answers.FULL else ("decode",)
        for stage in (*stages, "total"):
            wall, cpu, peak = rows[(case, stage)][:3]
            assert float(wall) >= 0 and float(cpu) >= 0 and float(peak) > 0, (case, stage)
    # the full paths assembled the same rows, from the synthetic and the recorded answers
    for part in (synthetic, recorded):
        counts = {line.split()[0]: line.split("{")[1] for line in part.splitlines() if "{" in line}
        assert set(counts) == set(bulk_answers.FULL), part
        assert counts["old"] == counts["new"] == counts["typed"], part
        assert "'topics': 0," not in counts["new"], part
