"""Sticky-key hashes inside Spark, vectorised: Arrow batches through the compiled hash of
`pulsar_lens.core.hashing` (`mapInArrow`), never a Python call per row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core.hashing import PulsarLine, SelectorKind, sticky_key_hash_array

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def with_sticky_hash(
    frame: DataFrame,
    key: str = "key",
    *,
    out: str = "hash",
    selector: SelectorKind = "consistent",
    pulsar: PulsarLine = "4.0",
) -> DataFrame:
    """`frame` with column `out`: the sticky hash of the UTF-8 bytes of column `key` (a null
    key hashes as the empty key), as a broker of `pulsar` routes it under `selector`."""
    from pyspark.sql.types import LongType, StructField, StructType

    # a new StructType: `frame.schema.add` would change the frame's own cached schema
    schema = StructType([*frame.schema.fields, StructField(out, LongType(), nullable=False)])

    def hash_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys = pc.fill_null(batch.column(key).cast(pa.string()), "")
            hashes = sticky_key_hash_array(keys, selector=selector, pulsar=pulsar)
            column = pa.array(np.asarray(hashes, dtype=np.int64), pa.int64())
            yield pa.RecordBatch.from_arrays([*batch.columns, column], schema=_arrow(batch, out))

    return frame.mapInArrow(hash_batches, schema)


def _arrow(batch: pa.RecordBatch, out: str) -> pa.Schema:
    return batch.schema.append(pa.field(out, pa.int64(), nullable=False))
