"""Server-side time of every dashboard page on synthetic clusters of 1,000 to 100,000 topics.

    .venv/bin/python benchmarks/dashboard.py [--sizes 1000,10000,100000] [--polls 3] [--repeat 1]
    .venv/bin/python -m benchmarks.dashboard      (what `make bench` runs)

For each size, writes `polls` snapshots of a synthetic cluster (3 brokers, 10 namespaces of
16 bundles, one of which changes owner every poll; 70% plain topics, 30% partitions of
10-partition topics; a Key_Shared subscription with broker-shaped ranges from our 4.0
consistent-hashing model on every tenth plain topic, some with draining hashes; Shared and
Exclusive subscriptions on the other plain topics, Failover ones on the partitions) into a
store of its own in a temporary folder. It then runs the Overview and every plugin page (the
Cluster pages and the generic analysis pages, as the navigation lists them) with Streamlit's
AppTest, which executes the whole page script server side, in two modes:

- on-demand: no stored results, so the page loads its inputs and analyses them itself;
- stored: after `plugins.precompute.compute_results` stored the default result of every
  plugin the collect process analyses after each poll (light ones); the page reads and draws it.

A Spark plugin's page (the History section) never analyses: it shows the newest result a job
stored, and no job runs here (`benchmarks/spark.py` measures the jobs), so its figures are the
page as it stands before the first job, the same in both modes, and its provenance is not checked.

`cold` is a fresh AppTest after clearing `st.cache_data`, `st.cache_resource` and the
runner's in-memory cache (the operating system's file cache stays warm; module imports are
paid once, by a warm-up run); `warm` is the second run of the same AppTest, the rerun a
widget change or the auto-refresh causes. With `--repeat N` each figure is the best of N.
It also prints how long `compute_results` took for each light plugin at each size (analysis plus
writing the result: the background cost of every snapshot) and how large the stored result is.

Budget for `stored cold`: under 1.0 s at 10,000 topics and under 1.5 s at 100,000 topics,
marked ✓ or ✗. Figures are reported, never asserted: the exit code is 0 unless something
crashes. A run that raised, drew an `st.error`, or whose plugin page drew an analysis made
on demand where a stored result was expected (or the reverse) gets a warning row.

Generating is kept fast enough for 100,000 topics by building the records of the topics,
subscriptions, consumers and draining hashes once (they are the same in every poll) and
converting them to Arrow once; each poll then goes through `Store.write` with those tables
and a snapshot id digested from the cluster and poll time instead of every record.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# `dashboard` package; drop the folder before importing the project.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import pyarrow as pa  # noqa: E402
import streamlit as st  # noqa: E402
import streamlit.logger  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import pulsar_lens.core.store  # noqa: E402
from pulsar_lens.core.digest import digest  # noqa: E402
from pulsar_lens.core.model import (  # noqa: E402
    POLLED_TABLES,
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
    content_table,
)
from pulsar_lens.core.selectors import ConsistentHashingSelector, Consumer  # noqa: E402
from pulsar_lens.core.store import Store  # noqa: E402
from pulsar_lens.dashboard import navigation  # noqa: E402
from pulsar_lens.plugins import runner  # noqa: E402
from pulsar_lens.plugins.engines import engine_of  # noqa: E402
from pulsar_lens.plugins.precompute import compute_results  # noqa: E402
from pulsar_lens.plugins.registry import PLUGIN_DIRS_ENV, LoadedPlugin, discover  # noqa: E402
from pulsar_lens.plugins.results import RESULTS_DIR, ResultStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "dashboard" / "app.py"
CLUSTER = "bench"
NAMESPACES = 10
BUNDLES = 16
BROKERS = tuple(f"broker-{i}:8080" for i in range(3))
PARTITIONS = 10
STATIC_TABLES = ("topics", "subscriptions", "consumers", "draining_hashes")
BUDGET_SECONDS = {10_000: 1.0, 100_000: 1.5}  # stored cold, by topics
TIMEOUT_SECONDS = 1800.0  # an on-demand page at 100,000 topics may take minutes
OVERVIEW = "overview"
STORED_CAPTION = "analysed once when the snapshot arrived"  # components.provenance()


# --- the synthetic cluster -----------------------------------------------------------------


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


@dataclass(frozen=True)
class Cluster:
    """The records every poll sees alike; only the bundles (their owners) change by poll."""

    topics: tuple[TopicRecord, ...]
    subscriptions: tuple[SubscriptionRecord, ...]
    consumers: tuple[ConsumerRecord, ...]
    draining_hashes: tuple[DrainingHashRecord, ...]


def synthetic_cluster(topics: int) -> Cluster:
    ranges = key_shared_ranges()
    per_ns = max(1, topics // NAMESPACES)
    t, s, c, d = [], [], [], []
    for n in range(NAMESPACES):
        namespace = f"{CLUSTER}/ns-{n}"
        for i, (topic, parent, part) in enumerate(topic_names(namespace, per_ns)):
            t.append(TopicRecord(topic, CLUSTER, namespace, partitioned_topic=parent,
                                 partition_index=part, owner_broker=BROKERS[i % 3],
                                 backlog_size=i * 10))  # fmt: skip
            sub, cons, drain = subscriptions_of(topic, i, parent, ranges)
            s.append(sub)
            c += cons
            d += drain
    return Cluster(tuple(t), tuple(s), tuple(c), tuple(d))


def synthetic_snapshot(cluster: Cluster, poll: int, at: dt.datetime) -> Snapshot:
    bundles = [b for n in range(NAMESPACES) for b in bundles_of(f"{CLUSTER}/ns-{n}", poll)]
    return Snapshot(
        cluster=CLUSTER,
        collected_at=at,
        brokers=tuple(BrokerRecord(x, version="4.0.7") for x in BROKERS),
        bundles=tuple(bundles),
        topics=cluster.topics,
        subscriptions=cluster.subscriptions,
        consumers=cluster.consumers,
        draining_hashes=cluster.draining_hashes,
        requests=42,
    )


@contextlib.contextmanager
def reused_tables(cluster: Cluster, at: dt.datetime) -> Iterator[None]:
    """Within: `Store.write` converts the cluster's static records to Arrow once, not every
    poll, and ids a snapshot by its cluster and time instead of a digest of every table.

    At 100,000 topics those two steps take ~30 s a poll; the files written are the same.
    """
    tables = {name: content_table(name, getattr(cluster, name)) for name in STATIC_TABLES}

    def content_tables(snapshot: Snapshot) -> dict[str, pa.Table]:
        found = {}
        for name in POLLED_TABLES:
            records, table = snapshot.records(name), tables.get(name)
            same = table is not None and table.num_rows == len(records)
            found[name] = table if same else content_table(name, records)
        return found

    def snapshot_id(snapshot: Snapshot, tables: Any = None) -> str:
        return digest({"cluster": snapshot.cluster, "collected_at": snapshot.collected_at})

    with (
        mock.patch.object(Snapshot, "content_tables", content_tables),
        mock.patch.object(pulsar_lens.core.store, "snapshot_id", snapshot_id),
    ):
        yield


def write_store(root: Path, topics: int, polls: int) -> float:
    """Write `polls` snapshots 10 s apart, the newest now; the seconds it took."""
    started = time.perf_counter()
    now = dt.datetime.now(dt.UTC)
    cluster = synthetic_cluster(topics)
    store = Store(root)
    with reused_tables(cluster, now):
        for poll in range(polls):
            at = now - dt.timedelta(seconds=10 * (polls - 1 - poll))
            store.write(synthetic_snapshot(cluster, poll, at))
    return time.perf_counter() - started


# --- running pages ---------------------------------------------------------------------------


@dataclass
class Figures:
    """Seconds per mode of one page at one size (NaN: not measured), and what went wrong."""

    stored_cold: float = math.nan
    stored_warm: float = math.nan
    on_demand_cold: float = math.nan
    problems: list[str] = field(default_factory=list)


def _plugin_page(slug: str) -> None:
    from pulsar_lens.dashboard.app_pages.analysis import draw_analysis

    draw_analysis(slug)


def new_app(page: str) -> AppTest:
    """The Overview through the app's entry script (its default page), or a plugin's page
    as the app draws it."""
    if page == OVERVIEW:
        return AppTest.from_file(str(APP), default_timeout=TIMEOUT_SECONDS)
    return AppTest.from_function(_plugin_page, args=(page,), default_timeout=TIMEOUT_SECONDS)


def clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()
    runner.clear_cache()


def timed_run(at: AppTest, what: str, problems: list[str], *, stored: bool | None = None) -> float:
    """Seconds of one run; an exception or `st.error` on the page is noted in `problems`, and
    so is a plugin page whose views did not come from where `stored` says they should."""
    started = time.perf_counter()
    try:
        at.run()
    except Exception as exc:  # e.g. the timeout: report it, go on with the other pages
        problems.append(f"{what}: the run failed: {type(exc).__name__}: {exc}")
        return math.nan
    seconds = time.perf_counter() - started
    problems += [f"{what}: exception: {_line(e.message)}" for e in at.exception]
    problems += [f"{what}: st.error: {_line(e.value)}" for e in at.error]
    if stored is not None and not at.exception and not at.error:
        read = any(STORED_CAPTION in c.value for c in at.caption)
        if read != stored:
            found = "the stored result" if read else "an analysis on demand"
            problems.append(f"{what}: the page drew {found}")
    return seconds


def _line(text: str) -> str:
    first = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return first[:160]


def cold(
    page: str, problems: list[str], what: str, *, stored: bool | None = None
) -> tuple[float, AppTest]:
    clear_caches()
    at = new_app(page)
    return timed_run(at, what, problems, stored=stored), at


def _plugin(page: str, stored: bool, per_poll: Collection[str]) -> bool | None:
    """What a plugin page's provenance must say; nothing for the Overview, nor for a page
    that shows a job's result (no job runs here)."""
    return stored if page in per_poll else None


