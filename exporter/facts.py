"""What /metrics reads from the store beside the analyses: the newest snapshot's counts and
subscriptions, and the file where it notes which plugins' metrics() hooks failed."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pulsar_lens.exporter.families import ClusterFacts

if TYPE_CHECKING:
    from pulsar_lens.plugins.runner import SnapshotStore

COUNTED_TABLES = ("brokers", "topics", "subscriptions", "consumers")
HOOK_ERRORS = ".metrics-hooks.json"  # in the store's results/ folder


def hook_errors_path(store_root: str | os.PathLike[str]) -> Path:
    from pulsar_lens.plugins.results import RESULTS_DIR

    return Path(store_root) / RESULTS_DIR / HOOK_ERRORS


def read_hook_errors(
    store_root: str | os.PathLike[str], cluster: str | None = None
) -> dict[str, Any]:
    """What the last /metrics build of `cluster`'s newest snapshot wrote (None: of the store's,
    when one collect polls one cluster): `snapshot_id`, `at` and `failed` (slug -> why the
    plugin's metrics() hook failed). A cluster without an entry of its own gets the store's;
    {} when there is none or the file is unreadable."""
    try:
        loaded = json.loads(hook_errors_path(store_root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = hook_entries(loaded)
    found = entries.get(cluster or "", entries.get(""))
    return found if isinstance(found, dict) else {}


def hook_entries(loaded: Any) -> dict[str, Any]:
    """The file's entries by cluster ("" for the store's own). A file of one entry (written
    before the builds of several clusters were kept apart) is the store's."""
    if not isinstance(loaded, dict):
        return {}
    clusters = loaded.get("clusters")
    if isinstance(clusters, dict):
        return {str(k): v for k, v in clusters.items()}
    return {"": loaded} if "failed" in loaded else {}


def read_facts(
    store: SnapshotStore, sid: str, collected_at: dt.datetime, index_row: Mapping[str, Any]
) -> ClusterFacts:
    """The newest snapshot's subscriptions table and row counts (from its index row if there)."""
    subscriptions = store.read("subscriptions", snapshot_ids=[sid]).to_pandas()
    counts = _index_counts(index_row)
    for table in COUNTED_TABLES:
        if table not in counts:
            counts[table] = (
                len(subscriptions) if table == "subscriptions" else _rows(store, table, sid)
            )
    return ClusterFacts(
        snapshot_id=sid, collected_at=collected_at, counts=counts, subscriptions=subscriptions
    )


def _index_counts(index_row: Mapping[str, Any]) -> dict[str, int]:
    text = index_row.get("row_counts_json")
    if not isinstance(text, str):
        return {}
    counts = json.loads(text)
    return {k: int(v) for k, v in counts.items() if k in COUNTED_TABLES}


def _rows(store: SnapshotStore, table: str, sid: str) -> int:
    return int(store.read(table, snapshot_ids=[sid]).num_rows)
