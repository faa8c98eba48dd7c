"""The Spark engine, timed against baselines run side by side in the same run.

    .venv/bin/python -m benchmarks.spark [--keys 20000000] [--topics 10000] [--days 1,7]
                                          [--pandas-memory 8g] [--skip-hashing]

1. SparkSession start, cold: a fresh process until `plugins.spark.session.get()` returns.
2. Hashing in Spark, `local[2]`: the sticky-key hash of N keys through Arrow batches and the
   compiled hash (`plugins.spark.hashing.with_sticky_hash`) against a pandas UDF calling `mmh3`
   once per key for the same value (sums compared). Cold (first run) and warm (second).
3. Scale curve: synthetic stores (`benchmarks/synth_store.py`, cached under
   ~/.cache/pulsar-lens/bench/) of a `--topics`-topic cluster polled every 30 s for each of
   `--days`; each history analysis on Spark (`local[2]`, a fresh JVM per run) and its pandas
   twin (`reference.pandas_result`) under a memory cap (`--pandas-memory`, RLIMIT_AS). Each
   run is a child process; its peak memory is the largest summed RSS of its process tree
   (the Spark JVM included), sampled every 0.2 s.

Timing goals (not asserts): hashing >= 10 M keys/s and >= 30x the per-row UDF.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mmh3
import pandas as pd

from core.hashing import CONSISTENT_HASH_MAX, INT31_MASK

CACHE = Path(os.environ.get("PULSAR_LENS_CACHE_DIR", Path.home() / ".cache" / "pulsar-lens"))
ANALYSES = {
    "bundle-load-history": "plugins.builtin.bundle_load_history",
    "failover-history": "plugins.builtin.failover_history",
}


# ---- children -----------------------------------------------------------------------------


def child_session() -> dict[str, Any]:
    started = time.perf_counter()
    from plugins.spark import session

    session.get("local[2]")
    return {"seconds": time.perf_counter() - started}


def child_hashing(keys: int) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    from plugins.spark import session
    from plugins.spark.hashing import with_sticky_hash

    spark = session.get("local[2]")
    frame = spark.range(keys, numPartitions=8).select(
        F.concat(F.lit("order-"), (F.col("id") * 7919 % 1_000_003).cast("string")).alias("key")
    )

    @pandas_udf("long")  # type: ignore[call-overload, misc]
    def per_row(column: pd.Series) -> pd.Series:
        return column.map(
            lambda k: (
                (mmh3.hash(k.encode(), 0, signed=False) & INT31_MASK) % CONSISTENT_HASH_MAX + 1
            )
        )

    def floor() -> int:  # the same keys through Arrow batches to Python and back, unhashed
        return int(frame.mapInArrow(_identity, frame.schema).agg(F.count("*")).first()[0])

    def ours() -> int:
        return int(with_sticky_hash(frame, "key").agg(F.sum("hash")).first()[0])

    def baseline() -> int:
        return int(frame.select(per_row("key").alias("hash")).agg(F.sum("hash")).first()[0])

    out: dict[str, Any] = {}
    for name, run in (("floor", floor), ("ours", ours), ("baseline", baseline)):
        for when in ("cold", "warm"):
            started = time.perf_counter()
            total = run()
            out[f"{name}_{when}"] = time.perf_counter() - started
            out[f"{name}_sum"] = total
    return out


def _identity(batches: Any) -> Any:
    yield from batches


def per_row_hash(column: pd.Series) -> pd.Series:
    """The baseline: `mmh3` once per key, reduced as a 4.0 consistent-hashing broker does."""
    return column.map(
        lambda k: (mmh3.hash(k.encode(), 0, signed=False) & INT31_MASK) % CONSISTENT_HASH_MAX + 1
    )


def child_analysis(plugin: str, engine: str, root: str) -> dict[str, Any]:
    import importlib

    from core.store import Store

    module = importlib.import_module(ANALYSES[plugin])
    started = time.perf_counter()
    if engine == "pandas":
        reference = importlib.import_module(ANALYSES[plugin] + ".reference")
        result = reference.pandas_result(root)
    else:
        from plugins import runner
        from plugins.spark import session

        session.get("local[2]")
        started = time.perf_counter()  # the JVM start is reported on its own
        cls = next(v for v in vars(module).values() if getattr(v, "name", None) == plugin)
        result = runner.run(cls(), Store(root), use_cache=False, use_stored=False).result
    return {"seconds": time.perf_counter() - started, "summary": dict(result.summary)}


# ---- the parent ---------------------------------------------------------------------------


def run_child(args: list[str], *, memory: int | None = None) -> dict[str, Any]:
    """Run `python -m benchmarks.spark --child ...`; its JSON answer plus peak tree RSS."""

    def limit() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    command = [sys.executable, "-m", "benchmarks.spark", "--child", *args]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit
    )
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(0.2)
    out, err = process.communicate()
    if process.returncode != 0:
        tail = err.strip().splitlines()[-1:] or ["?"]
        oom = "MemoryError" in err or "Cannot allocate" in err or "bad_alloc" in err
        return {"failed": "out of memory" if oom else tail[0][:120], "peak_mb": peak / 2**20}
    answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    answer["peak_mb"] = peak / 2**20
    return answer


def tree_rss(pid: int) -> int:
    """Summed resident memory of `pid` and its descendants, in bytes (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            children.setdefault(int(fields[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        stack.extend(children.get(current, []))
    return total


def store_for(topics: int, days: float) -> tuple[Path, dict[str, float]]:
    from benchmarks.synth_store import generate

    root = CACHE / "bench" / f"synth-{topics}t-{days:g}d-30s"
    facts_file = root / "facts.json"
    if facts_file.exists():
        return root, json.loads(facts_file.read_text())
    if root.exists():
        import shutil

        shutil.rmtree(root)
    print(f"  generating {root} ...", flush=True)
    facts = generate(root, topics=topics, days=days, interval=30.0)
    facts_file.write_text(json.dumps(facts))
    return root, facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--keys", type=int, default=20_000_000)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--days", default="1,7")
    parser.add_argument("--pandas-memory", default="8g")
    parser.add_argument("--skip-hashing", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "session":
            answer = child_session()
        elif kind == "hashing":
            answer = child_hashing(int(rest[0]))
        else:
            answer = child_analysis(rest[0], rest[1], rest[2])
        print(json.dumps(answer, default=str))
        return 0
    memory = int(args.pandas_memory.rstrip("g")) * 2**30
    print("SparkSession start (cold, fresh process):", flush=True)
    started = run_child(["session"])
    print(f"  {started.get('seconds', 0):.1f} s, peak {started['peak_mb']:.0f} MB", flush=True)
    if not args.skip_hashing:
        print(f"Hashing {args.keys:,} keys in Spark (local[2]):", flush=True)
        h = run_child(["hashing", str(args.keys)])
        if "failed" in h:
            print(f"  failed: {h['failed']}")
        else:
            assert h["ours_sum"] == h["baseline_sum"], "the two hashes disagree"
            for when in ("cold", "warm"):
                ours, base, floor = (h[f"{n}_{when}"] for n in ("ours", "baseline", "floor"))
                hashing = max(ours - floor, 1e-3)
                print(
                    f"  {when}: ours {ours:.1f} s ({args.keys / ours / 1e6:.1f} M keys/s), "
                    f"per-row mmh3 UDF {base:.1f} s ({args.keys / base / 1e6:.2f} M keys/s), "
                    f"{base / ours:.1f}x; the same batches unhashed {floor:.1f} s, so the "
                    f"hash itself costs {hashing:.1f} s ({args.keys / hashing / 1e6:.0f} M "
                    f"keys/s) against {max(base - floor, 1e-3):.1f} s per row "
                    f"({max(base - floor, 1e-3) / hashing:.0f}x)",
                    flush=True,
                )
    rows = []
    for days in [float(d) for d in args.days.split(",")]:
        root, facts = store_for(args.topics, days)
        print(
            f"store {days:g} d x {args.topics:,} topics: {int(facts['polls']):,} polls, "
            f"{int(facts['topics']):,} topic rows, {facts['bytes'] / 2**30:.2f} GiB",
            flush=True,
        )
        for plugin, module in ANALYSES.items():
            try:
                __import__(module + ".reference")
            except ImportError:
                print(f"  {plugin}: not built, skipped", flush=True)
                continue
            for engine in ("spark", "pandas"):
                answer = run_child(
                    ["analysis", plugin, engine, str(root)],
                    memory=memory if engine == "pandas" else None,
                )
                rows.append((days, plugin, engine, facts, answer))
                print("  " + _line(days, plugin, engine, facts, answer), flush=True)
    print("\n| days | analysis | engine | time | peak memory | topic rows | time per M rows |")
    print("|---|---|---|---|---|---|---|")
    for days, plugin, engine, facts, answer in rows:
        print(_row(days, plugin, engine, facts, answer))
    return 0


def _line(days: float, plugin: str, engine: str, facts: dict[str, float], answer: Any) -> str:
    if "failed" in answer:
        return f"{plugin} on {engine}: {answer['failed']} (peak {answer['peak_mb']:.0f} MB)"
    return f"{plugin} on {engine}: {answer['seconds']:.1f} s, peak {answer['peak_mb']:.0f} MB"


def _row(days: float, plugin: str, engine: str, facts: dict[str, float], answer: Any) -> str:
    rows = facts["topics"]
    if "failed" in answer:
        took, per = answer["failed"], "—"
    else:
        took = f"{answer['seconds']:.1f} s"
        per = f"{answer['seconds'] / (rows / 1e6):.2f} s"
    peak = f"{answer['peak_mb'] / 1024:.1f} GiB"
    return f"| {days:g} | {plugin} | {engine} | {took} | {peak} | {int(rows):,} | {per} |"


if __name__ == "__main__":
    raise SystemExit(main())