def best(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def measure_on_demand(
    pages: Sequence[str], figures: dict[str, Figures], repeat: int, per_poll: Collection[str]
) -> None:
    for page in pages:
        fig = figures[page]
        for _ in range(repeat):
            expect = _plugin(page, False, per_poll)
            seconds, _at = cold(page, fig.problems, "on-demand cold", stored=expect)
            fig.on_demand_cold = best(fig.on_demand_cold, seconds)


def measure_stored(
    pages: Sequence[str], figures: dict[str, Figures], repeat: int, per_poll: Collection[str]
) -> None:
    for page in pages:
        fig = figures[page]
        for _ in range(repeat):
            expect = _plugin(page, True, per_poll)
            seconds, at = cold(page, fig.problems, "stored cold", stored=expect)
            fig.stored_cold = best(fig.stored_cold, seconds)
            fig.stored_warm = best(fig.stored_warm, timed_run(at, "stored warm", fig.problems))


@dataclass(frozen=True)
class Computed:
    """One plugin's `compute_results` at one size."""

    seconds: float  # wall clock, storing the result included
    status: str
    stored_bytes: int


def compute_each(store: Store, plugins: Sequence[LoadedPlugin]) -> dict[str, Computed]:
    """`compute_results` one plugin at a time, to time each. `plugins` are those the collect
    process analyses after each poll: `compute_results` leaves the others to the job worker
    and returns no outcome for them."""
    results = ResultStore(store.root)
    out = {}
    for plugin in plugins:
        started = time.perf_counter()
        outcomes = compute_results(store, [plugin], results=results)
        if len(outcomes) != 1:
            raise RuntimeError(f"compute_results gave {len(outcomes)} outcomes for {plugin.name}")
        outcome = outcomes[0]
        seconds = time.perf_counter() - started
        status = outcome.status if outcome.error is None else f"{outcome.status}: {outcome.error}"
        folder = store.root / RESULTS_DIR / plugin.name
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        out[plugin.name] = Computed(seconds, status, size)
    return out


def page_list(plugins: Sequence[LoadedPlugin]) -> list[str]:
    """The Overview, then every plugin page in the navigation's order."""
    plan = navigation.page_plan(plugins)
    slugs = [s.target for specs in plan.values() for s in specs if s.kind == "analysis"]
    return [OVERVIEW, *slugs]


@dataclass
class SizeRun:
    topics: int
    generate_seconds: float
    store_bytes: int
    figures: dict[str, Figures]
    computed: dict[str, Computed]


def bench_size(topics: int, polls: int, repeat: int, *, warm_up: bool) -> SizeRun:
    work = Path(tempfile.mkdtemp(prefix=f"pulsar-lens-bench-{topics}-"))
    try:
        root = work / "store"
        generated = write_store(root, topics, polls)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(
            f"{topics:>9,} topics: {polls} polls generated in {generated:.1f}s "
            f"({size / 1e6:.1f} MB on disk)",
            flush=True,
        )
        os.environ["PULSAR_LENS_STORE"] = str(root)
        plugins = list(discover())
        per_poll = [p for p in plugins if engine_of(p).per_poll]
        live = {p.name for p in per_poll}
        pages = page_list(plugins)
        figures = {page: Figures() for page in pages}
        if warm_up:  # imports and first-use setup, which a server pays once
            for page in pages:
                cold(page, [], "warm-up")
        store = Store(root)
        measure_on_demand(pages, figures, repeat, live)
        computed = compute_each(store, per_poll)
        measure_stored(pages, figures, repeat, live)
        total = sum(c.seconds for c in computed.values())
        print(f"{'':>9}  measured; compute_results took {total:.1f}s in all", flush=True)
        return SizeRun(topics, generated, size, figures, computed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- the report ----------------------------------------------------------------------------


def _s(seconds: float) -> str:
    return "      —" if math.isnan(seconds) else f"{seconds:7.3f}"


def _budget(topics: int, seconds: float) -> str:
    budget = BUDGET_SECONDS.get(topics)
    if budget is None or math.isnan(seconds):
        return ""
    return f"{'✓' if seconds < budget else '✗'} < {budget:.1f}s"


def _ratio(fig: Figures) -> str:
    if math.isnan(fig.on_demand_cold) or math.isnan(fig.stored_cold) or fig.stored_cold <= 0:
        return "—"
    return f"{fig.on_demand_cold / fig.stored_cold:.1f}x"


def _row(page: str, topics: str, cold: str, warm: str, on_demand: str, budget: str) -> str:
    return f"{page:<22}{topics:>9}{cold:>13}{warm:>13}{on_demand:>16}  {budget}"


def report(runs: Sequence[SizeRun], polls: int) -> None:
    pages = list(dict.fromkeys(p for run in runs for p in run.figures))
    print()
    print(f"Page time, server side, seconds ({polls} polls stored)")
    print(_row("page", "topics", "stored cold", "stored warm", "on-demand cold", "budget"))
    for page in pages:
        ratios = []
        for run in runs:
            fig = run.figures.get(page)
            if fig is None:
                continue
            seconds = (_s(fig.stored_cold), _s(fig.stored_warm), _s(fig.on_demand_cold))
            print(_row(page, f"{run.topics:,}", *seconds, _budget(run.topics, fig.stored_cold)))
            for problem in dict.fromkeys(fig.problems):
                print(f"  WARNING at {run.topics:,} topics, {problem}")
            ratios.append(f"{_ratio(fig)} at {run.topics:,}")
        print(f"{'':<22}on-demand / stored cold: {', '.join(ratios)}")
    print()
    print(
        "compute_results per light plugin (analyse + store the default result; seconds, "
        "stored MB; Spark plugins run as jobs: benchmarks/spark.py)"
    )
    slugs = list(dict.fromkeys(s for run in runs for s in run.computed))
    print(f"{'plugin':<22}" + "".join(f"{f'{run.topics:,} topics':>22}" for run in runs))
    for slug in slugs:
        cells = []
        for run in runs:
            c = run.computed.get(slug)
            cells.append("—" if c is None else f"{c.seconds:.2f}s {c.stored_bytes / 1e6:6.2f} MB")
        print(f"{slug:<22}" + "".join(f"{cell:>22}" for cell in cells))
    totals = [sum(c.seconds for c in run.computed.values()) for run in runs]
    print(f"{'all plugins':<22}" + "".join(f"{f'{t:.2f}s':>22}" for t in totals))
    for run in runs:
        for slug, c in run.computed.items():
            if c.status not in ("ok", "kept"):
                print(f"  WARNING at {run.topics:,} topics, {slug}: {c.status}")
    print()
    generated = ", ".join(
        f"{r.topics:,} topics in {r.generate_seconds:.1f}s ({r.store_bytes / 1e6:.1f} MB)"
        for r in runs
    )
    print(f"generated ({polls} polls): {generated}")
    print(
        "cold: st.cache_data, st.cache_resource and the runner cache cleared, new AppTest; "
        "warm: its rerun; stored: after compute_results; on-demand: no stored results"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="topic counts: 1000,10000")
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="best of N for every figure")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    _quiet()
    os.environ["PULSAR_LENS_POLL_INTERVAL"] = "6h"  # the synthetic polls never look stale
    os.environ[PLUGIN_DIRS_ENV] = ""  # the built-in plugins (and installed ones) only
    runs = [
        bench_size(topics, args.polls, max(1, args.repeat), warm_up=i == 0)
        for i, topics in enumerate(sizes)
    ]
    report(runs, args.polls)
    return 0


def _quiet() -> None:
    """Streamlit's bare-mode warnings (no `streamlit run`) would bury the table."""
    st.config.set_option("logger.level", "error")
    streamlit.logger.set_log_level(logging.ERROR)
    for name in ("plugins", "dashboard"):
        logging.getLogger(name).setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
