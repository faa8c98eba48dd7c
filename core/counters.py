"""Counters read from the brokers, compared across polls."""

from __future__ import annotations


def increase(before: int | None, after: int | None) -> int | None:
    """How much a counter grew between two readings, as Prometheus' `increase` counts it: a
    reading lower than the one before means the broker restarted and counted `after` since.
    None when either reading is unknown."""
    if before is None or after is None:
        return None
    return after - before if after >= before else after
