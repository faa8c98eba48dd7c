"""Store reads on a realistic history, against a naive pyarrow.dataset scan of the same files.

    .venv/bin/python benchmarks/store_reads.py [--snapshots 2000] [--topics 1000] [--step 30]

Writes `snapshots` polls of `topics` topic rows, `step` seconds apart (from noon: the default
history closes a day), into a temporary store, then
times read_latest, read_history and a one-hour range read, before and after compacting the
closed day. The baseline, measured in the same run, is what a reader without the store's
file pruning would do: open the whole hive dataset and filter by snapshot id.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from pulsar_lens.core import dataset
from pulsar_lens.core.model import TopicRecord, records_to_table
from pulsar_lens.core.store import INDEX, INDEX_SCHEMA, Store

START = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
STEP = dt.timedelta(seconds=30)


def topic_rows(topics: int) -> pa.Table:
    records = [
        TopicRecord(
            topic=f"persistent://public/default/topic-{i}",
            tenant="public",
            namespace="public/default",
            bundle="0x00000000_0x40000000",
            owner_broker="127.0.0.1:8080",
            msg_rate_in=float(i),
            backlog_size=i * 10,
        )
        for i in range(topics)
    ]
    return records_to_table("topics", records, snapshot_id="", collected_at=START, cluster="c")


def fill(root: Path, snapshots: int, topics: int, step: dt.timedelta = STEP) -> list[str]:
    """Write the history straight through the layout functions (as Store.write lays it out)."""
    base = topic_rows(topics)
    ids = []
    for n in range(snapshots):
        at = START + n * step
        sid = "sha256:" + hashlib.sha256(str(n).encode()).hexdigest()
        tag = sid[7:23]  # as Store.write names a snapshot's files
        table = base.set_column(0, "snapshot_id", pa.array([sid] * topics, pa.string()))
        table = table.set_column(
            1, "collected_at", pa.array([at] * topics, base["collected_at"].type)
        )
        dataset.write_rows(root / "topics", table, tag)
        row = {name: [None] for name in INDEX_SCHEMA.names}
        row.update(snapshot_id=[sid], collected_at=[at], cluster=["c"], partial=[False])
        dataset.write_rows(root / INDEX, pa.table(row, schema=INDEX_SCHEMA), tag)
        ids.append(sid)
    return ids


def timed(fn: Callable[[], object], *, repeat: int = 5) -> float:
    """Median wall seconds of fn over `repeat` runs."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def naive_latest(root: Path, sid: str) -> pa.Table:
    scan = ds.dataset(root / "topics", format="parquet", partitioning="hive")
    return scan.to_table(filter=pc.field("snapshot_id") == sid)


def report(label: str, root: Path, ids: list[str], topics: int) -> None:
    hour_start = START + dt.timedelta(hours=8)
    cases: dict[str, Callable[[], object]] = {
        "read_latest (cold Store)": lambda: Store(root).read_latest("topics"),
        "read_latest (warm Store)": lambda: warm.read_latest("topics"),
        "read_history 12": lambda: warm.read_history("topics", snapshots=12),
        "read 1 hour range": lambda: warm.read(
            "topics", since=hour_start, until=hour_start + dt.timedelta(hours=1)
        ),
        "read by 12 ids (cold Store)": lambda: Store(root).read("topics", snapshot_ids=ids[-12:]),
        "snapshots() whole index": lambda: warm.snapshots(),
    }
    warm = Store(root)
    assert warm.read_latest("topics").num_rows == topics
    baseline = timed(lambda: naive_latest(root, ids[-1]), repeat=3)
    print(
        f"\n{label}: baseline naive dataset scan for the latest snapshot {baseline * 1000:.1f} ms"
    )
    for name, fn in cases.items():
        seconds = timed(fn)
        print(f"  {name:28s} {seconds * 1000:8.1f} ms   {baseline / seconds:7.1f}x faster")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--step", type=float, default=STEP.total_seconds(), help="seconds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        ids = fill(root, args.snapshots, args.topics, dt.timedelta(seconds=args.step))
        print(
            f"wrote {args.snapshots} snapshots x {args.topics} topic rows "
            f"in {time.perf_counter() - started:.1f} s"
        )
        report("one file per poll", root, ids, args.topics)
        store = Store(root)
        started = time.perf_counter()
        closed = store.days("topics")[:-1]
        for day in closed:
            store.compact(day)
        print(f"\ncompacted {len(closed)} closed day(s) in {time.perf_counter() - started:.1f} s")
        report("closed days compacted", root, ids, args.topics)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
