"""What a Spark plugin's `analyze` receives: `SparkInputs` over its window of the store."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from pulsar_lens.api import AnalysisPlugin, SparkInputs
from pulsar_lens.plugins.spark import reader, schemas, session


def load_spark_inputs(
    plugin: AnalysisPlugin, root: str | os.PathLike[str], index: pd.DataFrame
) -> SparkInputs:
    """Spark DataFrames of the declared tables, each over its last `history` (or
    `history_of[table]`) snapshots of `index` as a time window, read with day pruning, and
    only the rows of the clusters of `index` (one, when it is a `ClusterView`'s)."""
    spark = session.get()
    times = [t.to_pydatetime() for t in pd.to_datetime(index["collected_at"], utc=True)]
    # polls of other clusters share the time window in a store several clusters share
    clusters = sorted({str(c) for c in index["cluster"]}) if "cluster" in index else None
    tables: dict[str, Any] = {}
    for name in plugin.inputs:
        if not times:
            tables[name] = spark.createDataFrame([], schemas.spark_schema(name))
            continue
        count = plugin.history_of.get(name, plugin.history)
        since = times[-count] if count < len(times) else times[0]
        tables[name] = reader.read(
            spark, root, name, since=since, until=times[-1], clusters=clusters
        )
    return SparkInputs(
        tables=tables,
        snapshots=index,
        since=times[0] if times else None,
        until=times[-1] if times else None,
    )
