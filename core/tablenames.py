"""The names of the stored tables, in a module without imports: the command line's parser
offers them as choices without loading pyarrow (`core.model`, which re-exports them and keeps
one record type per name, in this order)."""

from __future__ import annotations

POLLED_TABLES: tuple[str, ...] = (
    "brokers",
    "bundles",
    "topics",
    "subscriptions",
    "consumers",
    "draining_hashes",
)
TABLES: tuple[str, ...] = (*POLLED_TABLES, "events", "probes", "key_samples")

TIMED_TABLES: tuple[str, ...] = ("probes",)
"""Tables written on their own clock, not with a poll: their `snapshot_id` names a write
batch, so analyses read them by `collected_at` over the window of polls instead."""
