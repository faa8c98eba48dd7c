"""Read store tables into Spark DataFrames, pruned to a time window by the `date` folders.

`read(session, root, "subscriptions", since=..., until=...)` reads only the files of the day
folders that overlap the window (Spark's partition filter on `date`) and keeps the rows
collected inside it; `snapshot_ids=` narrows to given polls. A table with no files yet is an
empty frame of the right schema, never an error. Spark is handed the files the store's own
reads open (`Store.live_files`), never a folder to list: so it leaves out what they leave out
— the sources of a compaction killed before it deleted them, the files of a poll without an
index row, and every symbolic link below the root — and no row shows twice, half-written or
from outside the store.

A timed table (`core.model.TIMED_TABLES`, the probe rows) is written on its own clock, in
batches between and after polls, so a window that ends at its newest poll would drop the
newest rows: it is read from `since` on, up to now, whatever `until` says, as
`pulsar_lens.plugins.runner.load_inputs` reads it for a light plugin.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pulsar_lens.core.model import TIMED_TABLES
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.spark.schemas import PARTITION_COLUMN, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read(
    session: SparkSession,
    root: str | os.PathLike[str],
    name: str,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    snapshot_ids: Sequence[str] | None = None,
    clusters: Sequence[str] | None = None,
) -> DataFrame:
    """Rows of store table `name` collected in [since, until] (either bound optional; a timed
    table has no upper bound, see the module docstring), of `clusters` when given."""
    from pyspark.sql import functions as F

    schema = spark_schema(name)
    since = None if since is None else _utc(since)
    until = None if until is None else _utc(until)
    upper = None if name in TIMED_TABLES else until
    files = Store(root).live_files(name, since=since, until=upper)
    if not files:
        return session.createDataFrame([], schema)
    # basePath: the `date=` folders above the files still give the partition column
    frame = (
        session.read.schema(schema)
        .option("basePath", _uri(Path(root) / name))
        .parquet(*(_uri(f.path) for f in files))
    )
    if since is not None:
        frame = frame.filter(F.col(PARTITION_COLUMN) >= F.lit(since.date()))
        frame = frame.filter(F.col("collected_at") >= F.lit(since))
    if upper is not None:
        frame = frame.filter(F.col(PARTITION_COLUMN) <= F.lit(upper.date()))
        frame = frame.filter(F.col("collected_at") <= F.lit(upper))
    if snapshot_ids is not None:
        frame = frame.filter(F.col("snapshot_id").isin(list(snapshot_ids)))
    if clusters is not None:
        frame = frame.filter(F.col("cluster").isin(list(clusters)))
    return frame


def _uri(path: Path) -> str:
    # file:// spelled out: a cluster with Hadoop settings reads a bare path from its default
    # filesystem (HDFS), not from the shared mount every executor sees the store on
    return f"file://{os.path.abspath(path)}"


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()}: pass an aware UTC datetime")
    return value.astimezone(dt.UTC)
