"""benchmarks/store_reads.py runs at a tiny size: a history that closes a day, every read timed
against the naive scan before and after the closed day is compacted."""

from __future__ import annotations

import re

import pytest

from benchmarks import store_reads

CASES = (
    "read_latest (cold Store)",
    "read_latest (warm Store)",
    "read_history 12",
    "read 1 hour range",
    "read by 12 ids (cold Store)",
    "snapshots() whole index",
)


def test_store_reads_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    # 40 polls half an hour apart from noon: the first day closes and is compacted
    argv = ["--snapshots", "40", "--topics", "20", "--step", "1800"]
    assert store_reads.main(argv) == 0
    out = capsys.readouterr().out
    assert "wrote 40 snapshots x 20 topic rows" in out
    assert re.search(r"compacted 1 closed day\(s\) in [0-9.]+ s", out), out
    for label in ("one file per poll", "closed days compacted"):
        section = out.split(f"{label}:", 1)[1].split("\n\n", 1)[0]
        assert re.search(r"naive dataset scan for the latest snapshot [0-9.]+ ms", section)
        for case in CASES:
            found = re.search(rf"{re.escape(case)}\s+[0-9.]+ ms\s+[0-9.]+x faster", section)
            assert found, (label, case, out)
