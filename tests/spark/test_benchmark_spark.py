"""benchmarks/spark.py's hashing part runs tiny and prints every stage's figures, the Java
UDF's among them, and its ratios against the per-row UDF and the Arrow path."""

from __future__ import annotations

import re

import pytest

from benchmarks import spark as bench

pytestmark = pytest.mark.spark


def test_spark_hashing_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--keys", "20000", "--partitions", "2", "--skip-scale", "--skip-key-distribution"]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "failed" not in out, out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.count("|") == 6}
    for label in bench.HASH_STAGES.values():
        assert label in rows, f"no figures for {label!r}:\n{out}"
        figures = [f.strip() for f in rows[label].split("|")[2:6]]
        assert all(float(f) >= 0 for f in figures), rows[label]
    for when in ("cold", "warm"):
        ratio = re.search(rf"ours \(JVM\) vs the per-row UDF, {when}: ([0-9.]+)x; vs the Arrow "
                          r"path: ([0-9.]+)x; ours ([0-9.]+) M keys/s", out)  # fmt: skip
        assert ratio, f"no {when} ratios:\n{out}"
    assert "the Java UDF's set-up" in out
    assert re.search(r"partitions held in memory \d+ of \d+", out), out
