"""Spark reads the store's folders as a hive-partitioned Parquet dataset, skipping temp files."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_lens.core import dataset
from pulsar_lens.core.store import Store
from tests.core.snapshots import T0, make_snapshot

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """The run's one local session (`plugins.spark.session`), shared with tests/spark."""
    os.environ.setdefault("SPARK_TESTING", "1")
    from pulsar_lens.plugins.spark import session

    yield session.get("local[2]")


def test_store_layout_reads_in_spark_and_skips_a_half_written_file(
    spark: object, tmp_path: Path
) -> None:
    store = Store(tmp_path)
    before_midnight = dt.datetime(2026, 11, 21, 23, 59, 30, tzinfo=dt.UTC)
    for i in range(3):
        store.write(make_snapshot(at=before_midnight + i * dt.timedelta(seconds=20), topics=i + 1))
    folder = dataset.partition_dir(tmp_path / "topics", T0.date())
    real = next(folder.glob("*.parquet"))
    (folder / f".{real.name}.deadbeef.tmp").write_bytes(real.read_bytes()[:100])
    frame = spark.read.parquet(str(tmp_path / "topics"))  # type: ignore[attr-defined]
    rows = frame.groupBy("date").count().orderBy("date").collect()
    assert [(str(r["date"]), r["count"]) for r in rows] == [("2026-11-21", 3), ("2026-11-22", 3)]
    assert frame.filter("backlog_size = 0").count() == 6
    index = spark.read.parquet(str(tmp_path / "snapshots"))  # type: ignore[attr-defined]
    assert index.count() == 3
