"""A synthetic cluster's admin API answers, as Pulsar 4.0 gives them, through the collector's
own parsers and assembly, the store and the dashboard's data layer; prints one JSON line.

    .venv/bin/python -m benchmarks.synth_admin --topics 100000 --store DIR

The cluster is `benchmarks.synth_cluster`'s shape (20 namespaces of 16 bundles over 3
brokers, 10% partitions, one subscription per topic, a quarter Key_Shared). From it come the
JSON bodies a poll reads: each broker's `broker-stats/topics` (no hash ranges, as in 4.0),
its `ownedNamespaces`, each namespace's bundles, topic and partitioned-topic lists, and the
per-topic `stats` of as many topics as one poll details (DEFAULT_DETAIL_BUDGET), with their
`keyHashRangeArrays`, `keySharedMode` and `activeConsumerName`. Each stage is timed from the
JSON text on (`json.loads` is the client's decoding of the bodies), and the process's peak
RSS after each is reported; the parent reads the whole run's peak with wait4.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.synth_cluster import initial_state, make_shape
from pulsar_lens.collectors.assemble import PollAnswers, build_snapshot
from pulsar_lens.collectors.namespaces import NamespaceListing, parse_boundaries, parse_bundles
from pulsar_lens.collectors.topics import needs_topic_stats, parse_broker_topic_stats
from pulsar_lens.core.errors import ResultNotReady
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.core.values import DEFAULT_DETAIL_BUDGET

BROKERS = 3
CONNECTED = "2026-11-20T10:00:00.000000000Z"


def peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def admin_bodies(topics: int, seed: int = 7) -> dict[str, Any]:
    """The JSON texts of one poll of the synthetic cluster, by what they answer."""
    rng = np.random.default_rng(seed)
    shape = make_shape(topics, brokers=BROKERS, rng=rng)
    state = initial_state(shape, rng)
    brokers = shape.brokers.to_pylist()
    names = shape.topic.to_pylist()
    parents = shape.parent.to_pylist()
    bundle_ns = shape.bundle_ns.to_pylist()
    bundle_name = shape.bundle_name.to_pylist()
    sub_name, sub_type = shape.sub_name.to_pylist(), shape.sub_type.to_pylist()
    sub_mode, consumer = shape.sub_mode.to_pylist(), shape.consumer_name.to_pylist()
    ranges = shape.hash_ranges.to_pylist()
    owner = [brokers[i] for i in state.owner]

    bulk: dict[str, dict[str, Any]] = {b: {} for b in brokers}
    details: dict[str, dict[str, Any]] = {}
    for t, topic in enumerate(names):
        b = int(shape.bundle_of[t])
        ns, bundle = bundle_ns[b], bundle_name[b]
        rate = float(shape.base_rate[t])
        first, last = int(shape.first[t]), int(shape.first[t + 1])
        kind = sub_type[t]
        consumers = [
            {
                "consumerName": consumer[c],
                "address": f"/10.0.{c % 250}.{c % 200}:{40000 + c % 20000}",
                "connectedSince": CONNECTED,
                "msgRateOut": rate / max(1, last - first),
                "msgThroughputOut": rate * float(shape.msg_size[t]) / max(1, last - first),
                "availablePermits": 1000,
                "unackedMessages": 0,
                "blockedConsumerOnUnackedMsgs": False,
                "clientVersion": "Pulsar-CPP-v4.2.0",
                "metadata": {},
            }
            for c in range(first, last)
        ]
        sub = {
            "type": kind,
            "msgBacklog": int(rate * 3),
            "msgRateOut": rate,
            "msgThroughputOut": rate * float(shape.msg_size[t]),
            "msgRateRedeliver": 0.0,
            "unackedMessages": 0,
            "consumers": consumers,
        }
        stats = {
            "msgRateIn": rate,
            "msgRateOut": rate,
            "msgThroughputIn": rate * float(shape.msg_size[t]),
            "msgThroughputOut": rate * float(shape.msg_size[t]),
            "averageMsgSize": float(shape.msg_size[t]),
            "storageSize": int(rate * 1e5),
            "backlogSize": int(rate * 3 * shape.msg_size[t]),
            "publishers": [],
            "subscriptions": {sub_name[t]: sub},
        }
        domains = bulk[owner[b]].setdefault(ns, {}).setdefault(bundle, {})
        domains.setdefault("persistent", {})[topic] = stats
        if needs_topic_stats(stats) and len(details) < DEFAULT_DETAIL_BUDGET:
            full = json.loads(json.dumps(stats))
            detail = full["subscriptions"][sub_name[t]]
            if kind == "Key_Shared":
                detail["keySharedMode"] = sub_mode[t]
                for c, entry in zip(range(first, last), detail["consumers"], strict=True):
                    entry["keyHashRangeArrays"] = [[r["start"], r["end"]] for r in ranges[c]]
            else:
                detail["activeConsumerName"] = consumer[first + int(state.active[t])]
            details[topic] = full

    namespaces = sorted(set(bundle_ns))
    listed: dict[str, list[str]] = {ns: [] for ns in namespaces}
    parted: dict[str, set[str]] = {ns: set() for ns in namespaces}
    for t, topic in enumerate(names):
        ns = bundle_ns[int(shape.bundle_of[t])]
        listed[ns].append(topic)
        if parents[t] is not None:
            parted[ns].add(parents[t])
    per_ns_bundles: dict[str, Any] = {}
    for ns in namespaces:
        idx = [i for i, n in enumerate(bundle_ns) if n == ns]
        bounds = [f"0x{int(shape.lower[i]):08x}" for i in idx] + [
            f"0x{int(shape.upper[idx[-1]]):08x}"
        ]
        per_ns_bundles[ns] = {"boundaries": bounds, "numBundles": len(idx)}
    owned: dict[str, dict[str, Any]] = {b: {} for b in brokers}
    for i, ns in enumerate(bundle_ns):
        owned[owner[i]][f"{ns}/{bundle_name[i]}"] = {
            "broker_assignment": "shared",
            "is_controlled": False,
            "is_active": True,
        }
    return {
        "brokers": brokers,
        "namespaces": namespaces,
        "bulk": {b: json.dumps(v) for b, v in bulk.items()},
        "owned": {b: json.dumps(v) for b, v in owned.items()},
        "bundles": {ns: json.dumps(v) for ns, v in per_ns_bundles.items()},
        "topics": {ns: json.dumps(v) for ns, v in listed.items()},
        "partitioned": {ns: json.dumps(sorted(v)) for ns, v in parted.items()},
        "details": {t: json.dumps(v) for t, v in details.items()},
        "counts": {
            "topics": len(names),
            "subscriptions": len(names),
            "consumers": int(shape.first[-1]),
            "detailed": len(details),
        },
    }


GROUPS = ("bulk", "owned", "bundles", "topics", "partitioned", "details")


def decode(bodies: dict[str, Any]) -> dict[str, Any]:
    """The JSON texts of admin_bodies decoded, as the client decodes them."""
    return {group: {k: json.loads(v) for k, v in bodies[group].items()} for group in GROUPS}


def poll_answers(decoded: dict[str, Any], brokers: list[str], namespaces: list[str]) -> PollAnswers:
    """The decoded bodies through the collector's parsers, as a poll gathers them."""
    return PollAnswers(
        cluster="synthetic",
        collected_at=dt.datetime.now(dt.UTC),
        broker_ids=tuple(brokers),
        leader=brokers[0],
        web_urls={b: f"http://{b}" for b in brokers},
        load_reports={b: None for b in brokers},
        versions={b: "4.0.7" for b in brokers},
        owned=decoded["owned"],
        bulk={b: parse_broker_topic_stats(decoded["bulk"][b], b) for b in brokers},
        namespaces=tuple(namespaces),
        listings={
            ns: NamespaceListing(
                namespace=ns,
                bundles=parse_bundles(ns, decoded["bundles"][ns]),
                boundaries=parse_boundaries(decoded["bundles"][ns]),
                topics=tuple(decoded["topics"][ns]),
                partitioned=tuple(decoded["partitioned"][ns]),
            )
            for ns in namespaces
        },
        topic_stats=decoded["details"],
    )


