"""The synthetic cluster behind `benchmarks/synth_store.py`: its fixed shape and, poll after
poll, what changes (bundle owners, absent consumers, active consumers), as Arrow tables.

Everything per row is built with numpy and Arrow `take`, never one Python object per row:
string columns are taken from small arrays of the distinct values.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core.digest import canonical_json
from pulsar_lens.core.model import HASH_RANGE_TYPE, POLLED_TABLES, SCHEMAS
from pulsar_lens.core.store import INDEX_SCHEMA

START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
CLUSTER = "synthetic"
TENANTS, NAMESPACES, BUNDLES, PARTITIONS = 4, 5, 16, 10
PARTITIONED_SHARE, IDLE_SHARE = 0.1, 0.5
STATS_PERIOD = 60  # seconds: a broker refreshes its topic stats once a minute
# subscription of a non-partitioned topic: (type, share, consumers); partitions are Failover
KINDS = (("Exclusive", 0.2, 1), ("Shared", 0.35, 2), ("Failover", 0.2, 2), ("Key_Shared", 0.25, 3))
FLAPPY_SHARE, FLAPPY, STEADY = 0.1, 0.01, 0.0002  # Failover groups' unexplained flaps per poll
RESTART = 0.0001  # a consumer (not Key_Shared) restarts, gone for 1-3 polls, per poll
MOVES_PER_HOUR = 1.0  # bundle owner changes over the cluster
RANGE_MAX = 65535


@dataclass(frozen=True)
class Shape:
    """What stays the same from poll to poll."""

    topic: pa.Array
    tenant: pa.Array
    namespace: pa.Array
    parent: pa.Array
    partition: np.ndarray
    bundle_of: np.ndarray  # bundle index of each topic
    base_rate: np.ndarray  # msg/s at the daily mean, 0 for an idle topic
    msg_size: np.ndarray
    bundle_ns: pa.Array
    bundle_tenant: pa.Array
    bundle_name: pa.Array
    lower: np.ndarray
    upper: np.ndarray
    brokers: pa.Array
    sub_topic: np.ndarray  # topic index of each subscription
    sub_name: pa.Array
    sub_type: pa.Array
    sub_mode: pa.Array  # Key_Shared mode, else null
    first: np.ndarray  # subscription i owns consumers first[i] .. first[i + 1] - 1
    has_active: np.ndarray  # Exclusive and Failover subscriptions
    flap: np.ndarray  # per subscription
    consumer_name: pa.Array
    hash_ranges: pa.Array  # per consumer (empty unless Key_Shared)
    restart: np.ndarray  # per consumer

    @property
    def consumer_sub(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.first) - 1), np.diff(self.first))


@dataclass
class State:
    """What the polls so far left behind."""

    rng: np.random.Generator
    poll: int
    owner: np.ndarray  # broker index per bundle
    active: np.ndarray  # consumer slot per subscription, -1 when none
    away: np.ndarray  # polls a consumer stays disconnected
    last_active: np.ndarray  # the previous poll's active consumer (global index, -1 none)
    last_present: np.ndarray
    window: int = -1  # the broker stats window of the previous poll
    noise: np.ndarray | None = None  # its rate noise per topic

    def save(self, path: Path) -> None:
        """Write the state beside the store, so that a later run goes on from it."""
        arrays = {k: v for k, v in vars(self).items() if isinstance(v, np.ndarray)}
        rng = json.dumps(self.rng.bit_generator.state)
        with path.open("wb") as out:
            np.savez(out, rng=np.array(rng), poll=self.poll, window=self.window, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: Path) -> State:
        with np.load(path) as saved:
            rng = np.random.default_rng()
            rng.bit_generator.state = json.loads(str(saved["rng"]))
            fields = {k: saved[k] for k in saved.files if k not in ("rng", "poll", "window")}
            return cls(rng=rng, poll=int(saved["poll"]), window=int(saved["window"]), **fields)


def make_shape(topics: int, *, brokers: int, rng: np.random.Generator) -> Shape:
    namespaces = [f"tenant-{t}/ns-{n}" for t in range(TENANTS) for n in range(NAMESPACES)]
    names: list[str] = []
    ns_of: list[str] = []
    parents: list[str | None] = []
    parts: list[int] = []
    for p in range(int(topics * PARTITIONED_SHARE) // PARTITIONS):
        ns = namespaces[p % len(namespaces)]
        parent = f"persistent://{ns}/events-{p}"
        names += [f"{parent}-partition-{i}" for i in range(PARTITIONS)]
        ns_of += [ns] * PARTITIONS
        parents += [parent] * PARTITIONS
        parts += list(range(PARTITIONS))
    for i in range(topics - len(names)):
        ns = namespaces[i % len(namespaces)]
        names.append(f"persistent://{ns}/topic-{i}")
        ns_of.append(ns)
        parents.append(None)
        parts.append(-1)
    step = 0x100000000 // BUNDLES
    bounds = np.array([i * step for i in range(BUNDLES)] + [0xFFFFFFFF], dtype=np.int64)
    ns_index = {ns: i for i, ns in enumerate(namespaces)}
    crc = np.array([zlib.crc32(n.encode()) for n in names], dtype=np.int64)
    within = np.searchsorted(bounds[1:-1], crc, side="right")
    lower, upper = np.tile(bounds[:-1], len(namespaces)), np.tile(bounds[1:], len(namespaces))
    bundle_ns = [ns for ns in namespaces for _ in range(BUNDLES)]
    partition = np.array(parts, dtype=np.int64)
    base_rate = rng.lognormal(mean=2.0, sigma=1.2, size=len(names))
    base_rate[(partition < 0) & (rng.random(len(names)) < IDLE_SHARE)] = 0.0
    return Shape(
        topic=pa.array(names, pa.string()),
        tenant=pa.array([ns.split("/")[0] for ns in ns_of], pa.string()),
        namespace=pa.array(ns_of, pa.string()),
        parent=pa.array(parents, pa.string()),
        partition=partition,
        bundle_of=np.array([ns_index[ns] for ns in ns_of]) * BUNDLES + within,
        base_rate=base_rate,
        msg_size=rng.integers(200, 4000, size=len(names)).astype(float),
        bundle_ns=pa.array(bundle_ns, pa.string()),
        bundle_tenant=pa.array([ns.split("/")[0] for ns in bundle_ns], pa.string()),
        bundle_name=pa.array([f"0x{a:08x}_0x{b:08x}" for a, b in zip(lower, upper, strict=True)]),
        lower=lower,
        upper=upper,
        brokers=pa.array([f"broker-{b + 1}:8080" for b in range(brokers)], pa.string()),
        **_subscriptions(partition, rng),
    )


def _subscriptions(partition: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    """One subscription per topic: Failover on every partition, else a type by share."""
    kinds = np.full(len(partition), 2)  # index into KINDS
    plain = np.flatnonzero(partition < 0)
    kinds[plain] = rng.choice(len(KINDS), size=len(plain), p=[k[1] for k in KINDS])
    sizes = np.array([k[2] for k in KINDS])[kinds]
    sizes[partition >= 0] = 3
    first = np.concatenate([[0], np.cumsum(sizes)])
    slot = np.arange(first[-1]) - np.repeat(first[:-1], sizes)
    consumer_kind = np.repeat(kinds, sizes)
    key_shared = kinds == 3
    split = rng.random(len(kinds)) < 0.5
    mode = np.where(split, "AUTO_SPLIT", "STICKY").astype(object)
    mode[~key_shared] = None
    flap = np.where(rng.random(len(kinds)) < FLAPPY_SHARE, FLAPPY, STEADY) * (kinds == 2)
    names = np.array(["audit", "workers", "billing", "orders"], dtype=object)[kinds]
    return {
        "sub_topic": np.arange(len(kinds)),
        "sub_name": pa.array(names, pa.string()),
        "sub_type": pa.array([KINDS[k][0] for k in kinds], pa.string()),
        "sub_mode": pa.array(mode, pa.string()),
        "first": first,
        "has_active": (kinds == 0) | (kinds == 2),
        "flap": flap,
        "consumer_name": pa.array([f"worker-{s}" for s in slot], pa.string()),
        "hash_ranges": _ranges(slot, np.repeat(sizes, sizes), consumer_kind == 3),
        "restart": np.where(consumer_kind == 3, 0.0, RESTART),
    }


def _ranges(slot: np.ndarray, size: np.ndarray, key_shared: np.ndarray) -> pa.Array:
    """A Key_Shared consumer's one range: its equal share of 0..65535."""
    start = slot * (RANGE_MAX + 1) // size
    end = (slot + 1) * (RANGE_MAX + 1) // size - 1
    counts = key_shared.astype(np.int32)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    struct = pa.StructArray.from_arrays(
        [pa.array(start[key_shared], pa.int32()), pa.array(end[key_shared], pa.int32())],
        names=["start", "end"],
    )
    return pa.ListArray.from_arrays(offsets, struct).cast(HASH_RANGE_TYPE)


