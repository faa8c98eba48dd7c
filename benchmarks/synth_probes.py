"""A synthetic store of probe rows and bundle polls, in the real layout, for `benchmarks/probes.py`.

What a `pulsar-lens collect --probe public/default` beside a two-broker cluster would have
written after `hours` hours:

* `probes`: 4 probes (one per bundle of `public/default`, on the topic `collectors.probe` picks
  for it), 10 messages/s each, publish latency log-normal around 3 ms, end-to-end 1-2 ms more.
  Every 10 minutes one bundle (in turn) is unloaded: for 100-700 ms (uniform) its probe's
  publishes wait and are acknowledged together when the producer is through again; half of
  the unloads redeliver the last message before the cut (a duplicate). Rows carry the
  `collected_at` and batch `snapshot_id` of the 2-second flush that wrote them (after the
  probe's 2-second linger), in batch order (by `collected_at`, then topic and seq, as
  `store_sink` writes them).
* `bundles` and the index: a poll every 30 s of the 4 bundles and their owner (the unloaded
  bundle moves to the other broker).

Every table gets one file per day with row groups of 65,536 rows, the shape `Store.compact`
leaves a closed day in (written with `synth_store.DayFiles`). A real store's newest day holds
a file per probe flush (every 2 s) and per poll until it is compacted; that is not modelled.

Every row is built with numpy and Arrow, never one Python object per row. The same seed gives
the same rows. Prints rows, bytes and seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import itertools
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.synth_cluster import CLUSTER, START, table
from benchmarks.synth_store import DayFiles
from pulsar_lens.collectors.probe import ProbeTarget
from pulsar_lens.core.digest import canonical_json
from pulsar_lens.core.model import POLLED_TABLES, SCHEMAS
from pulsar_lens.core.store import INDEX, INDEX_SCHEMA

NAMESPACE, TENANT = "public/default", "public"
BOUNDS = (0x00000000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF)
BROKERS = ("127.0.0.1:8080", "127.0.0.1:8081")
RUN_ID = "5eed0bench01"  # one probe run for the whole store, as a collector left running
RATE = 10  # messages per second per probe
POLL_SECONDS = 30
UNLOAD_EVERY = 600  # seconds between two unloads (of different bundles, in turn)
OUTAGE_MS = (100.0, 700.0)
PUBLISH_MS, PUBLISH_SIGMA = 3.0, 0.35  # log-normal median and shape
DELIVER_MS, DELIVER_SIGMA = 1.5, 0.4  # acked -> received, log-normal
FLUSH, LINGER = 2.0, 2.0  # seconds, as ProbeSettings' defaults
MARKER = "synth-probes.json"
LAYOUT = 2  # stores cached by an earlier layout are made again
DAY = 86_400


@dataclass(frozen=True)
class Unloads:
    """The unloads of the store: when (seconds from START), which bundle, how long (ms)."""

    at: np.ndarray
    bundle: np.ndarray
    outage_ms: np.ndarray

    @classmethod
    def draw(cls, seconds: float, rng: np.random.Generator) -> Unloads:
        count = int(seconds // UNLOAD_EVERY)
        at = np.arange(count) * UNLOAD_EVERY + rng.uniform(30, UNLOAD_EVERY - 30, size=count)
        outage = rng.uniform(*OUTAGE_MS, size=count)
        return cls(at, np.arange(count) % (len(BOUNDS) - 1), outage)


def targets() -> list[ProbeTarget]:
    """The probes: one per bundle of public/default, named as `collectors.probe` names them."""
    return [
        ProbeTarget.of(NAMESPACE, f"0x{lo:08x}_0x{hi:08x}") for lo, hi in itertools.pairwise(BOUNDS)
    ]


def generate(root: Path, *, hours: float, seed: int = 11) -> dict[str, Any]:
    """Write the store under `root` (which must not exist) and say what it holds."""
    started = time.perf_counter()
    seconds = hours * 3600
    rng = np.random.default_rng(seed)
    unloads = Unloads.draw(seconds, rng)
    probes = targets()
    rows, carry = 0, SCHEMAS["probes"].empty_table()
    for day_start in range(0, int(np.ceil(seconds)), DAY):
        day_end = min(seconds, day_start + DAY)
        day = (START + dt.timedelta(seconds=day_start)).date()
        batch = pa.concat_tables([carry, probe_rows(probes, unloads, day_start, day_end, rng)])
        # the rows of a flush past midnight belong to the next day's partition
        today = pc.less_equal(pc.cast(batch["collected_at"], pa.date32()), pa.scalar(day))
        files = DayFiles(root, day)
        files.add("probes", batch.filter(today))
        carry = batch.filter(pc.invert(today))
        bundles, index = poll_rows(unloads, day_start, day_end)
        files.add("bundles", bundles)
        files.add(INDEX, index)
        files.close()
        rows += batch.num_rows - carry.num_rows
    if carry.num_rows:
        files = DayFiles(root, carry["collected_at"][0].as_py().date())
        files.add("probes", carry)
        files.close()
        rows += carry.num_rows
    facts = {
        "layout": LAYOUT,
        "hours": hours,
        "seed": seed,
        "probe_rows": rows,
        "polls": int(np.ceil(seconds / POLL_SECONDS)),
        "unloads": len(unloads.at),
        "bytes": sum(p.stat().st_size for p in root.rglob("*.parquet")),
        "seconds": time.perf_counter() - started,
    }
    (root / MARKER).write_text(json.dumps(facts))
    return facts


def probe_rows(
    probes: list[ProbeTarget],
    unloads: Unloads,
    start: float,
    end: float,
    rng: np.random.Generator,
) -> pa.Table:
    """The rows of every probe message sent in [start, end) seconds, probe after probe."""
    ticks = np.arange(round(start * RATE), round(end * RATE))
    parts = [_probe(i, target, ticks, unloads, rng) for i, target in enumerate(probes)]
    # in the order the store holds them: batch after batch (each sorted by topic and seq, as
    # store_sink writes it), which a compacted day keeps, so row groups follow collected_at
    order = [("collected_at", "ascending"), ("topic", "ascending"), ("seq", "ascending")]
    return pa.concat_tables(parts).sort_by(order)


def _probe(
    index: int,
    target: ProbeTarget,
    ticks: np.ndarray,
    unloads: Unloads,
    rng: np.random.Generator,
) -> pa.Table:
    n = len(ticks)
    # the send loop sends to every probe per tick, a few tens of microseconds apart
    sent = ticks / RATE + index * 50e-6 + rng.uniform(0, 0.002, size=n)
    acked = sent + rng.lognormal(np.log(PUBLISH_MS), PUBLISH_SIGMA, size=n) / 1000
    received = np.ones(n, dtype=np.int64)
    mine = unloads.bundle == index
    for cut, outage in zip(unloads.at[mine], unloads.outage_ms[mine], strict=True):
        back = cut + outage / 1000
        lo, hi = np.searchsorted(sent, [cut, back])
        # queued while the bundle moved, acknowledged together once the producer is back
        acked[lo:hi] = back + np.arange(hi - lo) * 100e-6 + 0.5e-3
        if lo > 0 and rng.random() < 0.5:
            received[lo - 1] = 2  # redelivered after the reconnect: a duplicate
    first_received = acked + rng.lognormal(np.log(DELIVER_MS), DELIVER_SIGMA, size=n) / 1000
    flush = np.ceil((first_received + LINGER) / FLUSH) * FLUSH + 0.004
    batches, batch_of = np.unique(flush, return_inverse=True)
    columns = {
        "snapshot_id": pa.array(_batch_ids(batches)).take(pa.array(batch_of)),
        "collected_at": _times(flush),
        "cluster": pa.repeat(pa.scalar(CLUSTER), n),
        "probe": pa.repeat(pa.scalar(RUN_ID), n),
        "topic": pa.repeat(pa.scalar(target.topic), n),
        "namespace": pa.repeat(pa.scalar(target.namespace), n),
        "bundle": pa.repeat(pa.scalar(target.bundle), n),
        "seq": ticks,
        "sent_at": _times(sent),
        "acked_at": _times(acked),
        "received_at": _times(first_received),
        "publish_ms": (acked - sent) * 1000,
        "e2e_ms": (first_received - sent) * 1000,
        "received": received,
    }
    return table("probes", columns, n)


def _times(seconds: np.ndarray) -> pa.Array:
    """Seconds from START as UTC microsecond timestamps."""
    epoch_us = int(START.timestamp() * 1_000_000)
    return pa.array(epoch_us + np.round(seconds * 1e6).astype(np.int64), pa.timestamp("us", "UTC"))


def _batch_ids(flushes: np.ndarray) -> list[str]:
    """`store_sink`'s batch names, probe-<write time>-<6 hex>, one per flush (a flush writes
    the rows of every probe)."""
    names = []
    for at in flushes:
        when = START + dt.timedelta(seconds=float(at))
        tag = hashlib.sha256(f"{at}".encode()).hexdigest()[:6]
        names.append(f"probe-{when:%Y%m%dT%H%M%S%f}-{tag}")
    return names


def poll_rows(unloads: Unloads, start: float, end: float) -> tuple[pa.Table, pa.Table]:
    """The `bundles` rows and index rows of the polls in [start, end): an unloaded bundle has
    moved to the other broker by the next poll."""
    polls = np.arange(int(np.ceil(start / POLL_SECONDS)), int(np.ceil(end / POLL_SECONDS)))
    at = polls * POLL_SECONDS
    bundles = len(BOUNDS) - 1
    moves = np.stack([np.searchsorted(unloads.at[unloads.bundle == b], at) for b in range(bundles)])
    owners = (moves.T + np.arange(bundles)) % len(BROKERS)  # (polls, bundles)
    ids = pa.array(
        ["sha256:" + hashlib.sha256(f"probes-bench/{p}".encode()).hexdigest() for p in polls]
    )
    times = _times(at.astype(np.float64))
    poll = np.repeat(np.arange(len(polls)), bundles)
    bundle = np.tile(np.arange(bundles), len(polls))
    names = pa.array([t.bundle for t in targets()])
    columns = {
        "snapshot_id": ids.take(pa.array(poll)),
        "collected_at": times.take(pa.array(poll)),
        "cluster": pa.repeat(pa.scalar(CLUSTER), len(poll)),
        "namespace": pa.repeat(pa.scalar(NAMESPACE), len(poll)),
        "tenant": pa.repeat(pa.scalar(TENANT), len(poll)),
        "bundle": names.take(pa.array(bundle)),
        "lower": np.asarray(BOUNDS[:-1])[bundle],
        "upper": np.asarray(BOUNDS[1:])[bundle],
        "owner_broker": pa.array(BROKERS).take(pa.array(owners.ravel())),
        "topic_count": np.ones(len(poll), dtype=np.int64),
        "msg_rate_in": np.full(len(poll), float(RATE)),
        "msg_rate_out": np.full(len(poll), float(RATE)),
    }
    counts = canonical_json({**{t: 0 for t in POLLED_TABLES}, "bundles": bundles})
    index = pa.table(
        {
            "snapshot_id": ids,
            "collected_at": times,
            "cluster": [CLUSTER] * len(polls),
            "partial": [False] * len(polls),
            "errors_json": ["[]"] * len(polls),
            "requests": [0] * len(polls),
            "durations_json": ["{}"] * len(polls),
            "row_counts_json": [counts] * len(polls),
        },
        schema=INDEX_SCHEMA,
    )
    return table("bundles", columns, len(poll)), index


def cached(root: Path, *, hours: float, seed: int = 11) -> dict[str, Any]:
    """The store under `root` if a finished one of these parameters is there, else a new one
    (anything else under `root` is removed first)."""
    marker = root / MARKER
    if marker.exists():
        facts: dict[str, Any] = json.loads(marker.read_text())
        if (facts.get("hours"), facts.get("seed"), facts.get("layout")) == (hours, seed, LAYOUT):
            return {**facts, "seconds": 0.0, "cached": True}
    if root.exists():
        shutil.rmtree(root)
    return {**generate(root, hours=hours, seed=seed), "cached": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth_probes")
    parser.add_argument("root", type=Path)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    facts = cached(args.root, hours=args.hours, seed=args.seed)
    print(json.dumps(facts, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
