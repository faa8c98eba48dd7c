"""The Spark engine, timed against baselines run side by side in the same run.

    .venv/bin/python -m benchmarks.spark [--keys 20000000] [--topics 10000] [--days 0.25,1,7]
        [--pandas-memory 8g] [--only failover-history,...] [--timeout 1h]
        [--skip-hashing] [--skip-scale] [--skip-key-distribution]

1. SparkSession start, cold: a fresh process until `plugins.spark.session.get()` returns.
2. Hashing in Spark on `local[2]`: the sticky-key hash (4.0 consistent hashing: murmur3 x86_32
   of the key's UTF-8 bytes, 31 bits, `% 65535 + 1`) of N keys by `plugins.spark.hashing.
   with_sticky_hash`, in the JVM (the Java UDF of `plugins.spark.jvm`) and through Arrow
   batches and the compiled hash in Python (its fallback), against a pandas UDF calling `mmh3`
   once per key for the same value (all equal on a sample key by key, and in sum). Where the
   time goes: the same keys made and summed in the JVM alone, and sent through Arrow batches
   to Python and back unhashed; the compiled hash alone on them in one process; and keys held
   in Spark (made once, persisted in its memory), summed and hashed by ours. Cold is
   the first run of each, warm the best of the next two; the UDF's set-up (compiling the jar
   when missing, adding it to the session, registering it) is timed apart.
3. Scale curve: synthetic stores (`benchmarks/synth_store.py`) of a `--topics`-topic cluster
   polled every 30 s, for each of `--days`, cached under ~/.cache/pulsar-lens/bench/ (a
   whole-day store is the first days of one growing store, linked, not copied). Each history
   analysis runs on Spark (`local[2]`) and on its pandas twin (`reference.pandas_result`),
   every run in a child process of its own. Memory: the child's own peak RSS (`wait4`), the
   peak RSS of the Spark JVM and of the Python workers it starts (`VmHWM` of each, read from
   /proc while they live), and the largest sum over the whole process tree (sampled every
   0.2 s). The pandas child runs under `RLIMIT_AS` = `--pandas-memory` (address space, which
   Arrow's allocator reserves ahead of use, so it bites before the RSS reaches it).

4. key-distribution on the store tests/spark/test_cluster.py writes (12 polls, 960 sampled
   keys), on `local[2]` in a fresh process: the wall time and the Spark jobs (its job group's,
   from the status tracker) of each of `KEY_DISTRIBUTION_RUNS` runs, cold the first and warm
   the best of the others. Before the counts were collected in one query a run started 49
   jobs (29 s cold, 7 s warm); after, 17 (17 s, 4.5 s): docs/performance.md.

Timing goals (not asserts): hashing >= 10 M keys/s and >= 30x the per-row UDF.
`--keys 20000 --skip-scale --skip-key-distribution` is the tiny run the tests make
(tests/spark/test_benchmark_spark.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mmh3
import pandas as pd

from pulsar_lens.core.hashing import CONSISTENT_HASH_MAX, INT31_MASK
from pulsar_lens.core.settings import parse_duration

CACHE = Path(os.environ.get("PULSAR_LENS_CACHE_DIR", Path.home() / ".cache" / "pulsar-lens"))
INTERVAL = 30.0
ANALYSES = {
    "bundle-load-history": "pulsar_lens.plugins.builtin.bundle_load_history",
    "failover-history": "pulsar_lens.plugins.builtin.failover_history",
}
OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "Cannot allocate", "OutOfMemory", "out of memory")


# ---- children -------------------------------------------------------------------------------


def child_session() -> dict[str, Any]:
    started = time.perf_counter()
    from pulsar_lens.plugins.spark import session

    spark = session.get("local[2]")
    took = time.perf_counter() - started
    return {"seconds": took, "driver_memory": spark.conf.get("spark.driver.memory")}


def child_analysis(plugin: str, engine: str, root: str) -> dict[str, Any]:
    import importlib

    from pulsar_lens.core.store import Store

    module = importlib.import_module(ANALYSES[plugin])
    store = Store(root)
    quarantined = store.quarantined_files()
    out: dict[str, Any] = {}
    if engine == "pandas":
        reference = importlib.import_module(ANALYSES[plugin] + ".reference")
        started = time.perf_counter()
        result = reference.pandas_result(root)
    else:
        from pulsar_lens.plugins import runner
        from pulsar_lens.plugins.spark import session

        started = time.perf_counter()
        spark = session.get("local[2]")
        out["jvm_seconds"] = time.perf_counter() - started
        out["driver_memory"] = spark.conf.get("spark.driver.memory")
        cls = next(v for v in vars(module).values() if getattr(v, "name", None) == plugin)
        started = time.perf_counter()
        result = runner.run(cls(), store, use_cache=False, use_stored=False).result
    out["seconds"] = time.perf_counter() - started
    moved = store.quarantined_files() - quarantined
    if moved:  # a read that ran out of memory looks unreadable: the result lacks that file
        raise RuntimeError(f"out of memory reading: the store moved {moved} file(s) aside")
    out["summary"] = dict(result.summary)
    return out


KEY_DISTRIBUTION_RUNS = 3


def child_key_distribution(root: str) -> dict[str, Any]:
    from pulsar_lens.core.store import Store
    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.builtin.key_distribution import KeyDistribution
    from pulsar_lens.plugins.spark import session

    context = session.get("local[2]").sparkContext
    runs, summary = [], {}
    for i in range(KEY_DISTRIBUTION_RUNS):
        group = f"benchmark-key-distribution-{i}"
        context.setJobGroup(group, group)
        started = time.perf_counter()
        output = runner.run(KeyDistribution(), Store(root), use_cache=False, use_stored=False)
        took = time.perf_counter() - started
        jobs = len(context.statusTracker().getJobIdsForGroup(group))
        runs.append({"seconds": took, "jobs": jobs})
        summary = dict(output.result.summary)
    return {"runs": runs, "summary": summary}


def report_key_distribution() -> None:
    import random

    from pulsar_lens.core.store import Store
    from tests.spark.test_cluster import write_store

    with tempfile.TemporaryDirectory(prefix="bench-key-distribution-") as root:
        write_store(Store(root), random.Random(7))
        before = os.getloadavg()
        answer = run_child(["key-distribution", root])
    print(
        f"\nkey-distribution on tests/spark/test_cluster.py's store, local[2], a fresh process "
        f"(load average before {_loads(before)})"
    )
    if "failed" in answer:
        print(f"  failed: {answer['failed']}")
        return
    runs = answer["runs"]
    print("| run | seconds | Spark jobs |")
    print("|---|---|---|")
    for i, run in enumerate(runs):
        print(f"| {'cold' if i == 0 else f'warm {i}'} | {run['seconds']:.1f} | {run['jobs']} |")
    warm = min(run["seconds"] for run in runs[1:])
    print(
        f"key-distribution: cold {runs[0]['seconds']:.1f} s, warm {warm:.1f} s, "
        f"{runs[0]['jobs']} Spark jobs per run; summary {json.dumps(answer['summary'])}"
    )


# ---- the parent -----------------------------------------------------------------------------


def run_child(
    args: list[str], *, memory: int | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """`python -m benchmarks.spark --child ...` in a process of its own: its JSON answer, or
    why it failed, and what memory it and its descendants took (module docstring)."""

    def limit() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    command = [sys.executable, "-m", "benchmarks.spark", "--child", *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            command, stdout=out, stderr=err, preexec_fn=limit, start_new_session=True
        )
        tree, peaks = 0, {"jvm": 0, "workers": 0}
        started, late = time.monotonic(), False
        while True:
            finished, status, usage = os.wait4(process.pid, os.WNOHANG)
            if finished:
                break
            tree = max(tree, _watch(process.pid, peaks))
            if timeout and time.monotonic() - started > timeout and not late:
                late = True
                os.killpg(process.pid, signal.SIGKILL)  # its own group: the JVM goes too
            time.sleep(0.2)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    memory_mb = {
        "child_mb": usage.ru_maxrss / 1024,
        "jvm_mb": peaks["jvm"] / 2**20,
        "workers_mb": peaks["workers"] / 2**20,
        "tree_mb": tree / 2**20,
    }
    if late:
        return {"failed": f"stopped after {timeout:.0f} s", **memory_mb}
    if process.returncode != 0:
        return {"failed": _why(process.returncode, stderr), **memory_mb}
    answer: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return {**answer, **memory_mb}


def _why(code: int, stderr: str) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    if any(word in stderr for word in OUT_OF_MEMORY):
        return "out of memory"
    lines = [line for line in stderr.splitlines() if "Error" in line or "Exception" in line]
    return (lines[-1] if lines else (stderr.strip().splitlines() or ["?"])[-1]).strip()[:160]


def _watch(root: int, peaks: dict[str, int]) -> int:
    """The summed RSS of `root`'s process tree now; raises `peaks` to the `VmHWM` of the Java
    processes ("jvm") and the Python processes they start ("workers") in it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, stack, java = 0, [(root, False)], 0
    workers = 0
    while stack:
        pid, under_java = stack.pop()
        status = _status(pid)
        total += status.get("VmRSS", 0)
        is_java = status.get("Name") == "java"
        if is_java:
            java += status.get("VmHWM", 0)
        elif under_java:
            workers += status.get("VmHWM", 0)
        stack.extend((c, under_java or is_java) for c in children.get(pid, []))
    peaks["jvm"] = max(peaks["jvm"], java)
    peaks["workers"] = max(peaks["workers"], workers)
    return total


