"""`pulsar-lens collect`: poll the admin API into the snapshot store, once or on an interval.

Prints one heartbeat line per poll. Exit status: 0 when snapshots were stored, 1 when the
admin API could not be reached (`--once`, or every poll of a bounded run), 2 for a usage or
settings error.

With several `[[clusters]]` in the settings file (`--config` or PULSAR_LENS_CONFIG), every
cluster is polled side by side, each on its own loop, into the one store; each heartbeat names
its cluster, and the exit status is 1 when any cluster stored nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from pulsar_lens.cli.arguments import settings_of
from pulsar_lens.cli.collect_parts import (
    Analyses,
    HeartbeatPrinter,
    Source,
    SourceFactory,
    poll_timing,
    stop_on_sigterm,
)
from pulsar_lens.cli.key_sampling import add_sampling_args, sampling_hooks
from pulsar_lens.cli.metrics_endpoint import MetricsEndpoint, add_metrics_port
from pulsar_lens.cli.probing import add_probe_args, drill_service, probe_hooks
from pulsar_lens.core.secrets import display_url
from pulsar_lens.core.settings import (
    Settings,
    admin_url_problem,
    format_duration,
    parse_duration,
)
from pulsar_lens.core.storeroot import check_root

if TYPE_CHECKING:  # the loop and the store (pandas), pydantic load once a collect runs
    from pathlib import Path

    from pulsar_lens.collectors.bulkparts import PartPool
    from pulsar_lens.core.config import ClusterSettings
    from pulsar_lens.core.model import Snapshot
    from pulsar_lens.plugins.spark.parts import SparkParts


def admin_source(
    admin_url: str,
    namespaces: Sequence[str] | None,
    *,
    cluster: ClusterSettings | None = None,
    settings: Settings | None = None,
) -> Source:
    """Poll a real cluster: an AdminClient and poll(). The connection (token, TLS, OAuth2)
    is `cluster`'s own from the settings file, else that of the one cluster of `settings`
    (the environment's; no settings: the defaults); a named cluster's snapshots carry its
    name instead of the one its brokers report."""
    from pulsar_lens.collectors.admin import AdminClient

    settings = settings or Settings()
    cluster = cluster or settings.cluster
    client = AdminClient.from_settings(
        cluster, admin_url=admin_url, max_response_bytes=settings.max_response
    )  # refuses an unusable credential: before the poll's imports, which are the heavy ones
    from pulsar_lens.collectors.poll import DetailRotation, carry_forward, diff, poll

    rotation = DetailRotation()  # one per loop: successive polls detail different topics
    parts = part_builder(settings)
    name = cluster.name if cluster else None
    found: list[str] = []  # the cluster the last poll found, should the next one's list fail

    def poll_once() -> Snapshot:
        snapshot = poll(
            client,
            namespaces=namespaces,
            deadline=settings.poll_deadline.total_seconds(),
            detail_budget=settings.detail_budget,
            max_brokers=settings.max_brokers,
            rotation=rotation,
            build=parts.build,
            last_cluster=found[-1] if found else None,
        )
        if snapshot.brokers:  # its cluster listed brokers: the one to ask next time
            found[:] = [snapshot.cluster]
        return dataclasses.replace(snapshot, cluster=name) if name else snapshot

    def close() -> None:
        client.close()
        parts.close()

    return Source(poll=poll_once, diff=diff, carry=carry_forward, close=close)


def part_builder(settings: Settings) -> PartPool | SparkParts:
    """What reads the large bulk answers, kept between polls: worker processes of this one,
    or Spark's executors (`PULSAR_LENS_SPARK_PARTS=1`, on the settings' Spark master)."""
    if settings.spark.parts:
        from pulsar_lens.plugins.spark import session
        from pulsar_lens.plugins.spark.parts import SparkParts

        session.configure(settings.spark)
        return SparkParts()
    from pulsar_lens.collectors.bulkparts import PartPool

    return PartPool()


def duration_arg(text: str) -> dt.timedelta:
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= dt.timedelta():
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1_000_000_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number up to 10^9")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "collect",
        help="poll the admin API into the snapshot store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="poll once, store it and exit")
    mode.add_argument(
        "--interval",
        type=duration_arg,
        help="time between polls, e.g. 30s, 2m, 1h (default PULSAR_LENS_POLL_INTERVAL or 30s)",
    )
    p.add_argument("--admin-url", help="admin REST URL (default PULSAR_ADMIN_URL)")
    add_config_arg(p)
    p.add_argument(
        "--store", metavar="DIR", help="store folder (default PULSAR_LENS_STORE or ./var/store)"
    )
    p.add_argument("--max-polls", type=positive_int, metavar="N", help="stop after N polls")
    p.add_argument(
        "--retention",
        type=duration_arg,
        help="delete snapshots older than this (default PULSAR_LENS_RETENTION or 7d)",
    )
    p.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="TENANT/NS",
        help="poll only this namespace (repeatable; default: all)",
    )
    add_sampling_args(p, positive=positive_int)
    add_probe_args(p)
    add_metrics_port(p, default_text="0")
    p.set_defaults(func=run, source_factory=None)  # None: admin_source with the settings


def _then(first: Callable[[Any], Any], second: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap with `first`, then with `second`."""
    return lambda fn: second(first(fn))


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        help="settings file, TOML (default PULSAR_LENS_CONFIG; the environment wins over it)",
    )