def initial_state(shape: Shape, rng: np.random.Generator) -> State:
    subs = len(shape.first) - 1
    active = np.where(shape.has_active, 0, -1)
    partitioned = shape.partition[shape.sub_topic] >= 0
    active[partitioned] = (
        shape.partition[shape.sub_topic][partitioned] % np.diff(shape.first)[partitioned]
    )
    consumers = int(shape.first[-1])
    return State(
        rng=rng,
        poll=0,
        owner=rng.integers(0, len(shape.brokers), size=len(shape.lower)),
        active=active,
        away=np.zeros(consumers, dtype=np.int64),
        last_active=np.where(active >= 0, shape.first[:-1] + active, -1)[:subs],
        last_present=np.ones(consumers, dtype=bool),
    )


@dataclass
class Polls:
    """The changing part of `count` consecutive polls."""

    ids: pa.Array
    times: pa.Array
    seconds: np.ndarray
    owners: np.ndarray  # (polls, bundles)
    present: np.ndarray  # (polls, consumers)
    active: np.ndarray  # (polls, subscriptions): global consumer index or -1
    moves: list[tuple[int, int, int, int]]  # poll, bundle, before, after


def advance(shape: Shape, state: State, count: int, interval: float) -> Polls:
    """Step `count` polls: owner moves, restarts, unexplained flaps, then the active consumer
    of a group whose active one left is the group's next connected consumer."""
    rng, subs = state.rng, len(shape.first) - 1
    sizes = np.diff(shape.first)
    owners = np.empty((count, len(state.owner)), dtype=np.int64)
    present = np.empty((count, len(state.away)), dtype=bool)
    active = np.empty((count, subs), dtype=np.int64)
    moves = []
    for i in range(count):
        if rng.random() < MOVES_PER_HOUR * interval / 3600.0:
            b = int(rng.integers(len(state.owner)))
            new = (state.owner[b] + 1 + rng.integers(len(shape.brokers) - 1)) % len(shape.brokers)
            moves.append((i, b, int(state.owner[b]), int(new)))
            state.owner[b] = new
        owners[i] = state.owner
        state.away = np.maximum(state.away - 1, 0)
        leaving = rng.random(len(state.away)) < shape.restart
        state.away[leaving] = rng.integers(1, 4, size=int(leaving.sum()))
        here = present[i] = state.away == 0
        flapping = rng.random(subs) < shape.flap
        state.active[flapping] = (state.active[flapping] + 1) % sizes[flapping]
        shown = np.where(shape.has_active, shape.first[:-1] + state.active, -1)
        for s in np.flatnonzero(shape.has_active & ~here[np.maximum(shown, 0)]):
            slots = [(state.active[s] + k) % sizes[s] for k in range(1, sizes[s] + 1)]
            found = [k for k in slots if here[shape.first[s] + k]]
            if found:
                state.active[s] = found[0]
            shown[s] = shape.first[s] + found[0] if found else -1
        active[i] = shown
    seconds = (state.poll + np.arange(count)) * interval
    ids = [
        "sha256:" + hashlib.sha256(f"{CLUSTER}/{state.poll + i}".encode()).hexdigest()
        for i in range(count)
    ]
    state.poll += count
    return Polls(
        ids=pa.array(ids, pa.string()),
        times=pa.array([START + dt.timedelta(seconds=float(s)) for s in seconds], _ts()),
        seconds=seconds,
        owners=owners,
        present=present,
        active=active,
        moves=moves,
    )