def _status(pid: int) -> dict[str, Any]:
    found: dict[str, Any] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key == "Name":
                found[key] = value.strip()
            elif key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return found


def store_for(topics: int, days: float) -> tuple[Path, dict[str, Any]]:
    """The cached store of `days` days of `topics` topics polled every 30 s, made if missing:
    whole days link the first days of one growing store, a part of a day is its own."""
    from benchmarks.synth_store import describe, generate, link_days

    bench = CACHE / "bench"
    root = bench / f"synth-{topics}t-{INTERVAL:g}s-{days:g}d"
    facts_file = root / "facts.json"
    if facts_file.exists():
        return root, json.loads(facts_file.read_text())
    shutil.rmtree(root, ignore_errors=True)
    print(f"  generating {root} ...", flush=True)
    started = time.perf_counter()
    if days != int(days):
        facts = generate(root, topics=topics, days=days, interval=INTERVAL)
    else:
        base = bench / f"synth-{topics}t-{INTERVAL:g}s"
        have = describe(base)["days"] if (base / "synth.json").exists() else 0
        if have < days:
            generate(base, topics=topics, days=days, interval=INTERVAL)
        facts = link_days(base, root, int(days))
    facts["seconds"] = time.perf_counter() - started
    facts_file.write_text(json.dumps(facts))
    return root, facts


