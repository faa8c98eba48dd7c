"""A stored snapshot read back as a `Snapshot`, so that a restarted loop diffs its first poll
against the last snapshot stored before the restart.

`restore_latest(store, cluster)` rebuilds the newest stored snapshot of one cluster (several
may share a store) as the diff reads it (`pulsar_lens.collectors.events.diff_basis`): its
brokers and bundles, the columns of topics, subscriptions and consumers the diff reads (hash
ranges included) and, from the index row, its endpoint errors, so that the partial rules of
`pulsar_lens.collectors.events.diff` hold as they did when it was polled. Only those columns
are read: at 1,000,000 topics the rows as records would take minutes and gigabytes.
"""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pyarrow as pa

from pulsar_lens.collectors.events import DIFF_COLUMNS
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import Snapshot, parse_errors
from pulsar_lens.core.store import Store
from pulsar_lens.core.tablerows import HeldColumns, records_from_table


def restore_latest(
    store: Store, cluster: str, *, before: dt.datetime | None = None
) -> Snapshot | None:
    """The newest stored snapshot of `cluster` (older than `before` if given) as the diff reads
    it; None when the store holds none. SnapshotError when it is there but cannot be read
    back."""
    index = ClusterView(store, cluster).snapshots(limit=1)
    if index.empty:
        return None
    row = index.iloc[-1]
    collected_at = pd.Timestamp(row["collected_at"]).to_pydatetime()
    if before is not None and collected_at >= before:
        return None
    sid = str(row["snapshot_id"])
    try:
        held = {
            name: HeldColumns(
                name, store.read(name, snapshot_ids=[sid], columns=columns).select(columns)
            )
            for name, columns in DIFF_COLUMNS.items()
        }
        return Snapshot(
            cluster=cluster,
            collected_at=collected_at,
            brokers=records_from_table("brokers", store.read("brokers", snapshot_ids=[sid])),
            bundles=records_from_table("bundles", store.read("bundles", snapshot_ids=[sid])),
            **held,
            errors=parse_errors(row["errors_json"]),
            durations=_durations(row["durations_json"]),
            requests=0 if pd.isna(row["requests"]) else int(row["requests"]),
        )
    except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
        raise SnapshotError(
            f"snapshot {sid} cannot be read back: {exc}", path=store.root, snapshot_id=sid
        ) from exc


def _durations(text: object) -> dict[str, float]:
    loaded = json.loads(str(text)) if text else {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
