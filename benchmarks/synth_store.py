"""A synthetic store of a cluster polled for days, in the real layout, for the Spark benchmark.

    .venv/bin/python -m benchmarks.synth_store ROOT [--topics 10000] [--days 1] [--interval 30s]
        [--brokers 3] [--tables brokers,bundles,topics,subscriptions,consumers,events]

What one poll holds, for `--topics N` (default 10,000; counts for N = 10,000):

* `topics` (10,000 rows): 4 tenants x 5 namespaces; 10 % of the topics are the 10 partitions
  of 100 partitioned topics. Each has a base rate (log-normal, 30 % of the non-partitioned
  topics idle at 0), a daily shape (x0.5 at night, x1.5 in the afternoon) and noise on every
  poll, a message size (throughput = rate x size), and the bundle its name's CRC-32 falls in.
* `bundles` (320): 16 per namespace, their owner among `--brokers` brokers (2-4), summed rates;
  about one owner change an hour somewhere in the cluster.
* `brokers` (3): bundles owned and their rates.
* `subscriptions` (10,000) and `consumers` (~20,000): one subscription per topic. Every
  partition has a Failover subscription of 3 consumers whose first active one is the
  partition's modulo pick; a non-partitioned topic has an Exclusive (1 consumer, 20 %),
  Shared (2, 35 %), Failover (2, 20 %) or Key_Shared (3, 25 %, AUTO_SPLIT or STICKY, each
  consumer owning a third of the hash range) one. A tenth of the Failover groups flap (the
  active consumer moves on 1 % of polls, with no consumer change), the rest rarely (0.02 %);
  a consumer that is not Key_Shared restarts on 0.01 % of polls and is gone for 1-3 polls,
  and its group's next consumer takes over.
* `events`: `bundle_owner_changed`, `active_consumer_changed`, `consumer_left` and
  `consumer_joined`, as the collector's diff of two polls writes them.
* the index (`snapshots`): one row per poll with its row counts.

Left empty: per-subscription and per-consumer rates, storage sizes, draining hashes, probes
and key samples. Rows are built an hour of polls at a time (vectorized: numpy and Arrow
`take`, no object per row), written through the store's day-partitioned writer, and each
finished day is compacted by `Store.compact`, as the collector does with closed days; so
`core.store.Store` and `plugins.spark.reader` read the result as any store. The same seed
gives the same polls, so the first D days of a longer store are the D-day store:
`link_days` makes that store out of hard links, without a copy. Prints rows, bytes, seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.synth_cluster import (
    CLUSTER,
    START,
    STATS_PERIOD,
    Polls,
    Shape,
    State,
    advance,
    common,
    index_table,
    initial_state,
    make_shape,
    table,
    take,
)
from pulsar_lens.core import dataset
from pulsar_lens.core.settings import parse_duration
from pulsar_lens.core.store import INDEX, STORE_TABLES, Store

Built = tuple[pa.Table, np.ndarray]  # a table and the poll of each row
STATE_FILE, PARAMS_FILE = "synth-state.npz", "synth.json"
TABLES = ("brokers", "bundles", "topics", "subscriptions", "consumers", "events")


def generate(
    root: Path,
    *,
    topics: int = 10_000,
    days: float = 1.0,
    interval: float = 30.0,
    brokers: int = 3,
    tables: Sequence[str] = TABLES,
    seed: int = 7,
) -> dict[str, Any]:
    """Write the store under `root`, or add the days missing from one written before with the
    same parameters; what `describe` says of it."""
    if not 2 <= brokers <= 4:
        raise ValueError(f"brokers: 2 to 4, not {brokers}")
    unknown = set(tables) - set(TABLES)
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}; expected some of {TABLES}")
    started = time.perf_counter()
    params: dict[str, Any] = {"topics": topics, "interval": interval, "brokers": brokers}
    params.update(seed=seed, tables=sorted(tables))
    shape, state = _resume(root, params)
    total = round(days * 86400 / interval)
    per_chunk = max(1, int(3600 // interval))
    files: DayFiles | None = None
    while state.poll < total:
        day = int(state.poll * interval // 86400)
        next_day = min(total, math.ceil((day + 1) * 86400 / interval))
        polls = advance(shape, state, min(per_chunk, next_day - state.poll), interval)
        if files is None or files.day != _day(polls):
            files = _next_day(files, state, root, _day(polls), interval)
        for name, rows in chunk_tables(shape, state, polls, params["tables"]).items():
            files.add(name, rows)
    _next_day(files, state, root, None, interval)
    facts = describe(root)
    facts["seconds"] = time.perf_counter() - started
    return facts


def _resume(root: Path, params: dict[str, Any]) -> tuple[Shape, State]:
    """The cluster's shape from its seed, and the state where an earlier run of the same
    parameters stopped (a whole day), or the first poll's."""
    rng = np.random.default_rng(params["seed"])
    shape = make_shape(params["topics"], brokers=params["brokers"], rng=rng)
    saved = root / STATE_FILE
    if not saved.exists():
        if root.exists() and any(root.iterdir()):
            raise ValueError(f"{root} holds files and no {STATE_FILE} to go on from")
        root.mkdir(parents=True, exist_ok=True)
        (root / PARAMS_FILE).write_text(json.dumps(params))
        return shape, initial_state(shape, rng)
    before = json.loads((root / PARAMS_FILE).read_text())
    if before != params:
        raise ValueError(f"{root} was generated with {before}, not {params}")
    state = State.load(saved)
    # what a run stopped in the middle of a day left: written again from the saved state
    unsaved = (START + dt.timedelta(seconds=state.poll * params["interval"])).date()
    for name in STORE_TABLES:
        for day in dataset.list_days(root / name):
            if day >= unsaved:
                shutil.rmtree(dataset.partition_dir(root / name, day))
    return shape, state