def child_hashing(keys: int, partitions: int = 8) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf  # type: ignore[attr-defined]

    from pulsar_lens.core.hashing import sticky_key_hash, sticky_key_hash_array
    from pulsar_lens.plugins.spark import jvm, session
    from pulsar_lens.plugins.spark.hashing import with_sticky_hash

    spark = session.get("local[2]")
    started = time.perf_counter()
    compiled = jvm.jar_path().exists()
    jvm.register(spark)
    setup = {"seconds": time.perf_counter() - started, "compiled": not compiled}
    number = (F.col("id") * KEY_MULTIPLIER) % KEY_MODULUS
    frame: Any = spark.range(keys, numPartitions=partitions).select(
        F.concat(F.lit("order-"), number.cast("string")).alias("key")
    )

    per_row = pandas_udf(per_row_hash, "long")

    sample = with_sticky_hash(frame.limit(2000), "key", path="jvm")
    sample = with_sticky_hash(sample, "key", out="arrow", path="arrow")
    rows: Any = sample.select("key", "hash", "arrow", per_row("key").alias("udf")).toPandas()
    pairs = zip(rows["key"], rows["hash"], strict=True)
    assert (rows["hash"] == rows["udf"]).all(), "the UDF and ours disagree"
    assert (rows["hash"] == rows["arrow"]).all(), "the JVM and the Arrow path disagree"
    assert all(sticky_key_hash(k.encode()) == h for k, h in pairs), "ours and the scalar differ"

    stages: dict[str, Any] = {
        "jvm": lambda: _one(frame.agg(F.sum(F.length("key")))),
        "arrow": lambda: _one(frame.mapInArrow(_identity, frame.schema).agg(F.count("*"))),
        "ours": lambda: _one(with_sticky_hash(frame, "key", path="jvm").agg(F.sum("hash"))),
        "arrow_hash": lambda: _one(with_sticky_hash(frame, "key", path="arrow").agg(F.sum("hash"))),
        "udf": lambda: _one(frame.select(per_row("key").alias("hash")).agg(F.sum("hash"))),
    }
    # keys held in Spark: made once, kept in its memory, so a stage reads them and nothing else
    held: Any = frame.persist(StorageLevel.MEMORY_ONLY)
    held.count()
    # MEMORY_ONLY drops what does not fit and makes it again when read: say how much is held
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    cached = (sum(i.numCachedPartitions() for i in infos), sum(i.numPartitions() for i in infos))
    stages["held"] = lambda: _one(held.agg(F.sum(F.length("key"))))
    stages["held_ours"] = lambda: _one(with_sticky_hash(held, "key", path="jvm").agg(F.sum("hash")))
    ids = pa.array(np.arange(keys, dtype=np.int64) * KEY_MULTIPLIER % KEY_MODULUS)
    local = pc.binary_join_element_wise("order-", pc.cast(ids, pa.string()), "")
    stages["alone"] = lambda: int(sticky_key_hash_array(local).sum(dtype=np.int64))
    out: dict[str, Any] = {"sample": len(rows), "setup": setup, "held_partitions": cached}
    for name, run in stages.items():
        times = []
        for _ in range(3):
            started = time.perf_counter()
            value = run()
            times.append(time.perf_counter() - started)
        out[name] = {"cold": times[0], "warm": min(times[1:]), "value": int(value)}
    held.unpersist()
    sums = {out[n]["value"] for n in ("ours", "held_ours", "arrow_hash", "udf", "alone")}
    assert len(sums) == 1, "sums differ"
    return out


