"""`pulsar-lens collect` over several clusters: one polling loop each, side by side, one store.

The clusters are the settings file's `[[clusters]]` tables. Each loop has its own backoff, so
an unreachable cluster never delays another; each cluster's snapshots are analysed on their
own (`core.clusterview`), by the light plugins and the Spark jobs alike. `--probe` probes
those bundles in every cluster, each with its own connection settings. Key sampling and the
unload drill act on one cluster named by the admin URL, so they are refused (or, for the
drill, not offered) here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import threading

from pulsar_lens.cli.collect_parts import (
    Analyses,
    HeartbeatPrinter,
    SourceFactory,
    poll_timing,
    stop_on_sigterm,
)
from pulsar_lens.cli.metrics_endpoint import MetricsEndpoint
from pulsar_lens.cli.probing import probe_hooks
from pulsar_lens.collectors.health import HealthRecorder
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.collectors.loop_group import LoopGroup
from pulsar_lens.core.mutations import mutations_allowed
from pulsar_lens.core.settings import Settings, format_duration
from pulsar_lens.core.store import Store
from pulsar_lens.core.storeroot import check_root

ONE_CLUSTER_ONLY = "--sample-keys and PULSAR_LENS_KEY_SAMPLING"


def run_clusters(args: argparse.Namespace, settings: Settings) -> int:
    """Poll every cluster of `settings` until stopped (or the bounded run ends)."""
    names = [str(c.name) for c in settings.clusters]
    if args.admin_url:
        print(
            f"pulsar-lens collect: --admin-url picks one cluster, but the settings file lists "
            f"{len(names)} ({', '.join(names)}); drop --admin-url to poll them all",
            file=sys.stderr,
        )
        return 2
    if args.sample_keys or settings.key_sampling:
        print(
            f"pulsar-lens collect: {ONE_CLUSTER_ONLY} work on one cluster; the settings file "
            f"lists {len(names)} ({', '.join(names)})",
            file=sys.stderr,
        )
        return 2
    timing = poll_timing(args, settings)
    if timing is None:
        return 2
    interval, retention = timing
    store = Store(check_root(args.store or settings.store_dir, writable=True))
    probes = [  # refused (SettingsError) before anything starts
        probe_hooks(args, settings, store, str(c.admin_url), cluster=c) for c in settings.clusters
    ]
    health = HealthRecorder(
        store.root,
        interval=interval.total_seconds(),
        deadline=settings.poll_deadline.total_seconds(),
        detail_budget=settings.detail_budget,
        clusters=names,
    )
    metrics = MetricsEndpoint(
        store,
        settings.metrics.with_port(args.metrics_port, default=0),
        health=health,
        clusters=names,
        plugin_dirs=settings.plugin_dirs,
        plugin_limits=settings.plugin_limits,
    )
    factory: SourceFactory = args.source_factory
    printer = HeartbeatPrinter()
    sources = []
    analyses: Analyses | None = None
    loops: list[PollLoop] = []
    try:
        metrics.start()
        for cluster in settings.clusters:
            assert cluster.admin_url is not None  # core.config requires it of a file's cluster
            source = factory(cluster.admin_url, args.namespaces, cluster=cluster, settings=settings)
            sources.append(source)
        spark_jobs = not (args.once or args.max_polls)  # as with one cluster
        analyses = Analyses(
            store,
            spark_jobs=spark_jobs,
            clusters=names,
            settings=settings,
            then=metrics.analysed,
            on_pass=(health.record_analyses, metrics.record_analyses),
        )
        lock = threading.Lock()
        for cluster, source, probe in zip(settings.clusters, sources, probes, strict=True):
            poll, beat = source.poll, metrics.wrap(health.wrap(analyses.after(printer)))
            if probe is not None:
                poll, beat = probe.wrap(poll), probe.after(beat)
            loops.append(
                PollLoop(
                    poll,
                    store,
                    interval=interval.total_seconds(),
                    retention=retention,
                    diff=source.diff,
                    carry=source.carry,
                    on_heartbeat=beat,
                    max_polls=1 if args.once else args.max_polls,
                    cluster=cluster.name,
                    housekeeping_lock=lock,
                    deadline=settings.poll_deadline.total_seconds(),
                    detail_budget=settings.detail_budget,
                )
            )
        group = LoopGroup(loops)
        _announce(args, settings, store, interval)
        with stop_on_sigterm(group, analyses):
            group.run()
        if (args.once or args.max_polls) and not group.stopped:
            analyses.finish()
    finally:
        if analyses is not None:
            analyses.close()
        for probe in probes:
            if probe is not None:
                probe.close()
        metrics.close()
        for source in sources:
            source.close()
    return _outcome(loops, printer)


def _announce(
    args: argparse.Namespace, settings: Settings, store: Store, interval: dt.timedelta
) -> None:
    if args.once:
        return
    listed = ", ".join(str(c.name) for c in settings.clusters)
    print(
        f"collecting from {len(settings.clusters)} clusters ({listed}) into {store.root} "
        f"every {format_duration(interval)}",
        file=sys.stderr,
        flush=True,
    )
    if mutations_allowed(settings.mutations):
        print(
            "pulsar-lens collect: the unload drill runs only when one cluster is collected",
            file=sys.stderr,
            flush=True,
        )


def _outcome(loops: list[PollLoop], printer: HeartbeatPrinter) -> int:
    """0 when every cluster stored a snapshot; else 1, naming each that did not and why."""
    failed = [loop for loop in loops if loop.last_success is None]
    for loop in failed:
        beat = printer.last_of.get(loop.cluster)
        if beat is not None and beat.write_error:
            why = f"could not store its snapshot: {beat.write_error}"
        else:
            cause = f" ({beat.problems[0]})" if beat and beat.problems else ""
            why = f"could not reach its admin API{cause}"
        print(f"pulsar-lens collect: cluster {loop.cluster}: {why}", file=sys.stderr)
    return 1 if failed else 0
