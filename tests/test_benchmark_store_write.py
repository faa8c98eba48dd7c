"""benchmarks/store_write.py runs at a tiny size: every part timed, the same id from the same
tree as the old revision and as this one."""

from __future__ import annotations

import pytest

from benchmarks import store_write


def test_store_write_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    assert store_write.main(["--topics", "60", "--repeat", "1", "--old-revision", "HEAD"]) == 0
    out = capsys.readouterr().out
    rows = {line[:18].strip(): line[18:].split() for line in out.splitlines()[2:-1]}
    for part in ("snapshot_id", "records to Arrow", "Parquet write", "index row", "store.write"):
        old, new = rows[part]
        assert float(old) >= 0 and float(new) >= 0, part
    assert float(rows["id of built tables"][1]) >= 0
    ids = out.splitlines()[-1]
    found = ids.split("'")
    assert found[3] == found[7] and found[3].startswith("sha256t:"), ids  # old id == new id