def per_row_hash(column: pd.Series) -> pd.Series:
    """The baseline: `mmh3` once per key, reduced as a 4.0 consistent-hashing broker does."""
    return column.map(
        lambda k: (mmh3.hash(k.encode(), 0, signed=False) & INT31_MASK) % CONSISTENT_HASH_MAX + 1
    )


KEY_MULTIPLIER, KEY_MODULUS = 2_654_435_761, 1_000_000_007  # distinct keys, 7-16 characters


def _one(frame: Any) -> Any:
    return frame.first()[0]


def _identity(batches: Any) -> Any:
    yield from batches


def report_hashing(keys: int, partitions: int = 8) -> None:
    print(
        f"\nHashing {keys:,} keys in {partitions} partitions in Spark, local[2] "
        "(cold: first run; warm: best of 2 more)"
    )
    before = os.getloadavg()
    h = run_child(["hashing", str(keys), str(partitions)])
    after = os.getloadavg()
    print(f"load average (1, 5, 15 min) before {_loads(before)}, after {_loads(after)}")
    if "failed" in h:
        print(f"  failed: {h['failed']}")
        return
    print("| stage | cold s | cold M keys/s | warm s | warm M keys/s |")
    print("|---|---|---|---|---|")
    for name, label in HASH_STAGES.items():
        cold, warm = h[name]["cold"], h[name]["warm"]
        print(
            f"| {label} | {cold:.1f} | {keys / cold / 1e6:.2f} | {warm:.1f} | "
            f"{keys / warm / 1e6:.2f} |"
        )
    ours, udf, jvm, arrow = (h[n] for n in ("ours", "udf", "jvm", "arrow"))
    via_python = h["arrow_hash"]
    setup = h["setup"]
    print(
        f"the Java UDF's set-up: {setup['seconds']:.1f} s "
        f"({'compiled now' if setup['compiled'] else 'jar cached'}; added and registered)"
    )
    for when in ("cold", "warm"):
        print(
            f"ours (JVM) vs the per-row UDF, {when}: {udf[when] / ours[when]:.1f}x; "
            f"vs the Arrow path: {via_python[when] / ours[when]:.1f}x; "
            f"ours {keys / ours[when] / 1e6:.2f} M keys/s"
        )
    w = "warm"
    print(
        f"where ours' warm {ours[w]:.1f} s goes: making the keys in the JVM {jvm[w]:.1f} s, "
        f"hashing them there {max(ours[w] - jvm[w], 0):.1f} s. The Arrow path's "
        f"{via_python[w]:.1f} s: the round trip to Python {max(arrow[w] - jvm[w], 0):.1f} s, "
        f"hashing {max(via_python[w] - arrow[w], 0):.1f} s (alone, without Spark: "
        f"{h['alone'][w]:.2f} s); the per-row UDF spends {max(udf[w] - arrow[w], 0):.1f} s past "
        f"the round trip. Values equal key by key on {h['sample']:,} keys (JVM, Arrow, per-row "
        f"UDF, scalar hash) and in sum on all."
    )
    held, held_ours = h["held"], h["held_ours"]
    print(
        f"on keys held in Spark's memory, warm: reading them {held[w]:.1f} s, ours "
        f"{held_ours[w]:.1f} s ({keys / held_ours[w] / 1e6:.2f} M keys/s, "
        f"{udf[w] / held_ours[w]:.1f}x the per-row UDF on made keys); cold "
        f"{keys / held_ours['cold'] / 1e6:.2f} M keys/s; partitions held in memory "
        f"{h['held_partitions'][0]} of {h['held_partitions'][1]}"
    )
    print(
        f"peak RSS: Python driver {h['child_mb']:.0f} MB, JVM {h['jvm_mb']:.0f} MB, "
        f"Python workers {h['workers_mb']:.0f} MB"
    )


