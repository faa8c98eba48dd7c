"""benchmarks/spark_parts.py runs tiny and prints every stage's figures, its ratio and the
overhead per answer, with the parts built on Spark equal to those built here."""

from __future__ import annotations

import re

import pytest

from benchmarks import spark_parts as bench

pytestmark = pytest.mark.spark


def test_spark_parts_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--topics", "600", "--brokers", "2", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.count("|") == 6}
    for stage in bench.STAGES:
        assert stage in rows, f"no figures for {stage!r}:\n{out}"
        figures = [re.search(r"([0-9.]+) s", f) for f in rows[stage].split("|")[2:5]]
        assert all(figures), rows[stage]
        assert rows[stage].split("|")[5].strip() == "-"  # local[2]: no driver apart
    summary = re.search(r"vs pool: ([0-9.]+)x; overhead per answer: (-?[0-9.]+) s; "
                        r"same parts: yes", out)  # fmt: skip
    assert summary, out
    assert re.search(r"600 topics in 2 answers on local\[2\] .* MB of JSON, .* MB of parts", out)
