"""`Store.write` of one poll of a synthetic cluster, part by part: this tree against an older
revision's, side by side in one run.

    .venv/bin/python -m benchmarks.store_write [--topics 100000] [--old-revision REV]
        [--repeat 3]

The snapshot is `benchmarks.synth_admin`'s (the scale harness's cluster through the
collector's parsers and assembly), built once and handed to each case as a pickle. Each case
runs in its own interpreter: `new` with this tree's `core`, `old` (with `--old-revision`)
with `core/` of that git revision. A case times, in CPU seconds (`time.process_time`, the
best of `--repeat` runs, the garbage collector's view of the snapshot frozen as in the
collector after a poll):

- `snapshot_id`: the id of the snapshot alone (since `sha256t:` ids, its tables built first);
- `id of built tables`: in a tree with `sha256t:` ids, the id given the tables the write
  builds anyway (`snapshot_id(snapshot, tables)`): what the id adds to a write;
- `records to Arrow`: `records_to_table` of every polled table;
- `Parquet write`: `dataset.write_rows` of those tables (split by day, zstd, fsync, rename);
- `index row`: the index row built and written;
- `store.write`: the whole write into a fresh store, which the parts should add up to (the
  id of built tables, not `snapshot_id`, since `sha256t:` ids).

Trees of the same id algorithm give the same id (printed last); `sha256:` ids (canonical
JSON, before 2026-12-05) and `sha256t:` ids differ by design.
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bulk_answers import ROOT, export_tree, use_tree

PARTS = ("snapshot_id", "id of built tables", "records to Arrow", "Parquet write", "index row")


def _best(repeat: int, run: Callable[[], Any]) -> tuple[Any, float]:
    best, found = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        found = run()
        best = min(best, time.process_time() - started)
    return found, best


def child(snapshot_file: Path, repeat: int) -> dict[str, Any]:
    """Time the parts of a write of the pickled snapshot with the `core` imported now."""
    from pulsar_lens.core import dataset, digest
    from pulsar_lens.core.model import POLLED_TABLES, records_to_table
    from pulsar_lens.core.store import Store
    from pulsar_lens.core.storelayout import INDEX, index_row, tag

    snapshot = pickle.loads(snapshot_file.read_bytes())
    gc.collect()
    gc.freeze()
    figures: dict[str, Any] = {}
    sid, figures["snapshot_id"] = _best(repeat, lambda: digest.snapshot_id(snapshot))
    figures["id"] = sid
    if hasattr(snapshot, "content_tables"):  # ids of the tables' values
        content = snapshot.content_tables()
        same, figures["id of built tables"] = _best(
            repeat, lambda: digest.snapshot_id(snapshot, content)
        )
        assert same == sid

    def tables() -> dict[str, Any]:
        return {
            name: records_to_table(
                name,
                snapshot.records(name),
                snapshot_id=sid,
                collected_at=snapshot.collected_at,
                cluster=snapshot.cluster,
            )
            for name in POLLED_TABLES
        }

    built, figures["records to Arrow"] = _best(repeat, tables)
    with tempfile.TemporaryDirectory(prefix="store-write-") as tmp:
        root = Path(tmp)

        def parquet() -> None:
            for name, table in built.items():
                dataset.write_rows(root / "parts" / name, table, tag(sid))

        _, figures["Parquet write"] = _best(repeat, parquet)
        counts = {name: t.num_rows for name, t in built.items()}

        def index() -> None:
            dataset.write_rows(root / "parts" / INDEX, index_row(snapshot, sid, counts), tag(sid))

        _, figures["index row"] = _best(repeat, index)
        _, figures["store.write"] = _best(repeat, lambda: Store(root / "store").write(snapshot))
    return figures


def run_case(snapshot_file: Path, repeat: int, tree: Path | None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.store_write", "--child", str(snapshot_file)]
    argv += ["--repeat", str(repeat)]
    if tree is not None:
        argv += ["--tree", str(tree)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"a case failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def report(results: dict[str, dict[str, Any]]) -> None:
    cases = list(results)
    print(f"{'CPU s':<18}" + "".join(f"{c:>10}" for c in cases))
    for part in (*PARTS, "store.write"):
        cells = [results[c].get(part) for c in cases]
        print(f"{part:<18}" + "".join(f"{'-' if v is None else f'{v:.2f}':>10}" for v in cells))
    ids = {c: r["id"] for c, r in results.items()}
    print("ids:", ids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old-revision", metavar="REV", help="time core/ of this git revision too")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if args.tree is not None:
            use_tree(args.tree)
        print(json.dumps(child(args.child, args.repeat)))
        return 0
    from benchmarks.synth_admin import synthetic_snapshot

    with tempfile.TemporaryDirectory(prefix="store-write-") as tmp:
        started = time.perf_counter()
        snapshot = synthetic_snapshot(args.topics)
        rows = {n: len(getattr(snapshot, n)) for n in ("topics", "subscriptions", "consumers")}
        print(f"snapshot {rows} built in {time.perf_counter() - started:.0f} s")
        snapshot_file = Path(tmp) / "snapshot.pickle"
        snapshot_file.write_bytes(pickle.dumps(snapshot))
        del snapshot
        results = {}
        if args.old_revision:
            (Path(tmp) / "old").mkdir()
            tree = export_tree(args.old_revision, Path(tmp) / "old")
            results["old"] = run_case(snapshot_file, args.repeat, tree)
        results["new"] = run_case(snapshot_file, args.repeat, None)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
