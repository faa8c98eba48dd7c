"""Explicit Spark schemas of every store table, made from the Arrow schemas in `core.model`
(and the store's index), plus the `date` partition column of the store's day folders.

Reading with an explicit schema means no schema inference over thousands of files, and a file
written before a column existed reads that column as null instead of failing the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pulsar_lens.core.store import STORE_SCHEMAS

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

PARTITION_COLUMN = "date"


def spark_schema(name: str) -> StructType:
    """The Spark schema of store table `name` (a table of core.model, or `snapshots`),
    ending with the `date` partition column; KeyError names the known tables."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import DateType, StructField

    try:
        arrow = STORE_SCHEMAS[name]
    except KeyError:
        known = ", ".join(sorted(STORE_SCHEMAS))
        raise KeyError(f"no store table {name!r}; known: {known}") from None
    schema = from_arrow_schema(arrow)
    return schema.add(StructField(PARTITION_COLUMN, DateType(), nullable=True))