def _next_day(
    files: DayFiles | None, state: State, root: Path, day: dt.date | None, interval: float
) -> DayFiles:
    """Close the day being written and keep the state after it, when the day is whole, for a
    later run to go on from; open the next day's files."""
    if files is not None:
        files.close()
        saved = root / STATE_FILE
        if state.poll * interval % 86400 == 0:
            state.save(saved)
        else:  # a part of a day: nothing may be added after it
            saved.unlink(missing_ok=True)
    return DayFiles(root, day or dt.date.min)


def _day(polls: Polls) -> dt.date:
    return polls.times[0].as_py().date()  # type: ignore[no-any-return]


class DayFiles:
    """One file per table for one day, the shape `Store.compact` leaves a closed day in:
    written a chunk at a time through a hidden temporary file, renamed when the day ends."""

    def __init__(self, root: Path, day: dt.date) -> None:
        self.root, self.day = root, day
        self.open: dict[str, tuple[pq.ParquetWriter, Path, list[dt.datetime]]] = {}

    def add(self, name: str, rows: pa.Table) -> None:
        if name not in self.open:
            folder = dataset.partition_dir(self.root / name, self.day)
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f".synth-{uuid.uuid4().hex[:8]}.tmp"
            writer = pq.ParquetWriter(tmp, rows.schema, compression=dataset.COMPRESSION)
            self.open[name] = (writer, tmp, [])
        writer, _, times = self.open[name]
        writer.write_table(rows, row_group_size=dataset.ROW_GROUP_ROWS)
        stamps = pc.min_max(rows.column("collected_at")).as_py()
        times += [stamps["min"], stamps["max"]]

    def close(self) -> None:
        for writer, tmp, times in self.open.values():
            writer.close()
            tag = f"{dataset.COMPACT_TAG}{uuid.uuid4().hex[:12]}"
            os.replace(tmp, tmp.parent / dataset.file_name(min(times), max(times), tag))
        self.open.clear()


