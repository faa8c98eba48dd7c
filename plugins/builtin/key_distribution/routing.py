"""`key-distribution` on Spark: each sampled key's poll, selector, hashes and consumer, on
both broker lines.

Which line the window is modelled on is known only once the broker rows come back with the
one collect (`frames.model_of`), and a query that read them first would start more Spark
jobs. So every row is counted once per line (`LINES`, column `pulsar`) and the caller keeps
the modelled line's rows. `selectors` gives one row per sampled subscription, poll and line:
its selector on that line and the members with the ranges they receive
(`reference.selectors_of`, in Python over Arrow batches of these few rows). `assigned` joins
the sampled keys to them: the murmur3 of each key once in the JVM (`with_sticky_hash`),
reduced by Spark's expressions for the row's line, and the consumer whose ranges in that
poll hold the hash it routes by. `reference` states the rule; its pandas twin computes the
modelled line only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from pulsar_lens.core.hashing import PulsarLine, SelectorKind
from pulsar_lens.core.keyload import UNCOVERED
from pulsar_lens.plugins.builtin.key_distribution.frames import BIN_WIDTH, WIDE_BIN_WIDTH
from pulsar_lens.plugins.builtin.key_distribution.reference import GROUP_KEY, selectors_of

LINES: tuple[PulsarLine, ...] = ("3.0", "4.0")
KEPT = [*GROUP_KEY, "label", "collected_at"]
CHOSEN = ["selector", "reduction", "pulsar"]


def selectors(sampled: Any, consumers: Any) -> Any:
    """One row per sampled subscription, poll and line: `KEPT`, its routed `members`
    (consumer_name, hash_ranges) and `CHOSEN`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    member = F.when(F.col("consumer_name").isNotNull(), F.struct("consumer_name", "hash_ranges"))
    groups = (
        sampled.join(
            consumers.select(*GROUP_KEY, "consumer_name", "hash_ranges"), GROUP_KEY, "left"
        )
        .groupBy(*GROUP_KEY, "label", "collected_at", "key_shared_mode")
        .agg(F.collect_list(member).alias("members"))
    )
    kept = [groups.schema[name] for name in [*KEPT, "members"]]
    chosen = [StructField(name, StringType()) for name in CHOSEN]
    return groups.mapInArrow(_selector_batches, StructType([*kept, *chosen]))


def _selector_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        members = batch.column("members")
        for line in LINES:
            kinds, reductions, routed = selectors_of(
                batch.column("key_shared_mode").to_pylist(), members.to_pylist(), pulsar=line
            )
            kept = [batch.column(name) for name in KEPT]
            chosen = [
                pa.array(values, pa.string())
                for values in (kinds, reductions, [line] * batch.num_rows)
            ]
            yield pa.RecordBatch.from_arrays(
                [*kept, pa.array(routed, members.type), *chosen],
                names=[*KEPT, "members", *CHOSEN],
            )


def assigned(samples: Any, chosen: Any) -> Any:
    """Sampled messages per (poll, subscription, key, line): the poll's selector on the line,
    the key's hashes on it (`hash` the one that selector routes by, `sticky_hash` and
    `range_hash` the consistent-hashing and sticky ones, `bin_width` of `hash`) and its
    consumer, the least by name of the members whose ranges hold `hash`, `UNCOVERED` if none
    does."""
    from pyspark.sql import functions as F

    from pulsar_lens.plugins.spark.hashing import reduced, with_sticky_hash

    keyed = samples.select(
        "snapshot_id", "topic", F.coalesce("key", F.lit("")).alias("key"), "sticky_hash"
    )
    per_key = keyed.groupBy("snapshot_id", "topic", "key", "sticky_hash").agg(
        F.count("*").alias("messages")
    )
    # 3.0's consistent-hashing reduction is none: the murmur3 itself, reduced below per line
    hashed = with_sticky_hash(per_key, "key", out="h31", selector="consistent", pulsar="3.0")
    h31, stored = F.col("h31"), F.col("sticky_hash").cast("long")

    def on(selector: SelectorKind) -> Any:
        """The hash of `selector` on the row's line; 4.0's consistent one is the stored one."""
        values = {line: reduced(h31, selector, line) for line in LINES}
        if selector == "consistent":
            values["4.0"] = stored
        return F.when(F.col("pulsar") == "3.0", values["3.0"]).otherwise(values["4.0"])

    ring = F.col("reduction") == "consistent"
    wide = ring & (F.col("pulsar") == "3.0")
    rows = hashed.join(chosen, ["snapshot_id", "topic"], "inner").select(
        *GROUP_KEY,
        "label",
        "collected_at",
        "selector",
        "key",
        "pulsar",
        on("consistent").alias("sticky_hash"),
        on("sticky").alias("range_hash"),
        F.when(ring, on("consistent")).otherwise(on("sticky")).alias("hash"),
        F.when(wide, F.lit(WIDE_BIN_WIDTH))
        .otherwise(F.lit(BIN_WIDTH))
        .cast("long")
        .alias("bin_width"),
        "messages",
        "members",
    )

    def holds(member: Any) -> Any:
        return F.exists(
            member["hash_ranges"],
            lambda r: (
                (F.col("hash") >= r["start"].cast("long"))
                & (F.col("hash") <= r["end"].cast("long"))
            ),
        )

    owners = F.transform(F.filter("members", holds), lambda member: member["consumer_name"])
    owner = F.coalesce(F.array_min(owners), F.lit(UNCOVERED)).alias("consumer_name")
    return rows.select(*[c for c in rows.columns if c != "members"], owner)
