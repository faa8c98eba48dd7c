"""Server-side time to build each dashboard page on a synthetic 10,000-topic cluster.

    .venv/bin/python benchmarks/dashboard.py [--topics 10000] [--baseline-topics 1000] [--polls 3]

Writes `polls` snapshots of a synthetic cluster (3 brokers, 10 namespaces of 16 bundles,
plain and partitioned topics; Key_Shared subscriptions with broker-shaped ranges from our
4.0 consistent-hashing model, Shared, Exclusive and Failover ones; some draining hashes) into
a temporary store, then runs every page with Streamlit's AppTest: cold (caches cleared) and
warm (the rerun a widget change or the auto-refresh causes), each page on its own copy of the
store so no cache carries over. The baseline is the same page on
the same cluster shape with `baseline-topics` topics, in the same run. Target: < 1.5 s cold.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# `dashboard` package; drop the folder before importing the project.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from streamlit.testing.v1 import AppTest  # noqa: E402

from core.model import (  # noqa: E402
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
)
from core.selectors import ConsistentHashingSelector, Consumer  # noqa: E402
from core.store import Store  # noqa: E402
from dashboard.navigation import DEDICATED  # noqa: E402
from plugins.registry import discover  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "dashboard" / "app.py"
PAGES = ("overview", "key_shared", "stuck_hashes", "failover", "bundles", "subscriptions")
TARGET_SECONDS = 1.5
NAMESPACES = 10
BUNDLES = 16
BROKERS = tuple(f"broker-{i}:8080" for i in range(3))
PARTITIONS = 10


def key_shared_ranges() -> dict[str, tuple[tuple[int, int], ...]]:
    selector = ConsistentHashingSelector(points=100)
    for name in ("ks-a", "ks-b", "ks-c"):
        selector.add(Consumer(name))
    return {c.name: tuple(r) for c, r in selector.ranges().items()}


def topic_names(namespace: str, topics: int) -> list[tuple[str, str | None, int]]:
    """(topic, partitioned parent, partition index): 70% plain, 30% partitions of 10."""
    plain = int(topics * 0.7)
    out: list[tuple[str, str | None, int]] = [
        (f"persistent://{namespace}/t-{i}", None, -1) for i in range(plain)
    ]
    for p in range((topics - plain) // PARTITIONS):
        parent = f"persistent://{namespace}/pt-{p}"
        out += [(f"{parent}-partition-{i}", parent, i) for i in range(PARTITIONS)]
    return out


def bundles_of(namespace: str, poll: int) -> list[BundleRecord]:
    step = 2**32 // BUNDLES
    bounds = [i * step for i in range(BUNDLES)] + [0xFFFFFFFF]
    out = []
    for i in range(BUNDLES):
        owner = BROKERS[(i + (poll if i == 0 else 0)) % len(BROKERS)]
        bundle = f"0x{bounds[i]:08x}_0x{bounds[i + 1]:08x}"
        out.append(
            BundleRecord(namespace, namespace.split("/")[0], bundle, bounds[i], bounds[i + 1],
                         owner_broker=owner, topic_count=0)
        )  # fmt: skip
    return out


def subscriptions_of(
    topic: str, index: int, parent: str | None, ranges: dict[str, tuple[tuple[int, int], ...]]
) -> tuple[SubscriptionRecord, list[ConsumerRecord], list[DrainingHashRecord]]:
    if parent is not None:
        names = ["fo-1", "fo-2", "fo-3"]
        active = names[index % 3]
        sub = SubscriptionRecord(topic, "fo", "Failover", msg_backlog=index % 7,
                                 active_consumer_name=active, consumer_count=3)  # fmt: skip
        return sub, [ConsumerRecord(topic, "fo", n) for n in names], []
    if index % 10 == 0:
        draining = [
            DrainingHashRecord(topic, "ks", "ks-a", h, 2, 3) for h in (101, 2002, 30003)
        ] if index % 200 == 0 else []  # fmt: skip
        sub = SubscriptionRecord(topic, "ks", "Key_Shared", msg_backlog=index % 50,
                                 key_shared_mode="AUTO_SPLIT", consumer_count=3,
                                 draining_hashes_count=len(draining))  # fmt: skip
        cons = [ConsumerRecord(topic, "ks", n, hash_ranges=r) for n, r in ranges.items()]
        return sub, cons, draining
    kind, count = ("Shared", 2) if index % 2 else ("Exclusive", 1)
    sub = SubscriptionRecord(topic, "s", kind, msg_backlog=index % 1000, consumer_count=count)
    return sub, [ConsumerRecord(topic, "s", f"c-{j}") for j in range(count)], []


def synthetic_snapshot(topics: int, poll: int, at: dt.datetime) -> Snapshot:
    ranges = key_shared_ranges()
    per_ns = max(1, topics // NAMESPACES)
    t, s, c, d, b = [], [], [], [], []
    for n in range(NAMESPACES):
        namespace = f"bench/ns-{n}"
        b += bundles_of(namespace, poll)
        for i, (topic, parent, part) in enumerate(topic_names(namespace, per_ns)):
            t.append(TopicRecord(topic, "bench", namespace, partitioned_topic=parent,
                                 partition_index=part, owner_broker=BROKERS[i % 3],
                                 backlog_size=i * 10))  # fmt: skip
            sub, cons, drain = subscriptions_of(topic, i, parent, ranges)
            s.append(sub)
            c += cons
            d += drain
    return Snapshot(
        cluster="bench",
        collected_at=at,
        brokers=tuple(BrokerRecord(x, version="4.0.7") for x in BROKERS),
        bundles=tuple(b),
        topics=tuple(t),
        subscriptions=tuple(s),
        consumers=tuple(c),
        draining_hashes=tuple(d),
        requests=42,
    )


def write_store(root: Path, topics: int, polls: int) -> float:
    store = Store(root)
    now = dt.datetime.now(dt.UTC)
    started = time.perf_counter()
    for poll in range(polls):
        at = now - dt.timedelta(seconds=10 * (polls - 1 - poll))
        store.write(synthetic_snapshot(topics, poll, at))
    return time.perf_counter() - started


def run_page(page: str, store: Path) -> tuple[float, float]:
    """Seconds to build `page` (AppTest runs the whole script server side): cold, then warm.

    The app first opens on a scratch store (an empty one), so that run warms nothing of
    `store`; the page then reads `store`, which no cache has seen.
    """
    os.environ["PULSAR_LENS_STORE"] = str(store.parent / "empty")
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.run()
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py")
    os.environ["PULSAR_LENS_STORE"] = str(store)
    return _timed(at, page), _timed(at, page)


def _timed(at: AppTest, what: str) -> float:
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise RuntimeError(f"{what}: {at.exception[0].message}")
    return seconds


def run_analysis(slug: str, store: Path) -> tuple[float, float]:
    """The generic analysis page of plugin `slug`, cold then warm."""

    def script(slug: str) -> None:
        from dashboard.app_pages.analysis import draw_analysis

        draw_analysis(slug)

    os.environ["PULSAR_LENS_STORE"] = str(store)
    at = AppTest.from_function(script, args=(slug,), default_timeout=300)
    return _timed(at, slug), _timed(at, slug)


def measure(root: Path, targets: list[str]) -> dict[str, tuple[float, float]]:
    """Per page: (cold seconds, warm seconds), each page on its own copy of the store."""
    from plugins import runner

    os.environ["PULSAR_LENS_POLL_INTERVAL"] = "1h"
    results = {}
    for i, target in enumerate(targets):
        fresh = root.parent / f"{root.name}-{i}" / "store"
        shutil.copytree(root, fresh)
        runner.clear_cache()  # keyed by snapshot ids, which the copies share
        run = run_page if target in PAGES else run_analysis
        results[target] = run(target, fresh)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--baseline-topics", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=3)
    args = parser.parse_args(argv)
    generic = sorted(  # Spark analyses wait for a click on their page: nothing to time
        p.name
        for p in discover(entry_points=False)
        if p.name not in DEDICATED and p.engine == "light"
    )
    targets = [*PAGES, *generic]
    # shown at once below LARGE_CLUSTER_TOPICS, on demand above: timed on their own
    on_demand = ["key-shared-map", "failover-assignment"]
    work = Path(tempfile.mkdtemp(prefix="pulsar-lens-bench-"))
    try:
        big, small = work / "big", work / "small"
        wrote = write_store(big, args.topics, args.polls)
        write_store(small, args.baseline_topics, args.polls)
        print(f"store: {args.topics} topics x {args.polls} polls written in {wrote:.1f}s")
        base = measure(small, [*targets, *on_demand])
        result = measure(big, [*targets, *on_demand])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report({k: result[k] for k in targets}, base, args)
    print(
        "whole-cluster analyses (on demand above 20,000 topics on Key_Shared, 2,000 on Failover):"
    )
    report({k: result[k] for k in on_demand}, base, args)
    return 0 if all(result[t][0] < TARGET_SECONDS for t in targets) else 1


def report(result: dict[str, tuple[float, float]], base: dict[str, tuple[float, float]],
           args: argparse.Namespace) -> None:  # fmt: skip
    print(f"{'page':<22}{'cold s':>8}{'warm s':>8}{'base s':>8}{'ratio':>8}  target")
    for page, (cold, warm) in result.items():
        b = base[page][0]
        verdict = "ok" if cold < TARGET_SECONDS else f"OVER {TARGET_SECONDS}s"
        print(f"{page:<22}{cold:8.3f}{warm:8.3f}{b:8.3f}{cold / b:8.1f}x  {verdict}")
    print(
        f"cold: caches cleared; warm: the rerun; base: {args.baseline_topics} topics; "
        f"ratio: cold {args.topics} topics / cold base"
    )


if __name__ == "__main__":
    sys.exit(main())