def chunk_tables(
    shape: Shape, state: State, polls: Polls, wanted: Sequence[str]
) -> dict[str, pa.Table]:
    """The wanted tables of these polls, plus the index; the state keeps their last poll."""
    count = len(polls.ids)
    rates = _rates(shape, state, polls)
    out: dict[str, Built] = {}
    if "topics" in wanted:
        out["topics"] = _topics(shape, polls, rates)
    bundle_rates = _per_bundle(shape, rates)
    if "bundles" in wanted:
        out["bundles"] = _bundles(shape, polls, bundle_rates)
    if "brokers" in wanted:
        out["brokers"] = _brokers(shape, polls, bundle_rates)
    if "subscriptions" in wanted:
        out["subscriptions"] = _subscriptions(shape, state, polls)
    if "consumers" in wanted:
        out["consumers"] = _consumers(shape, polls)
    events = _events(shape, state, polls)
    if "events" in wanted and len(events[1]):
        out["events"] = events
    state.last_active, state.last_present = polls.active[-1].copy(), polls.present[-1].copy()
    counts = {name: np.bincount(poll, minlength=count) for name, (_, poll) in out.items()}
    return {**{name: rows for name, (rows, _) in out.items()}, INDEX: index_table(polls, counts)}


def _rates(shape: Shape, state: State, polls: Polls) -> np.ndarray:
    """Msg/s per poll and topic: base x daily shape x noise, drawn once per stats window (two
    polls 30 s apart see the same window's figures, as from a broker)."""
    windows, inverse = np.unique(polls.seconds // STATS_PERIOD, return_inverse=True)
    noise = state.rng.lognormal(0.0, 0.2, size=(len(windows), len(shape.base_rate)))
    if windows[0] == state.window and state.noise is not None:
        noise[0] = state.noise
    state.window, state.noise = int(windows[-1]), noise[-1].copy()
    start = windows * STATS_PERIOD
    daily = 1.0 + 0.5 * np.sin(2 * np.pi * (start % 86400) / 86400 - np.pi / 2)
    return (shape.base_rate[None, :] * (daily[:, None] * noise))[inverse]


def _topics(shape: Shape, polls: Polls, rates: np.ndarray) -> Built:
    count, n = rates.shape
    poll, topic = np.repeat(np.arange(count), n), np.tile(np.arange(n), count)
    owner = polls.owners[poll, shape.bundle_of[topic]]
    rate = rates.ravel()
    size = shape.msg_size[topic]
    columns = {
        **common(polls, poll),
        "topic": take(shape.topic, topic),
        "tenant": take(shape.tenant, topic),
        "namespace": take(shape.namespace, topic),
        "persistent": np.ones(len(poll), dtype=bool),
        "partitioned_topic": take(shape.parent, topic),
        "partition_index": shape.partition[topic],
        "bundle": take(shape.bundle_name, shape.bundle_of[topic]),
        "owner_broker": take(shape.brokers, owner),
        "msg_rate_in": rate,
        "msg_rate_out": rate,  # one subscription per topic, keeping up
        "msg_throughput_in": rate * size,
        "msg_throughput_out": rate * size,
        "producer_count": np.where(shape.base_rate[topic] > 0, 1, 0),
        "subscription_count": np.ones(len(poll), dtype=np.int64),
    }
    return table("topics", columns, len(poll)), poll


def _per_bundle(shape: Shape, rates: np.ndarray) -> np.ndarray:
    count, bundles = rates.shape[0], len(shape.lower)
    flat = (np.arange(count)[:, None] * bundles + shape.bundle_of[None, :]).ravel()
    summed = np.bincount(flat, weights=rates.ravel(), minlength=count * bundles)
    return summed.reshape(count, bundles)


def _bundles(shape: Shape, polls: Polls, rates: np.ndarray) -> Built:
    count, bundles = rates.shape
    poll, bundle = np.repeat(np.arange(count), bundles), np.tile(np.arange(bundles), count)
    topic_count = np.bincount(shape.bundle_of, minlength=bundles)
    columns = {
        **common(polls, poll),
        "namespace": take(shape.bundle_ns, bundle),
        "tenant": take(shape.bundle_tenant, bundle),
        "bundle": take(shape.bundle_name, bundle),
        "lower": shape.lower[bundle],
        "upper": shape.upper[bundle],
        "owner_broker": take(shape.brokers, polls.owners.ravel()),
        "topic_count": topic_count[bundle],
        "msg_rate_in": rates.ravel(),
        "msg_rate_out": rates.ravel(),
    }
    return table("bundles", columns, len(poll)), poll


def _brokers(shape: Shape, polls: Polls, rates: np.ndarray) -> Built:
    count, k = len(polls.ids), len(shape.brokers)
    flat = (np.arange(count)[:, None] * k + polls.owners).ravel()
    poll, broker = np.repeat(np.arange(count), k), np.tile(np.arange(k), count)
    columns = {
        **common(polls, poll),
        "broker_id": take(shape.brokers, broker),
        "version": pa.repeat(pa.scalar("4.0.3"), len(poll)),
        "is_leader": broker == 0,
        "msg_rate_in": np.bincount(flat, weights=rates.ravel(), minlength=count * k),
        "msg_rate_out": np.bincount(flat, weights=rates.ravel(), minlength=count * k),
        "num_bundles": np.bincount(flat, minlength=count * k),
    }
    return table("brokers", columns, len(poll)), poll


def _subscriptions(shape: Shape, state: State, polls: Polls) -> Built:
    count, subs = polls.active.shape
    poll, sub = np.repeat(np.arange(count), subs), np.tile(np.arange(subs), count)
    active = polls.active.ravel()
    idle = shape.base_rate[shape.sub_topic[sub]] == 0
    columns = {
        **common(polls, poll),
        "topic": take(shape.topic, shape.sub_topic[sub]),
        "subscription": take(shape.sub_name, sub),
        "type": take(shape.sub_type, sub),
        "msg_backlog": np.where(idle, 0, state.rng.integers(0, 500, size=len(poll))),
        "key_shared_mode": take(shape.sub_mode, sub),
        "active_consumer_name": pc.if_else(
            pa.array(active >= 0),
            take(shape.consumer_name, np.maximum(active, 0)),
            pa.scalar(None, pa.string()),
        ),
        "consumer_count": np.add.reduceat(polls.present, shape.first[:-1], axis=1).ravel(),
        "is_durable": np.ones(len(poll), dtype=bool),
    }
    return table("subscriptions", columns, len(poll)), poll


def _consumers(shape: Shape, polls: Polls) -> Built:
    poll, consumer = np.nonzero(polls.present)
    sub = shape.consumer_sub[consumer]
    columns = {
        **common(polls, poll),
        "topic": take(shape.topic, shape.sub_topic[sub]),
        "subscription": take(shape.sub_name, sub),
        "consumer_name": take(shape.consumer_name, consumer),
        "hash_ranges": take(shape.hash_ranges, consumer),
    }
    return table("consumers", columns, len(poll)), poll


def _events(shape: Shape, state: State, polls: Polls) -> Built:
    """What the collector's diff of each poll against the one before records."""
    names, topics = shape.consumer_name.to_pylist(), shape.topic.to_pylist()
    subs = shape.sub_name.to_pylist()
    found: list[dict[str, Any]] = []
    for i, bundle, before, after in polls.moves:
        ns = shape.bundle_ns[bundle].as_py()
        found.append(
            {
                "poll": i,
                "kind": "bundle_owner_changed",
                "subject": f"{ns}/{shape.bundle_name[bundle].as_py()}",
                "namespace": ns,
                "before": shape.brokers[before].as_py(),
                "after": shape.brokers[after].as_py(),
            }
        )
    present = np.vstack([state.last_present, polls.present])
    owner_sub = shape.consumer_sub
    for i, c in zip(*np.nonzero(present[1:] != present[:-1]), strict=True):
        s = owner_sub[c]
        kind = "consumer_joined" if present[i + 1, c] else "consumer_left"
        found.append(_consumer_event(i, kind, topics[shape.sub_topic[s]], subs[s], names[c]))
    active = np.vstack([state.last_active, polls.active])
    for i, s in zip(*np.nonzero(active[1:] != active[:-1]), strict=True):
        topic, sub = topics[shape.sub_topic[s]], subs[s]
        before, after = active[i, s], active[i + 1, s]
        found.append(
            {
                "poll": i,
                "kind": "active_consumer_changed",
                "subject": f"{topic}/{sub}",
                "topic": topic,
                "subscription": sub,
                "before": names[before] if before >= 0 else None,
                "after": names[after] if after >= 0 else None,
            }
        )
    if state.poll == len(polls.ids):  # the store's first poll has none before it to differ from
        found = [e for e in found if e["poll"] > 0]
    found.sort(key=lambda e: (e["poll"], e["kind"], e["subject"]))
    poll = np.array([e["poll"] for e in found], dtype=np.int64)
    keys = ("kind", "subject", "namespace", "topic", "subscription", "consumer_name")
    columns = {
        **common(polls, poll),
        "at": polls.times.take(pa.array(poll, pa.int64())),
        **{k: pa.array([e.get(k) for e in found], pa.string()) for k in keys},
        "before": pa.array([e.get("before") for e in found], pa.string()),
        "after": pa.array([e.get("after") for e in found], pa.string()),
    }
    return table("events", columns, len(poll)), poll


def _consumer_event(poll: int, kind: str, topic: str, sub: str, name: str) -> dict[str, Any]:
    return {
        "poll": poll,
        "kind": kind,
        "subject": f"{topic}/{sub}/{name}",
        "topic": topic,
        "subscription": sub,
        "consumer_name": name,
    }


def describe(root: Path) -> dict[str, Any]:
    """Polls, rows per table (from the index's row counts), days and bytes on disk."""
    index = Store(root).snapshots()
    rows: Counter[str] = Counter()
    for counts in index["row_counts_json"]:
        rows.update(json.loads(counts))
    return {
        "polls": len(index),
        "days": len(set(index["collected_at"].dt.date)),
        "rows": dict(rows),
        "bytes": sum(p.stat().st_size for p in root.rglob("*.parquet")),
        "cluster": CLUSTER,
    }


def link_days(source: Path, target: Path, days: int) -> dict[str, Any]:
    """The store of the first `days` days of `source`, under `target`, as hard links."""
    first = dataset.list_days(source / INDEX)[:days]
    for name in STORE_TABLES:
        for day in first:
            folder = dataset.partition_dir(source / name, day)
            if not folder.is_dir():
                continue
            made = dataset.partition_dir(target / name, day)
            made.mkdir(parents=True, exist_ok=True)
            for path in folder.glob("*.parquet"):
                os.link(path, made / path.name)
    return describe(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth_store")
    parser.add_argument("root", type=Path)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--interval", default="30s")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    facts = generate(
        args.root,
        topics=args.topics,
        days=args.days,
        interval=parse_duration(args.interval).total_seconds(),
        brokers=args.brokers,
        tables=[t for t in args.tables.split(",") if t],
        seed=args.seed,
    )
    print(f"rows written: {sum(facts['rows'].values()):,}")
    for name, count in sorted(facts["rows"].items()):
        print(f"  {name}: {count:,}")
    print(f"polls: {facts['polls']:,} over {facts['days']} day(s)")
    print(f"bytes on disk: {facts['bytes']:,} ({facts['bytes'] / 2**30:.2f} GiB)")
    print(f"seconds: {facts['seconds']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
