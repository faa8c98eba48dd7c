"""A synthetic store of a cluster polled for days, in the real layout, for the Spark benchmark.

    .venv/bin/python -m benchmarks.synth_store ROOT [--topics 10000] [--days 1] [--interval 30s]

What one poll holds, for `--topics N` (default 10,000):

* `topics`: N topics over 4 tenants x 5 namespaces; 10 % of them are the 10 partitions of
  partitioned topics. Each has a base publish rate (log-normal), a daily shape (x0.5 at night,
  x1.5 at the peak) and noise, a message size, and the bundle its name hashes into (CRC-32 over
  16 bundles per namespace).
* `bundles`: 16 per namespace with their owner among 3 brokers and the summed rates; about one
  owner change an hour somewhere (and its `bundle_owner_changed` event).
* `brokers`: the 3 brokers.
* `subscriptions` and `consumers`: every partition has a Failover subscription with 3
  consumers; its active consumer is the modulo pick, and flaps to another now and then.

Rows are built vectorized and written an hour of polls at a time through the store's own
day-partitioned writer, so `core.store.Store` and `plugins.spark.reader` read the result as
any store. Prints rows, bytes on disk and seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from core import dataset
from core.model import SCHEMAS
from core.settings import parse_duration
from core.store import INDEX, INDEX_SCHEMA

TENANTS, NAMESPACES, BUNDLES, BROKERS = (
    4,
    5,
    16,
    ("broker-1:8080", "broker-2:8080", "broker-3:8080"),
)
PARTITIONS = 10
CONSUMERS_PER_GROUP = 3
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
CLUSTER = "synthetic"


@dataclass
class Cluster:
    """The fixed shape of the synthetic cluster and its state between polls."""

    topics: np.ndarray  # full names
    namespace: np.ndarray
    tenant: np.ndarray
    parent: np.ndarray  # partitioned parent or None
    partition: np.ndarray  # index or -1
    bundle_of: np.ndarray  # index into bundle arrays
    base_rate: np.ndarray
    msg_size: np.ndarray
    bundle_ns: np.ndarray
    bundle_name: np.ndarray
    bundle_lower: np.ndarray
    bundle_upper: np.ndarray
    owner: np.ndarray  # broker index per bundle (changes)
    active: np.ndarray  # active consumer index per partition (changes)
    rng: np.random.Generator


def make_cluster(topics: int, seed: int = 7) -> Cluster:
    rng = np.random.default_rng(seed)
    namespaces = [f"tenant-{t}/ns-{n}" for t in range(TENANTS) for n in range(NAMESPACES)]
    partitioned = topics // 10 // PARTITIONS
    names, ns_of, parents, parts = [], [], [], []
    for p in range(partitioned):
        ns = namespaces[p % len(namespaces)]
        parent = f"persistent://{ns}/events-{p}"
        for i in range(PARTITIONS):
            names.append(f"{parent}-partition-{i}")
            ns_of.append(ns)
            parents.append(parent)
            parts.append(i)
    for i in range(topics - len(names)):
        ns = namespaces[i % len(namespaces)]
        names.append(f"persistent://{ns}/topic-{i}")
        ns_of.append(ns)
        parents.append(None)
        parts.append(-1)
    step = 0x100000000 // BUNDLES
    bounds = [i * step for i in range(BUNDLES)] + [0xFFFFFFFF]
    bundle_ns = np.repeat(np.array(namespaces, dtype=object), BUNDLES)
    lower = np.tile(np.array(bounds[:-1], dtype=np.int64), len(namespaces))
    upper = np.tile(np.array(bounds[1:], dtype=np.int64), len(namespaces))
    bundle_name = np.array([f"0x{lo:08x}_0x{up:08x}" for lo, up in zip(lower, upper, strict=True)])
    ns_index = {ns: i for i, ns in enumerate(namespaces)}
    crc = np.array([zlib.crc32(n.encode()) for n in names], dtype=np.int64)
    within = np.searchsorted(np.array(bounds[1:-1], dtype=np.int64), crc, side="right")
    bundle_of = np.array([ns_index[ns] for ns in ns_of]) * BUNDLES + within
    return Cluster(
        topics=np.array(names, dtype=object),
        namespace=np.array(ns_of, dtype=object),
        tenant=np.array([ns.split("/")[0] for ns in ns_of], dtype=object),
        parent=np.array(parents, dtype=object),
        partition=np.array(parts, dtype=np.int64),
        bundle_of=bundle_of,
        base_rate=rng.lognormal(mean=2.0, sigma=1.2, size=len(names)),
        msg_size=rng.integers(200, 4000, size=len(names)).astype(float),
        bundle_ns=bundle_ns,
        bundle_name=bundle_name,
        bundle_lower=lower,
        bundle_upper=upper,
        owner=rng.integers(0, len(BROKERS), size=len(bundle_name)),
        active=np.array(parts, dtype=np.int64)[np.array(parts) >= 0] % CONSUMERS_PER_GROUP,
        rng=rng,
    )


def _common(ids: np.ndarray, times: np.ndarray, per_poll: int) -> dict[str, pa.Array]:
    return {
        "snapshot_id": pa.array(np.repeat(ids, per_poll), pa.string()),
        "collected_at": pa.array(np.repeat(times, per_poll), pa.timestamp("us", tz="UTC")),
        "cluster": pa.array(np.full(len(ids) * per_poll, CLUSTER, dtype=object), pa.string()),
    }


def _table(name: str, columns: dict[str, pa.Array]) -> pa.Table:
    schema = SCHEMAS[name]
    fields = [schema.field(c) for c in columns]
    return pa.table([columns[f.name].cast(f.type) for f in fields], schema=pa.schema(fields))


def chunk_tables(
    cluster: Cluster, first: int, polls: int, interval: float
) -> tuple[dict[str, pa.Table], pa.Table]:
    """The tables of polls `first .. first + polls - 1`, and their index rows."""
    rng = cluster.rng
    seconds = (first + np.arange(polls)) * interval
    times = np.array([START + dt.timedelta(seconds=float(s)) for s in seconds])
    ids = np.array([f"synth:{first + i:012d}" for i in range(polls)], dtype=object)
    n = len(cluster.topics)
    shape = 1.0 + 0.5 * np.sin(2 * np.pi * (seconds % 86400) / 86400 - np.pi / 2)
    noise = rng.lognormal(0.0, 0.2, size=(polls, n))
    rate_in = (cluster.base_rate[None, :] * shape[:, None] * noise).ravel()
    rate_out = rate_in * 1.8
    size = np.tile(cluster.msg_size, polls)
    bundle_idx = np.tile(cluster.bundle_of, polls)
    # about one owner change an hour somewhere; the bundles table shows it from then on
    owners = np.empty((polls, len(cluster.owner)), dtype=np.int64)
    moves = []
    for i in range(polls):
        if rng.random() < interval / 3600.0:
            b = int(rng.integers(len(cluster.owner)))
            new = (cluster.owner[b] + 1 + rng.integers(len(BROKERS) - 1)) % len(BROKERS)
            moves.append((i, b, int(cluster.owner[b]), int(new)))
            cluster.owner[b] = new
        owners[i] = cluster.owner
    topic_owner = np.take_along_axis(owners, np.tile(cluster.bundle_of, (polls, 1)), axis=1).ravel()
    brokers = np.array(BROKERS, dtype=object)
    tables: dict[str, pa.Table] = {}
    tables["topics"] = _table(
        "topics",
        {
            **_common(ids, times, n),
            "topic": pa.array(np.tile(cluster.topics, polls), pa.string()),
            "tenant": pa.array(np.tile(cluster.tenant, polls), pa.string()),
            "namespace": pa.array(np.tile(cluster.namespace, polls), pa.string()),
            "partitioned_topic": pa.array(np.tile(cluster.parent, polls), pa.string()),
            "partition_index": pa.array(np.tile(cluster.partition, polls)),
            "bundle": pa.array(cluster.bundle_name[bundle_idx], pa.string()),
            "owner_broker": pa.array(brokers[topic_owner], pa.string()),
            "msg_rate_in": pa.array(rate_in),
            "msg_rate_out": pa.array(rate_out),
            "msg_throughput_in": pa.array(rate_in * size),
            "msg_throughput_out": pa.array(rate_out * size),
        },
    )
    nb = len(cluster.bundle_name)
    flat = np.arange(polls)[:, None] * nb + np.tile(cluster.bundle_of, (polls, 1))
    per_bundle_in = np.bincount(flat.ravel(), weights=rate_in, minlength=polls * nb)
    counts = np.bincount(cluster.bundle_of, minlength=nb)
    tables["bundles"] = _table(
        "bundles",
        {
            **_common(ids, times, nb),
            "namespace": pa.array(np.tile(cluster.bundle_ns, polls), pa.string()),
            "tenant": pa.array(
                np.tile([ns.split("/")[0] for ns in cluster.bundle_ns], polls), pa.string()
            ),
            "bundle": pa.array(np.tile(cluster.bundle_name, polls), pa.string()),
            "lower": pa.array(np.tile(cluster.bundle_lower, polls)),
            "upper": pa.array(np.tile(cluster.bundle_upper, polls)),
            "owner_broker": pa.array(brokers[owners.ravel()], pa.string()),
            "topic_count": pa.array(np.tile(counts, polls)),
            "msg_rate_in": pa.array(per_bundle_in),
            "msg_rate_out": pa.array(per_bundle_in * 1.8),
        },
    )
    tables["brokers"] = _table(
        "brokers",
        {**_common(ids, times, len(BROKERS)), "broker_id": pa.array(np.tile(brokers, polls))},
    )
    tables.update(_failover_tables(cluster, ids, times, polls))
    if moves:
        at = [times[i] for i, _, _, _ in moves]
        tables["events"] = _table(
            "events",
            {
                "snapshot_id": pa.array([ids[i] for i, _, _, _ in moves], pa.string()),
                "collected_at": pa.array(at, pa.timestamp("us", tz="UTC")),
                "cluster": pa.array([CLUSTER] * len(moves), pa.string()),
                "at": pa.array(at, pa.timestamp("us", tz="UTC")),
                "kind": pa.array(["bundle_owner_changed"] * len(moves), pa.string()),
                "subject": pa.array(
                    [f"{cluster.bundle_ns[b]}/{cluster.bundle_name[b]}" for _, b, _, _ in moves]
                ),
                "namespace": pa.array([cluster.bundle_ns[b] for _, b, _, _ in moves], pa.string()),
                "before": pa.array([BROKERS[o] for _, _, o, _ in moves]),
                "after": pa.array([BROKERS[w] for _, _, _, w in moves]),
            },
        )
    index = pa.table(
        {
            "snapshot_id": pa.array(ids, pa.string()),
            "collected_at": pa.array(times, pa.timestamp("us", tz="UTC")),
            "cluster": [CLUSTER] * polls,
            "partial": [False] * polls,
            "errors_json": ["[]"] * polls,
            "requests": [0] * polls,
            "durations_json": ["{}"] * polls,
            "row_counts_json": [json.dumps({k: t.num_rows // polls for k, t in tables.items()})]
            * polls,
        },
        schema=INDEX_SCHEMA,
    )
    return tables, index


def _failover_tables(
    cluster: Cluster, ids: np.ndarray, times: np.ndarray, polls: int
) -> dict[str, pa.Table]:
    parts = np.flatnonzero(cluster.partition >= 0)
    if not len(parts):
        return {}
    rng = cluster.rng
    groups = len(parts)
    actives = np.empty((polls, groups), dtype=np.int64)
    for i in range(polls):
        flap = rng.random(groups) < 0.002
        cluster.active[flap] = (cluster.active[flap] + 1) % CONSUMERS_PER_GROUP
        actives[i] = cluster.active
    names = np.array([f"worker-{c}" for c in range(CONSUMERS_PER_GROUP)], dtype=object)
    topic = np.tile(cluster.topics[parts], polls)
    subs = {
        **_common(ids, times, groups),
        "topic": pa.array(topic, pa.string()),
        "subscription": pa.array(np.full(len(topic), "billing", dtype=object), pa.string()),
        "type": pa.array(np.full(len(topic), "Failover", dtype=object), pa.string()),
        "active_consumer_name": pa.array(names[actives.ravel()], pa.string()),
        "consumer_count": pa.array(np.full(len(topic), CONSUMERS_PER_GROUP)),
        "msg_backlog": pa.array(rng.integers(0, 500, size=len(topic))),
    }
    per = groups * CONSUMERS_PER_GROUP
    consumers = {
        **_common(ids, times, per),
        "topic": pa.array(np.repeat(topic, CONSUMERS_PER_GROUP), pa.string()),
        "subscription": pa.array(np.full(polls * per, "billing", dtype=object), pa.string()),
        "consumer_name": pa.array(np.tile(names, polls * groups), pa.string()),
    }
    return {
        "subscriptions": _table("subscriptions", subs),
        "consumers": _table("consumers", consumers),
    }


def chunks(total: int, size: int) -> Iterator[tuple[int, int]]:
    for first in range(0, total, size):
        yield first, min(size, total - first)


def generate(root: Path, *, topics: int, days: float, interval: float) -> dict[str, float]:
    """Write the store; rows per table, bytes and seconds."""
    started = time.perf_counter()
    cluster = make_cluster(topics)
    polls = int(days * 86400 / interval)
    rows: dict[str, float] = {}
    per_chunk = max(1, int(3600 / interval))
    for first, count in chunks(polls, per_chunk):
        tables, index = chunk_tables(cluster, first, count, interval)
        tag = f"{first:012d}"
        for name, table in tables.items():
            dataset.write_rows(root / name, table, tag)
            rows[name] = rows.get(name, 0) + table.num_rows
        dataset.write_rows(root / INDEX, index, tag)
    rows["polls"] = polls
    rows["bytes"] = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    rows["seconds"] = time.perf_counter() - started
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth_store")
    parser.add_argument("root", type=Path)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--interval", default="30s")
    args = parser.parse_args(argv)
    interval = parse_duration(args.interval).total_seconds()
    facts = generate(args.root, topics=args.topics, days=args.days, interval=interval)
    print(json.dumps(facts, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
