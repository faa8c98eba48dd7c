"""benchmarks/hashing.py runs at a tiny size and prints every figure: both key sets' rates and
ratios, the what-if's times against the rebuild, and the auto-split heap against the scan."""

from __future__ import annotations

import re

import pytest

from benchmarks import hashing

NUMBER = r"([0-9][0-9,.]*)"


def test_hashing_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--keys", "5000", "--consumers", "10", "--split-consumers", "30"]
    assert hashing.main(argv) == 0
    out = capsys.readouterr().out
    for keys in ("[mixed-length]", "[equal-length]"):
        section = out.split(keys, 1)[1].split("\n\n", 1)[0]
        for label in ("numpy path (no numba)", "per-key mmh3 loop", "per-key sticky_key_hash()"):
            assert re.search(rf"{re.escape(label)}\s+{NUMBER} M keys/s", section), (label, out)
        assert re.search(r"vectorized, auto: \w+\s+[0-9.]+ M keys/s", section), out
        for ratio in ("vectorized / loop", "numpy path / loop", "incl. to_pylist"):
            assert re.search(rf"ratio {re.escape(ratio)}\s+{NUMBER} x", section), (ratio, out)
    assert "[what-if] ring of 10 consumers x 100 points" in out
    for label in ("build once, join by join", "what-if one joins", "what-if one leaves"):
        assert re.search(rf"{re.escape(label)}\s+{NUMBER} ms", out), (label, out)
    assert re.search(rf"ratio rebuild / what-if\s+{NUMBER} x", out), out
    assert "[auto split] 30 consumers join one by one" in out
    assert re.search(rf"ratio scan / heap\s+{NUMBER} x", out), out