def _loads(loads: tuple[float, float, float]) -> str:
    return ", ".join(f"{load:.1f}" for load in loads)


HASH_STAGES = {
    "jvm": "keys made and summed in the JVM only",
    "arrow": "... sent through Arrow batches to Python and back, unhashed",
    "ours": "ours: with_sticky_hash in the JVM (Java UDF)",
    "arrow_hash": "with_sticky_hash through Arrow batches, compiled hash (the fallback)",
    "udf": "baseline: pandas UDF, mmh3 once per key",
    "alone": "the compiled hash alone, one process, no Spark",
    "held": "keys held in Spark's memory, summed (read only)",
    "held_ours": "ours on the keys held in Spark's memory",
}


def report_scale(
    topics: int, days: list[float], memory: int, *, only: list[str], timeout: float
) -> None:
    import importlib

    inputs: dict[str, tuple[str, ...]] = {}
    for plugin, module in ANALYSES.items():
        if only and plugin not in only:
            continue
        try:
            loaded = importlib.import_module(module)
            importlib.import_module(module + ".reference")
        except ImportError as exc:
            print(f"  {plugin}: cannot be imported ({exc}), skipped")
            continue
        cls = next(v for v in vars(loaded).values() if getattr(v, "name", None) == plugin)
        inputs[plugin] = tuple(cls.inputs)
    print(
        f"\nScale: {topics:,} topics polled every {INTERVAL:g} s; pandas under RLIMIT_AS "
        f"{memory / 2**30:.0f} GiB"
    )
    results = []
    stores = []
    for size in days:
        root, facts = store_for(topics, size)
        stores.append((size, facts))
        print(
            f"store {size:g} d: {facts['polls']:,} polls, "
            f"{sum(facts['rows'].values()):,} rows, {facts['bytes'] / 2**30:.2f} GiB"
        )
        for plugin, tables in inputs.items():
            rows = sum(facts["rows"].get(t, 0) for t in tables)
            for engine in ("spark", "pandas"):
                # each run reads its own linked copy: nothing one run moves aside is lost
                scratch = CACHE / "bench" / f".run-{os.getpid()}"
                shutil.rmtree(scratch, ignore_errors=True)
                shutil.copytree(root, scratch, copy_function=os.link)
                try:
                    answer = run_child(
                        ["analysis", plugin, engine, str(scratch)],
                        memory=memory if engine == "pandas" else None,
                        timeout=timeout,
                    )
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                results.append((size, plugin, engine, rows, answer))
                load = os.getloadavg()[0]
                print(f"  {_row(size, plugin, engine, rows, answer)} load {load:.1f}", flush=True)
    _print_stores(stores)
    print(
        "\n| days | analysis | engine | rows read | time | ns/row | child RSS | JVM | "
        "workers | tree |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        print(_row(*result))
    print(
        f"cached stores take {_disk(CACHE / 'bench') / 2**30:.1f} GiB on disk "
        "(linked days counted once)"
    )


def _print_stores(stores: list[tuple[float, dict[str, Any]]]) -> None:
    print(
        "\n| days | polls | topics | subscriptions | consumers | bundles | events | "
        "on disk | made in |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size, facts in stores:
        rows = facts["rows"]
        counts = " | ".join(
            f"{rows.get(t, 0):,}"
            for t in ("topics", "subscriptions", "consumers", "bundles", "events")
        )
        print(
            f"| {size:g} | {facts['polls']:,} | {counts} | {facts['bytes'] / 2**30:.2f} GiB "
            f"| {facts.get('seconds', 0):.0f} s |"
        )


def _row(size: float, plugin: str, engine: str, rows: int, answer: dict[str, Any]) -> str:
    if "failed" in answer:
        took, per = answer["failed"], "-"
        if took == "out of memory":
            took = f"out of memory at {rows:,} rows"
    else:
        took = f"{answer['seconds']:.1f} s"
        per = f"{answer['seconds'] / max(rows, 1) * 1e9:.0f}"
    memory = " | ".join(
        f"{answer[k] / 1024:.1f} GiB" if answer[k] else "-"
        for k in ("child_mb", "jvm_mb", "workers_mb", "tree_mb")
    )
    return f"| {size:g} | {plugin} | {engine} | {rows:,} | {took} | {per} | {memory} |"


def _disk(folder: Path) -> int:
    seen, total = set(), 0
    for path in folder.rglob("*"):
        info = path.stat()
        if path.is_file() and info.st_ino not in seen:
            seen.add(info.st_ino)
            total += info.st_size
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--keys", type=int, default=20_000_000)
    parser.add_argument("--partitions", type=int, default=8, help="of the hashed keys")
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--days", default="0.25,1,7")
    parser.add_argument("--pandas-memory", default="8g", help="RLIMIT_AS of the pandas runs")
    parser.add_argument("--only", default="", help="analyses to run (comma-separated)")
    parser.add_argument("--timeout", default="1h", help="longest run of one analysis")
    parser.add_argument("--skip-hashing", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-key-distribution", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "session":
            answer = child_session()
        elif kind == "hashing":
            answer = child_hashing(int(rest[0]), int(rest[1]))
        elif kind == "key-distribution":
            answer = child_key_distribution(rest[0])
        else:
            answer = child_analysis(*rest)
        print(json.dumps(answer, default=str))
        return 0
    memory = int(float(args.pandas_memory.lower().rstrip("g")) * 2**30)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    started = run_child(["session"])
    print(
        f"SparkSession start, cold (a fresh process, local[2]): {started['seconds']:.1f} s; "
        f"driver memory {started['driver_memory']}; peak RSS: Python "
        f"{started['child_mb']:.0f} MB, JVM {started['jvm_mb']:.0f} MB"
    )
    if not args.skip_hashing:
        report_hashing(args.keys, args.partitions)
    if not args.skip_key_distribution:
        report_key_distribution()
    if not args.skip_scale:
        report_scale(
            args.topics,
            [float(d) for d in args.days.split(",")],
            memory,
            only=[a for a in args.only.split(",") if a],
            timeout=parse_duration(args.timeout).total_seconds(),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
