"""`pulsar-lens dev-store DIR`: a small store dated now, with churn and draining hashes in its
last polls, on which every light built-in runs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover


def test_dev_store_writes_recent_polls_with_churn_and_stuck_hashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    assert main(["dev-store", str(root), "--polls", "12"]) == 0
    store = Store(root)
    index = store.snapshots()
    assert len(index) == 12
    newest = pd.Timestamp(index["collected_at"].iloc[-1]).to_pydatetime()
    assert dt.timedelta(0) <= dt.datetime.now(dt.UTC) - newest < dt.timedelta(minutes=5)
    events = store.read("events").to_pandas()
    churn = events[events["kind"].isin(["consumer_left", "consumer_joined"])]
    assert sorted(zip(churn["kind"], churn["consumer_name"], strict=True)) == [
        ("consumer_joined", "orders-4"),
        ("consumer_left", "orders-3"),
    ]
    registry = discover(entry_points=False, plugin_dirs=())
    stuck = runner.run(registry.get("stuck-hashes"), store).result
    assert stuck.summary["stuck"] == 3
    for loaded in registry:
        if loaded.engine == "light":
            assert runner.run(loaded, store).views, loaded.name
    assert "wrote 12 polls" in capsys.readouterr().out


def test_dev_store_refuses_a_store_that_holds_polls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dev-store", str(tmp_path)]) == 0
    assert main(["dev-store", str(tmp_path)]) == 2
    assert "already holds polls" in capsys.readouterr().err