def require_admin_url(command: str, given: str | None, settings: Settings) -> str | None:
    """The admin URL from the flag or PULSAR_ADMIN_URL; None (after saying so) without one."""
    admin_url = given or settings.admin_url
    if not admin_url:
        print(
            f"pulsar-lens {command}: no admin URL; pass --admin-url or set PULSAR_ADMIN_URL "
            "(e.g. http://localhost:8080)",
            file=sys.stderr,
        )
        return None
    problem = admin_url_problem(admin_url)
    if problem:
        print(f"pulsar-lens {command}: admin URL {problem}", file=sys.stderr)
        return None
    return admin_url


def run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    # the deadline not set follows the interval (the flag's too): `Settings.poll_deadline_at`
    every = args.interval or settings.poll_interval
    settings = dataclasses.replace(settings, poll_deadline=settings.poll_deadline_at(every))
    if args.source_factory is None:
        args.source_factory = partial(admin_source, settings=settings)
    if len(settings.clusters) > 1:
        from pulsar_lens.cli.collect_clusters import run_clusters

        return run_clusters(args, settings)
    admin_url = require_admin_url("collect", args.admin_url, settings)
    if not admin_url:
        return 2
    root = check_root(args.store or settings.store_dir, writable=True)
    timing = poll_timing(args, settings)
    if timing is None:
        return 2
    factory: SourceFactory = args.source_factory
    if settings.config_file is None:
        source = factory(admin_url, args.namespaces)
    else:
        cluster = settings.clusters[0]
        source = factory(admin_url, args.namespaces, cluster=cluster, settings=settings)
    try:
        return _collect(args, settings, admin_url, root, timing, source)
    finally:
        source.close()


def _collect(
    args: argparse.Namespace,
    settings: Settings,
    admin_url: str,
    root: Path,
    timing: tuple[dt.timedelta, dt.timedelta],
    source: Source,
) -> int:
    """`run` once its settings, its store's folder and its source (credentials included) are
    known good: the loop, its endpoints and hooks, until the polls end; 0, or 1 when no poll
    was stored."""
    interval, retention = timing
    # only now the loop's imports (pandas, pyarrow): a refused command is quick to say so
    from pulsar_lens.collectors.health import HealthRecorder
    from pulsar_lens.collectors.loop import PollLoop
    from pulsar_lens.core.store import Store

    store = Store(root)
    health = HealthRecorder(
        store.root,
        interval=interval.total_seconds(),
        deadline=settings.poll_deadline.total_seconds(),
        detail_budget=settings.detail_budget,
    )
    metrics = MetricsEndpoint(
        store,
        settings.metrics.with_port(args.metrics_port, default=0),
        health=health,
        plugin_dirs=settings.plugin_dirs,
        plugin_limits=settings.plugin_limits,
    )
    wrap_poll, wrap_beat = sampling_hooks(args, settings, store)
    probes = probe_hooks(args, settings, store, admin_url)
    if probes is not None:
        wrap_poll = _then(wrap_poll, probes.wrap)
        wrap_beat = _then(wrap_beat, probes.after)
    printer = HeartbeatPrinter()
    analyses: Analyses | None = None
    drills = None
    try:
        metrics.start()  # first: /metrics answers while the plugins load
        if not args.once:  # drills the dashboard asks for: run, or refused and said why
            drills = drill_service(args, settings, store, admin_url)
        analyses = Analyses(
            store,
            spark_jobs=not (args.once or args.max_polls),
            settings=settings,
            then=metrics.analysed,
            on_pass=(health.record_analyses, metrics.record_analyses),
        )
        loop = PollLoop(
            wrap_poll(source.poll),
            store,
            interval=interval.total_seconds(),
            retention=retention,
            diff=source.diff,
            carry=source.carry,
            on_heartbeat=wrap_beat(metrics.wrap(health.wrap(analyses.after(printer)))),
            max_polls=1 if args.once else args.max_polls,
            deadline=settings.poll_deadline.total_seconds(),
            detail_budget=settings.detail_budget,
        )
        if not args.once:
            print(
                f"collecting from {display_url(admin_url)} into {store.root} "
                f"every {format_duration(interval)}",
                file=sys.stderr,
                flush=True,
            )
        with stop_on_sigterm(loop, analyses):
            loop.run()
            if (args.once or args.max_polls) and not loop.stopped:
                # a bounded run leaves its results stored, like its snapshots; one stopped by
                # SIGTERM leaves at once (an orchestrator's grace period is short), during
                # this wait too
                analyses.finish()
    finally:
        if analyses is not None:
            analyses.close()
        if probes is not None:
            probes.close()
        if drills is not None:
            drills.close()
        metrics.close()
    if loop.last_success is None and printer.last and printer.last.write_error:
        # the write error names the snapshot and the store: "could not write snapshot … under …"
        print(f"pulsar-lens collect: {printer.last.write_error}", file=sys.stderr)
        return 1
    if loop.last_success is None:
        problems = printer.last.problems if printer.last else ()
        cause = f" ({problems[0]})" if problems else ""
        shown = display_url(admin_url)
        if printer.last and printer.last.refused:
            line = f"the admin API at {shown} refused the credentials{cause}"
        else:
            line = f"could not reach the admin API at {shown}{cause}; check the URL and that "
            line += "the broker is up"
        print(f"pulsar-lens collect: {line}", file=sys.stderr)
        return 1
    return 0
