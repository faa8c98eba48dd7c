"""Sticky-key hashes inside Spark, in the JVM: the murmur3 of each key by the Java UDF of
`plugins.spark.jvm` on its UTF-8 bytes, reduced for the selector by Spark's own expressions,
with no trip to Python (tests/jvm prove the UDF equal to the broker's `Murmur3_32Hash`).

Where the UDF cannot be compiled (no JDK: a JRE-only image), the keys go through Arrow batches
to the compiled hash of `pulsar_lens.core.hashing` (`mapInArrow`) instead, with the same
values, a few times slower; the reason is logged once per process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core.errors import JvmHashUnavailable
from pulsar_lens.core.hashing import PulsarLine, SelectorKind, reduction, sticky_key_hash_array
from pulsar_lens.plugins.spark import jvm

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

HashPath = Literal["auto", "jvm", "arrow"]
_fell_back: list[str] = []  # the reason the JVM hash is not used, once known


def with_sticky_hash(
    frame: DataFrame,
    key: str = "key",
    *,
    out: str = "hash",
    selector: SelectorKind = "consistent",
    pulsar: PulsarLine = "4.0",
    path: HashPath = "auto",
) -> DataFrame:
    """`frame` with column `out` (long, never null): the sticky hash of the UTF-8 bytes of
    column `key` (a null key hashes as the empty key), as a broker of `pulsar` routes it under
    `selector`. `path`: "jvm" the Java UDF (JvmHashUnavailable without a JDK), "arrow" Arrow
    batches through Python, "auto" the UDF where it can be compiled, else Arrow."""
    if path == "arrow" or (path == "auto" and _fell_back):
        return with_sticky_hash_arrow(frame, key, out=out, selector=selector, pulsar=pulsar)
    try:
        function = jvm.register(frame.sparkSession)
    except JvmHashUnavailable as exc:
        if path == "jvm":
            raise
        _fell_back.append(str(exc))
        log.warning("sticky-key hashes go through Python, a few times slower: %s", exc)
        return with_sticky_hash_arrow(frame, key, out=out, selector=selector, pulsar=pulsar)
    return frame.withColumn(out, sticky_hash_column(function, key, selector, pulsar))


def sticky_hash_column(
    function: str, key: str, selector: SelectorKind, pulsar: PulsarLine
) -> Column:
    """The registered murmur3 UDF on `key`'s bytes, reduced as `core.hashing.reduction` says."""
    from pyspark.sql import functions as F

    h31 = F.call_function(function, F.col(key).cast("binary")).cast("long")
    return F.coalesce(reduced(h31, selector, pulsar), F.lit(0).cast("long"))  # never null


def reduced(h31: Column, selector: SelectorKind, pulsar: PulsarLine) -> Column:
    """A long column of 31-bit murmur3 values reduced as `core.hashing.reduction` says."""
    from pyspark.sql import functions as F

    modulus, plus, zero_to_one = reduction(selector=selector, pulsar=pulsar)
    value = h31 % F.lit(modulus) + F.lit(plus) if modulus else h31
    if zero_to_one:
        value = F.when(value == 0, F.lit(1).cast("long")).otherwise(value)
    return value


def jvm_fallback_reason() -> str | None:
    """Why this process hashes through Python rather than the JVM, or None."""
    return _fell_back[0] if _fell_back else None


def with_sticky_hash_arrow(
    frame: DataFrame,
    key: str = "key",
    *,
    out: str = "hash",
    selector: SelectorKind = "consistent",
    pulsar: PulsarLine = "4.0",
) -> DataFrame:
    """`with_sticky_hash` through Arrow batches and `core.hashing` in the Python workers."""
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