def synthetic_snapshot(topics: int) -> Snapshot:
    """One poll of the synthetic cluster of `topics` topics, as the collector assembles it."""
    bodies = admin_bodies(topics)
    decoded = decode(bodies)
    return build_snapshot(poll_answers(decoded, bodies["brokers"], bodies["namespaces"]))


def run(topics: int, store_dir: Path, slugs: list[str]) -> dict[str, Any]:
    stages: dict[str, dict[str, float]] = {}

    def stage(name: str, started: float) -> None:
        stages[name] = {
            "seconds": round(time.perf_counter() - started, 3),
            "peak_rss_mib": peak_mib(),
        }

    started = time.perf_counter()
    bodies = admin_bodies(topics)
    stage("generate the admin JSON (not the collector's)", started)
    json_bytes = sum(len(v) for group in GROUPS for v in bodies[group].values())

    started = time.perf_counter()
    decoded = decode(bodies)
    counts = bodies["counts"]
    brokers, namespaces = bodies["brokers"], bodies["namespaces"]
    del bodies
    stage("decode the JSON bodies", started)

    started = time.perf_counter()
    answers = poll_answers(decoded, brokers, namespaces)
    stage("parse: bulk entries, bundles and listings", started)

    started = time.perf_counter()
    snapshot = build_snapshot(answers)
    stage("assemble the snapshot (build_snapshot)", started)
    del decoded, answers
    rows = {
        "topics": len(snapshot.topics),
        "subscriptions": len(snapshot.subscriptions),
        "consumers": len(snapshot.consumers),
        "bundles": len(snapshot.bundles),
        "errors": len(snapshot.errors),
    }

    store = Store(store_dir)
    started = time.perf_counter()
    store.write(snapshot)
    stage("store.write", started)
    del snapshot

    from pulsar_lens.plugins.precompute import compute_results
    from pulsar_lens.plugins.registry import discover
    from pulsar_lens.plugins.results import ResultStore

    started = time.perf_counter()
    registry = discover()
    outcomes = compute_results(store, list(registry), results=ResultStore(store.root))
    stage("the collector's analyses of the snapshot (compute_results)", started)
    failed = [f"{o.plugin}: {o.error}" for o in outcomes if o.error is not None]

    from pulsar_lens.dashboard import data

    root = str(store_dir.resolve())
    started = time.perf_counter()
    index = data.full_index(root)
    sid = str(index["snapshot_id"].iloc[-1])
    frames = data.tables(root, sid, "topics", "subscriptions", "consumers", "bundles", "brokers")
    stage("data layer: index and the newest tables", started)
    read_rows = {k: len(v) for k, v in frames.items()}
    plugin_seconds: dict[str, float] = {}
    spark_pages: list[str] = []  # their results come from Spark jobs, never made on a read
    for slug in slugs:
        t0 = time.perf_counter()
        try:
            data.run_plugin(root, slug)
        except ResultNotReady:
            spark_pages.append(slug)
            continue
        plugin_seconds[slug] = round(time.perf_counter() - t0, 3)
    stages["data layer: run_plugin of every page"] = {
        "seconds": round(sum(plugin_seconds.values()), 3),
        "peak_rss_mib": peak_mib(),
    }
    return {
        "topics_requested": topics,
        "generated": counts,
        "json_bytes": json_bytes,
        "snapshot_rows": rows,
        "read_rows": read_rows,
        "stages": stages,
        "run_plugin_seconds": plugin_seconds,
        "pages_of_spark_jobs_not_run": spark_pages,
        "analysis_failures": failed,
        "peak_rss_mib": peak_mib(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--slugs", default="", help="comma-separated plugin pages to run")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    slugs = [s for s in args.slugs.split(",") if s]
    print(json.dumps(run(args.topics, args.store, slugs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
