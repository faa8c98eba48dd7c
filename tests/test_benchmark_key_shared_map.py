"""benchmarks/key_shared_map.py runs at a tiny size: the plugin analyses the subscriptions it
builds (every table the plugin declares given to it) and both figures and the ratio print."""

from __future__ import annotations

import re

import pytest

from benchmarks import key_shared_map


def test_key_shared_map_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--subscriptions", "4", "--consumers", "3", "--rounds", "1"]
    assert key_shared_map.main(argv) == 0
    out = capsys.readouterr().out
    assert "4 subscriptions x 3 consumers" in out
    assert re.search(r"baseline \(build the selectors\): [0-9.]+ ms", out), out
    assert re.search(r"key-shared-map analyze\+render: +[0-9.]+ ms", out), out
    assert re.search(r"ratio: [0-9.]+x", out), out
