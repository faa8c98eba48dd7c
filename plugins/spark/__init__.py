"""The Spark engine: one SparkSession per process, explicit schemas for every store table, and
reads of the Parquet store pruned by day and time window.

Nothing here starts a JVM at import time: `session.get()` does, once, when an analysis first
needs Spark. See docs/spark.md.
"""
