"""Sample data for developing and testing a plugin without a cluster.

Snapshots and inputs built from `core.model` records, exactly as the runner would hand them
to `analyze`: the same factory the built-in plugins' tests and the benchmarks use.

`make_snapshot()` builds one poll; `make_inputs()` turns a series of them into the exact
`Inputs` the runner would load from a store (Arrow tables with the common columns, then pandas);
`make_inputs_from_records()` does the same column-wise for large inputs;
`MemoryStore` is a fake store with the reading half of `pulsar_lens.core.store.Store`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from pulsar_lens.api import Inputs
from pulsar_lens.core.digest import canonical_json, snapshot_id
from pulsar_lens.core.model import SCHEMAS, EventRecord, Snapshot, records_to_table

T0 = dt.datetime(2026, 11, 21, 12, 0, 0, tzinfo=dt.UTC)
TOPIC = "persistent://public/default/orders"


def at(seconds: float) -> dt.datetime:
    """A UTC instant `seconds` after T0."""
    return T0 + dt.timedelta(seconds=seconds)


def make_snapshot(seconds: float = 0.0, *, cluster: str = "standalone", **tables: Any) -> Snapshot:
    """One poll at T0 + seconds with the given records, e.g. `bundles=(BundleRecord(...),)`."""
    records: dict[str, Any] = {name: tuple(rows) for name, rows in tables.items()}
    return Snapshot(cluster=cluster, collected_at=at(seconds), **records)


def table_of(name: str, snapshot: Snapshot, records: Sequence[Any] | None = None) -> pa.Table:
    rows = snapshot.records(name) if records is None else records
    return records_to_table(
        name,
        rows,
        snapshot_id=snapshot_id(snapshot),
        collected_at=snapshot.collected_at,
        cluster=snapshot.cluster,
    )


def index_frame(snapshots: Sequence[Snapshot]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "snapshot_id": pd.Series([snapshot_id(s) for s in snapshots], dtype=object),
            "collected_at": pd.to_datetime([s.collected_at for s in snapshots], utc=True),
            "cluster": [s.cluster for s in snapshots],
            "partial": [s.partial for s in snapshots],
            "errors_json": [canonical_json(s.errors) for s in snapshots],  # as the store has it
            "requests": [s.requests for s in snapshots],
            "durations_json": [json.dumps(dict(s.durations)) for s in snapshots],
        }
    )


def _table(
    name: str,
    snapshots: Sequence[Snapshot],
    events: Mapping[int, Sequence[EventRecord]],
) -> pa.Table:
    parts = []
    for i, snap in enumerate(snapshots):
        if name == "events":
            parts.append(table_of(name, snap, events.get(i, ())))
        elif name in SCHEMAS and hasattr(snap, name):
            parts.append(table_of(name, snap))
    return pa.concat_tables(parts) if parts else SCHEMAS[name].empty_table()


def make_inputs(
    snapshots: Sequence[Snapshot],
    tables: Iterable[str],
    *,
    events: Mapping[int, Sequence[EventRecord]] | None = None,
) -> Inputs:
    """Inputs over `snapshots` (oldest first); `events` maps a snapshot index to its events."""
    return Inputs(
        tables={n: _table(n, snapshots, events or {}).to_pandas() for n in tables},
        snapshots=index_frame(snapshots),
    )


def make_inputs_from_records(
    tables: Iterable[str], polls: Sequence[Mapping[str, Sequence[Any]]], *, cluster: str = "c"
) -> Inputs:
    """Inputs over `polls` (oldest first, 30 s apart), each mapping a table to its records:
    built column-wise with plain snapshot ids, no digest per record, for inputs of hundreds of
    thousands of rows (scale tests and benchmarks)."""
    names = list(tables)
    parts: dict[str, list[pa.Table]] = {n: [] for n in names}
    for i, poll in enumerate(polls):
        sid, when = f"s{i}", at(i * 30.0)
        for name in names:
            records = list(poll.get(name, ()))
            parts[name].append(
                records_to_table(name, records, snapshot_id=sid, collected_at=when, cluster=cluster)
            )
    index = pd.DataFrame(
        {
            "snapshot_id": [f"s{i}" for i in range(len(polls))],
            "collected_at": pd.to_datetime([at(i * 30.0) for i in range(len(polls))], utc=True),
            "cluster": [cluster] * len(polls),
        }
    )
    return Inputs(
        tables={n: pa.concat_tables(t).to_pandas() for n, t in parts.items()}, snapshots=index
    )


class MemoryStore:
    """The reading half of core.store.Store over snapshots held in memory."""

    def __init__(self, snapshots: Sequence[Snapshot] = ()) -> None:
        self.items = list(snapshots)
        self.reads: list[str] = []

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame:
        frame = index_frame(self.items)
        return frame.tail(limit).reset_index(drop=True) if limit else frame

    def latest_snapshot_id(self) -> str | None:
        return snapshot_id(self.items[-1]) if self.items else None

    def read(self, name: str, *, snapshot_ids: Sequence[str] | None = None) -> pa.Table:
        self.reads.append(name)
        chosen = [s for s in self.items if snapshot_ids is None or snapshot_id(s) in snapshot_ids]
        return _table(name, chosen, {})
