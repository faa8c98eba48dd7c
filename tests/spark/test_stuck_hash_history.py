"""stuck-hash-history on Spark equals the same rule on pandas, frame for frame."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens.core.model import DrainingHashRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.stuck_hash_history import StuckHashHistory
from pulsar_lens.plugins.builtin.stuck_hash_history.reference import episodes, finish
from pulsar_lens.plugins.testing import make_snapshot

pytestmark = pytest.mark.spark

PLUGIN = StuckHashHistory()
T = "persistent://public/default/orders"


def write_polls(root: Path, present: list[list[DrainingHashRecord]]) -> Store:
    store = Store(root)
    for i, rows in enumerate(present):
        store.write(make_snapshot(30.0 * i, draining_hashes=rows))
    return store


def _reference(store: Store) -> dict[str, pd.DataFrame]:
    index = store.snapshots()
    draining = store.read("draining_hashes").to_pandas()
    return dict(finish(episodes(draining, index), newest=len(index) - 1).frames)


def _same(spark_frames: dict[str, pd.DataFrame], pandas_frames: dict[str, pd.DataFrame]) -> None:
    assert set(spark_frames) == set(pandas_frames)
    for name, frame in pandas_frames.items():
        pd.testing.assert_frame_equal(
            spark_frames[name].reset_index(drop=True),
            frame.reset_index(drop=True),
            check_dtype=False,
            obj=name,
        )


def test_a_hash_that_drains_stops_and_drains_again_is_two_episodes(
    spark: object, tmp_path: Path
) -> None:
    held = DrainingHashRecord(T, "ks", "c1", 2862, 3, 7)
    other = DrainingHashRecord(T, "ks", "c2", 45436, 1, 0)
    polls = [[held], [held, other], [], [held], [held]]
    store = write_polls(tmp_path, polls)
    output = runner.run(PLUGIN, store, use_cache=False, use_stored=False)
    found = output.result.frames["episodes"]
    c1 = found[found["consumer_name"] == "c1"].sort_values("first_seen")
    assert list(c1["polls"]) == [2, 2] and list(c1["open"]) == [False, True]
    assert list(c1["seconds"]) == [30.0, 30.0]
    assert output.result.summary == {"episodes": 3, "open": 1}
    recurrence = output.result.frames["recurrence"].iloc[0]
    assert (recurrence["episodes"], recurrence["hashes"], recurrence["recurring"]) == (3, 2, 1)
    _same(dict(output.result.frames), _reference(store))


def test_spark_equals_pandas_on_random_histories(spark: object, tmp_path: Path) -> None:
    rng = random.Random(11)
    keys = [
        (f"{T}-{t}", f"s{s}", f"c{c}", h)
        for t in range(3)
        for s in range(2)
        for c in range(2)
        for h in (7, 2862, 65535)
    ]
    polls = []
    for _ in range(40):
        rows = [
            DrainingHashRecord(t, s, c, h, rng.randint(0, 50), rng.randint(0, 9))
            for t, s, c, h in keys
            if rng.random() < 0.35
        ]
        polls.append(rows)
    store = write_polls(tmp_path, polls)
    output = runner.run(PLUGIN, store, use_cache=False, use_stored=False)
    assert output.result.summary["episodes"] > 50
    _same(dict(output.result.frames), _reference(store))


def test_an_empty_store_has_no_episodes(spark: object, tmp_path: Path) -> None:
    store = write_polls(tmp_path, [[], []])
    output = runner.run(PLUGIN, store, use_cache=False, use_stored=False)
    assert output.result.frames["episodes"].empty
    assert output.result.summary == {"episodes": 0, "open": 0}