def _ts() -> pa.DataType:
    return pa.timestamp("us", tz="UTC")


def table(name: str, columns: dict[str, Any], rows: int) -> pa.Table:
    """`columns` as table `name`, every column the schema has and `columns` lacks null."""
    schema = SCHEMAS[name]
    arrays = [_array(columns.get(f.name), rows).cast(f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _array(value: Any, rows: int) -> pa.Array:
    if value is None:
        return pa.nulls(rows)
    return value if isinstance(value, pa.Array) else pa.array(value)


def common(polls: Polls, poll_of_row: np.ndarray) -> dict[str, Any]:
    return {
        "snapshot_id": polls.ids.take(poll_of_row),
        "collected_at": polls.times.take(poll_of_row),
        "cluster": pa.repeat(pa.scalar(CLUSTER), len(poll_of_row)),
    }


def index_table(polls: Polls, counts: dict[str, np.ndarray]) -> pa.Table:
    """The store's index rows: one per poll, with its row counts as the store writes them."""
    n = len(polls.ids)
    row_counts = [
        canonical_json(
            {
                **{t: 0 for t in POLLED_TABLES},
                **{t: int(c[i]) for t, c in counts.items() if t != "events" or c[i]},
            }
        )
        for i in range(n)
    ]
    return pa.table(
        {
            "snapshot_id": polls.ids,
            "collected_at": polls.times,
            "cluster": [CLUSTER] * n,
            "partial": [False] * n,
            "errors_json": ["[]"] * n,
            "requests": [0] * n,
            "durations_json": ["{}"] * n,
            "row_counts_json": row_counts,
        },
        schema=INDEX_SCHEMA,
    )


def take(values: pa.Array, indices: np.ndarray) -> pa.Array:
    return pc.take(values, pa.array(indices, pa.int64()))
