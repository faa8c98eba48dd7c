"""A poll's bulk answers built into parts on Spark (`plugins.spark.parts`, what
`PULSAR_LENS_SPARK_PARTS=1` does) against the collect process's own worker processes
(`collectors.bulkparts.PartPool`, the default) and against this process alone, side by side
in one run.

    .venv/bin/python -m benchmarks.spark_parts [--topics 100000] [--brokers 3]
        [--master local[2]] [--rounds 2]

The answers are the synthetic cluster's (`benchmarks.synth_server`, the scale harness's),
rendered once. Each round builds every answer's part:

- `here, one at a time`: `part_of_answer` in this process, answer after answer;
- `pool, all in flight`: a `PartPool` with its default workers (one more than the CPUs),
  every answer submitted at once from a thread of its own, as a poll does;
- `spark, all in flight`: `SparkParts` on `--master`, likewise (one Spark job per answer);
- `spark, one at a time`: the same, answer after answer: less the first row, what it costs
  to send one answer through Spark and its part back (`overhead per answer`).

The first round is cold (worker processes and Spark's Python workers start); the figures
of the later rounds are their median. CPU is this process's (what the collect process
itself pays), and on a cluster's master the Spark driver JVM's it starts beside it. Every
part built on Spark is compared with the one built here (`same parts`). On one host Spark's
executors share the collect process's cores, so only the overhead can be measured here: with
E executor cores a poll of A answers needs about ceil(A / E) x (one answer's build + the
overhead) instead of A / cores x the build.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

STAGES = ("here, one at a time", "pool, all in flight", "spark, all in flight",
          "spark, one at a time")  # fmt: skip
Builder = Callable[[bytes, str, frozenset[str] | None], Any]


def build_all(builder: Builder, bodies: Mapping[str, bytes], *, in_flight: bool) -> list[Any]:
    """Every answer's part, each answer from a thread of its own (`in_flight`) or in turn."""
    if not in_flight:
        return [builder(body, broker, None) for broker, body in bodies.items()]
    with ThreadPoolExecutor(len(bodies), thread_name_prefix="answer") as threads:
        return list(threads.map(lambda b: builder(bodies[b], b, None), list(bodies)))


def timed(run: Callable[[], Any], driver: int | None = None) -> tuple[float, float, float, Any]:
    """Wall seconds, this process's CPU seconds (its worker processes' left out), those of
    the Spark driver's JVM `driver` (pid; 0 when None), and what `run` gave."""
    started, cpu, jvm = time.perf_counter(), time.process_time(), cpu_of(driver)
    found = run()
    return (time.perf_counter() - started, time.process_time() - cpu, cpu_of(driver) - jvm,
            found)  # fmt: skip


def cpu_of(pid: int | None) -> float:
    """User and system CPU seconds of process `pid` (0 for None or a process gone)."""
    if pid is None:
        return 0.0
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def driver_jvm(spark: Any, master: str) -> int | None:
    """The pid of the session's driver JVM when it runs no executor (a cluster's master,
    not `local[N]` nor Spark Connect, where no driver JVM of ours runs): its CPU is then what
    the collect host pays on top of its own process."""
    if master.startswith(("local", "sc://")):
        return None
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    return getattr(proc, "pid", None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_parts")
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=2, help="the first one cold")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_TESTING", "1")  # no web UI

    from benchmarks.synth_server import SynthCluster
    from pulsar_lens.collectors.bulkparts import PartPool, part_of_answer
    from pulsar_lens.plugins.spark import session
    from pulsar_lens.plugins.spark.parts import SparkParts
    from tests.collectors.test_bulkparts import is_same_part

    brokers = [f"10.0.{i // 250}.{i % 250 + 1}:8080" for i in range(args.brokers)]
    bodies = SynthCluster(args.topics, brokers, change=0.0, seed=7).current.bulk
    # the master asked for, the rest as configured (a test run's JVM options among them)
    session.configure(dataclasses.replace(session.configured(), master=args.master))
    started, _, _, _ = timed(session.get)
    driver = driver_jvm(session.get(), args.master)
    pool, spark = PartPool(), SparkParts(min_bytes=0)
    engines: dict[str, tuple[Builder, bool]] = {
        STAGES[0]: (part_of_answer, False),
        STAGES[1]: (pool.build, True),
        STAGES[2]: (spark.build, True),
        STAGES[3]: (spark.build, False),
    }
    seconds: dict[str, list[float]] = {stage: [] for stage in STAGES}
    cpu: dict[str, list[float]] = {stage: [] for stage in STAGES}
    jvm: dict[str, list[float]] = {stage: [] for stage in STAGES}
    agree = True
    here: list[Any] = []
    try:
        for _ in range(max(1, args.rounds)):
            for stage, (builder, in_flight) in engines.items():
                run = partial(build_all, builder, bodies, in_flight=in_flight)
                took, used, driven, parts = timed(run, driver)
                seconds[stage].append(took)
                cpu[stage].append(used)
                jvm[stage].append(driven)
                if stage == STAGES[0]:
                    here = parts
                else:
                    pairs = zip(parts, here, strict=True)
                    agree = agree and all(is_same_part(a, b) for a, b in pairs)
    finally:
        pool.close()
        spark.close()
    body_mb = sum(len(b) for b in bodies.values()) / 1e6
    part_mb = sum(len(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)) for p in here) / 1e6
    print(f"{args.topics:,} topics in {len(bodies)} answers on {args.master} "
          f"({os.cpu_count()} CPUs here): {body_mb:.1f} MB of JSON, {part_mb:.1f} MB of "
          f"parts pickled; Spark session started in {started:.1f} s")  # fmt: skip
    rounds = max(0, args.rounds - 1)
    print(f"| stage | cold | warm (median of {rounds}) | CPU here, warm | driver JVM CPU, warm |")
    print("|---|---|---|---|---|")
    warm: dict[str, float] = {}
    for stage in STAGES:
        later = seconds[stage][1:]
        warm[stage] = statistics.median(later) if later else seconds[stage][0]
        here_cpu = statistics.median(cpu[stage][1:] or cpu[stage])
        jvm_cpu = f"{statistics.median(jvm[stage][1:] or jvm[stage]):.2f} s" if driver else "-"
        shown = f"{warm[stage]:.2f} s" if later else "-"
        print(f"| {stage} | {seconds[stage][0]:.2f} s | {shown} | {here_cpu:.2f} s | {jvm_cpu} |")
    overhead = (warm[STAGES[3]] - warm[STAGES[0]]) / len(bodies)
    said = "yes" if agree else "NO"
    print(f"spark, all in flight vs pool: {warm[STAGES[2]] / warm[STAGES[1]]:.2f}x; "
          f"overhead per answer: {overhead:.2f} s; same parts: {said}")  # fmt: skip
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
