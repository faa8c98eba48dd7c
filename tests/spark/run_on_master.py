"""Run Spark plugins on a given master, in a process of their own, and write what they found.

    python -m tests.spark.run_on_master --master spark://127.0.0.1:7077 --store DIR --out DIR \
        plugins.builtin.stuck_hash_history:StuckHashHistory ...
    python -m tests.spark.run_on_master --master sc://127.0.0.1:15002 --ping

A process has one Spark session (`pulsar_lens.plugins.spark.session`), so the cluster tests run the
plugins here, with PULSAR_LENS_SPARK_MASTER set, and compare the files to an in-process run.
Each plugin gets OUT/<slug>/<frame>.parquet and OUT/<slug>/summary.json; OUT/session.json
says which master the session ran on and how long each plugin took. With `--hash-keys N`,
OUT/hashes.json says how many of N random keys the JVM's sticky-key hash
(`plugins.spark.hashing`, forced onto the Java UDF) hashed unlike `core.hashing`. With
`--parts N`, OUT/parts.json says which bulk answers of a synthetic cluster of N topics the
executors built into parts (`plugins.spark.parts`) unlike this process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pulsar_lens.api import AnalysisPlugin


def load_plugin(spec: str) -> AnalysisPlugin:
    """An instance of `module:Class`."""
    module, _, name = spec.partition(":")
    plugin = getattr(importlib.import_module(module), name)()
    assert isinstance(plugin, AnalysisPlugin), spec
    return plugin


def summary_json(summary: Mapping[str, Any]) -> str:
    """A result's summary as canonical JSON (numpy scalars as plain numbers)."""

    def plain(value: Any) -> Any:
        if hasattr(value, "item"):
            return value.item()
        raise TypeError(f"{type(value).__name__} in a summary: {value!r}")

    return json.dumps(summary, default=plain, sort_keys=True)


def run(
    store: Path, out: Path, specs: Sequence[str], *, hash_keys: int = 0, parts: int = 0
) -> None:
    from pulsar_lens.core.store import Store
    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.spark import session

    spark = session.get()
    seconds: dict[str, float] = {}
    for spec in specs:
        plugin = load_plugin(spec)
        started = time.perf_counter()
        output = runner.run(plugin, Store(store), use_cache=False, use_stored=False)
        seconds[plugin.name] = round(time.perf_counter() - started, 2)
        folder = out / plugin.name
        folder.mkdir(parents=True, exist_ok=True)
        for name, frame in output.result.frames.items():
            # a Spark Connect toPandas() leaves its plan metrics in attrs: not data, and not JSON
            plain = frame.copy()
            plain.attrs = {}
            plain.to_parquet(folder / f"{name}.parquet")
        (folder / "summary.json").write_text(summary_json(output.result.summary))
    if hash_keys:
        (out / "hashes.json").write_text(json.dumps(compare_hashes(spark, hash_keys)))
    if parts:
        (out / "parts.json").write_text(json.dumps(compare_parts(spark, parts)))
    about = {
        "master": spark.conf.get("spark.master"),
        "connect": _is_connect(spark),
        "seconds": seconds,
    }
    (out / "session.json").write_text(json.dumps(about))
    session.stop()


def compare_hashes(spark: Any, count: int) -> dict[str, Any]:
    """`count` random keys of every script and length hashed in the executors by the Java UDF
    for each selector and line, against `core.hashing` here: the keys that differ."""
    import random

    import pandas as pd

    from pulsar_lens.core.hashing import PULSAR_LINES, SELECTOR_KINDS, sticky_key_hash
    from pulsar_lens.plugins.spark.hashing import with_sticky_hash
    from tests.jvm.test_sticky_hash import text_keys

    keys = text_keys(random.Random(11), count)
    frame = spark.createDataFrame(pd.DataFrame({"key": keys}), "key string").repartition(4)
    kinds = [(s, p) for s in SELECTOR_KINDS for p in PULSAR_LINES]
    for selector, line in kinds:
        frame = with_sticky_hash(frame, out=f"{selector}_{line}", selector=selector, pulsar=line,
                                 path="jvm")  # fmt: skip
    rows = frame.toPandas()
    differ = [
        (key, selector, line)
        for selector, line in kinds
        for key, found in zip(rows["key"], rows[f"{selector}_{line}"], strict=True)
        if sticky_key_hash(key.encode(), selector=selector, pulsar=line) != found
    ]
    return {"keys": len(rows), "differ": differ[:20], "differing": len(differ)}


def compare_parts(spark: Any, topics: int) -> dict[str, Any]:
    """The bulk answers of a synthetic cluster of `topics` built into parts by the executors,
    against the parts this process builds: the answers, and those whose parts differ."""
    from benchmarks.synth_server import SynthCluster
    from pulsar_lens.collectors.bulkparts import part_of_answer
    from pulsar_lens.plugins.spark.parts import SparkParts
    from tests.collectors.test_bulkparts import is_same_part

    synth = SynthCluster(topics, ["10.0.0.1:8080", "10.0.0.2:8080"], change=0.0, seed=5)
    built = SparkParts(lambda: spark, min_bytes=0)
    differ = []
    for broker, body in synth.current.bulk.items():
        there, here = built.build(body, broker, None), part_of_answer(body, broker, None)
        if not (is_same_part(there, here) and there.index.num_rows > 0):
            differ.append(broker)
    return {"answers": len(synth.current.bulk), "differ": differ}


def ping() -> None:
    from pulsar_lens.plugins.spark import session

    answer = session.get().range(3).count()
    session.stop()
    if answer != 3:
        raise SystemExit(f"range(3).count() answered {answer}")


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.spark.run_on_master")
    parser.add_argument("--master", required=True)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--ping", action="store_true", help="answer one trivial query")
    parser.add_argument("--hash-keys", type=int, default=0, help="random keys to hash")
    parser.add_argument("--parts", type=int, default=0, help="topics of the answers to build")
    parser.add_argument("plugins", nargs="*", help="module:Class of each Spark plugin")
    args = parser.parse_args(argv)
    os.environ["PULSAR_LENS_SPARK_MASTER"] = args.master
    from pulsar_lens.core.settings import Settings
    from pulsar_lens.plugins.spark import session

    session.configure(Settings.from_env().spark)  # this script is its process's entry point
    if args.ping:
        ping()
    elif args.store is None or args.out is None or not args.plugins:
        parser.error("--store, --out and at least one plugin are needed")
    else:
        run(args.store, args.out, args.plugins, hash_keys=args.hash_keys, parts=args.parts)


if __name__ == "__main__":
    main(sys.argv[1:])
