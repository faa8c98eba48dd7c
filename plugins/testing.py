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
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pyarrow as pa

from pulsar_lens.api import AnalysisPlugin, Inputs
from pulsar_lens.core.digest import canonical_json, snapshot_id
from pulsar_lens.core.model import (
    SCHEMAS,
    DrainingHashRecord,
    EventRecord,
    Snapshot,
    records_to_table,
)
from pulsar_lens.core.store import read_columns

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


def read_by(plugin: AnalysisPlugin | type[AnalysisPlugin]) -> tuple[str, ...]:
    """Every table the plugin reads: its `inputs`, then its `step_inputs` (for `make_inputs`,
    so that `run_on_inputs` can compute its steps)."""
    return tuple(dict.fromkeys((*plugin.inputs, *plugin.step_inputs)))


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

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Rows of `name` from the chosen snapshots, collected at or after `since`, as the
        store reads them (a timed table such as events is read by time; `columns` as
        `Store.read` keeps them)."""
        self.reads.append(name)
        chosen = [
            s
            for s in self.items
            if (snapshot_ids is None or snapshot_id(s) in snapshot_ids)
            and (since is None or s.collected_at >= since)
        ]
        table = _table(name, chosen, {})
        wanted = read_columns(name, columns)
        return table if wanted is None else table.select(wanted)


# --- a small cluster polled up to now ---------------------------------------------------------

BROKER = "127.0.0.1:8080"
ORDERS = "persistent://public/default/orders"
PAYMENTS = "persistent://public/default/payments"
EVENTS = "persistent://public/default/events"
BUNDLES = (
    "0x00000000_0x40000000",
    "0x40000000_0x80000000",
    "0x80000000_0xc0000000",
    "0xc0000000_0xffffffff",
)


def sample_polls(
    end: dt.datetime, count: int = 20, interval: dt.timedelta = dt.timedelta(seconds=30)
) -> list[Snapshot]:
    """`count` polls of a small standalone cluster, `interval` apart, the last at `end`: a
    Key_Shared subscription whose consumers churn in the last polls (one leaves, another
    joins) and whose hashes then drain for a consumer that does not acknowledge them (PIP-379,
    blocked attempts growing: `stuck-hashes` finds them stuck), a Shared subscription that
    stalls, and a partitioned topic with a Failover subscription. Data for a plugin's page and
    tests, at today's date: `pulsar-lens dev-store DIR` writes it as a store."""
    from pulsar_lens.core.model import BrokerRecord, BundleRecord, TopicRecord

    polls = []
    for i in range(count):
        left = count - 1 - i  # polls to go until the newest
        topics = tuple(
            TopicRecord(t, "public", "public/default", owner_broker=BROKER, msg_rate_in=rate)
            for t, rate in ((ORDERS, 40.0), (PAYMENTS, 5.0), *_partitions())
        )
        polls.append(
            Snapshot(
                cluster="standalone",
                collected_at=end - left * interval,
                brokers=(BrokerRecord(BROKER, version="4.0.7", is_leader=True),),
                bundles=tuple(
                    BundleRecord("public/default", "public", b, *_bounds(b), owner_broker=BROKER)
                    for b in BUNDLES
                ),
                topics=topics,
                **_subscribers(i, left),
            )
        )
    return polls


def _partitions() -> list[tuple[str, float]]:
    return [(f"{EVENTS}-partition-{n}", 10.0) for n in range(3)]


def _bounds(bundle: str) -> tuple[int, int]:
    lower, upper = bundle.split("_")
    return int(lower, 16), int(upper, 16)


def _subscribers(i: int, left: int) -> dict[str, Any]:
    """The subscriptions, consumers and draining hashes of poll `i` (`left` before the end)."""
    from pulsar_lens.core.model import SubscriptionRecord as Sub

    names = ["orders-1", "orders-2", "orders-3"] if left > 4 else ["orders-1", "orders-2"]
    names += ["orders-4"] if left <= 2 else []  # churn: orders-3 left, orders-4 joined
    draining = left <= 3  # the hashes orders-3 had, held by orders-1's unacked messages
    subs = [
        Sub(
            ORDERS,
            "orders-ks",
            "Key_Shared",
            msg_backlog=120 if draining else 0,
            key_shared_mode="AUTO_SPLIT",
            consumer_count=len(names),
            msg_rate_out=40.0,
            msg_ack_rate=40.0,
            draining_hashes_count=3 if draining else 0,
        ),
        Sub(
            PAYMENTS,
            "payments-sub",
            "Shared",
            msg_backlog=50 + 25 * i,
            consumer_count=1,
            msg_rate_out=3.0,
            msg_ack_rate=0.0,
        ),
        *(
            Sub(
                t,
                "events-fo",
                "Failover",
                msg_backlog=0,
                consumer_count=2,
                active_consumer_name=f"events-{n % 2}",
            )
            for n, (t, _) in enumerate(_partitions())
        ),
    ]
    holder = (
        []
        if not draining
        else [
            DrainingHashRecord(
                ORDERS, "orders-ks", "orders-1", h, unack_msgs=40, blocked_attempts=5 * (4 - left)
            )
            for h in _stuck_hashes()
        ]
    )
    return {
        "subscriptions": tuple(subs),
        "consumers": (*_key_shared_consumers(names), *_other_consumers()),
        "draining_hashes": tuple(holder),
    }


def _stuck_hashes() -> list[int]:
    """Three hashes orders-1 still holds that orders-2 and orders-4 own after the churn."""
    final = _key_shared_consumers(["orders-1", "orders-2", "orders-4"])
    owned = [r[0] for c in final if c.consumer_name != "orders-1" for r in c.hash_ranges]
    return owned[:3]


def _key_shared_consumers(names: Sequence[str]) -> list[Any]:
    """The Key_Shared consumers with the ranges a 4.0 broker's consistent hashing gives them."""
    from pulsar_lens.core.assignments import Consumer
    from pulsar_lens.core.model import ConsumerRecord
    from pulsar_lens.core.selectors import ConsistentHashingSelector

    selector = ConsistentHashingSelector()
    consumers = [Consumer(name) for name in names]
    for consumer in consumers:
        selector.add(consumer)
    ranges = selector.assignments().by_consumer(consumers)
    return [
        ConsumerRecord(ORDERS, "orders-ks", c.name, hash_ranges=ranges.get(c, ()))
        for c in consumers
    ]


def _other_consumers() -> list[Any]:
    from pulsar_lens.core.model import ConsumerRecord

    shared = [ConsumerRecord(PAYMENTS, "payments-sub", "payments-1", unacked_messages=1000)]
    failover = [
        ConsumerRecord(topic, "events-fo", f"events-{c}")
        for topic, _ in _partitions()
        for c in range(2)
    ]
    return shared + failover


def load_drop_in(path: str | os.PathLike[str]) -> ModuleType:
    """Import a drop-in file as a module of its own name, for its tests: a drop-in folder is
    no package, so pytest cannot import it by name. The same file is what
    PULSAR_LENS_PLUGIN_DIRS loads; nothing is copied."""
    file = Path(path)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    return module
