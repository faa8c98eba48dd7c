"""`pulsar-lens demo`: a local Pulsar of the release `--pulsar` names (a standalone, or a
cluster of `--brokers` brokers), the demo workloads on it, and `serve` over it."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
from pathlib import Path

from pulsar_lens.cli.arguments import add_pulsar_release, bounded_int, settings_of
from pulsar_lens.cli.collect_cmd import duration_arg
from pulsar_lens.cli.metrics_endpoint import metrics_port
from pulsar_lens.cli.serve_cmd import add_common, serve
from pulsar_lens.cli.supervisor import say
from pulsar_lens.core.parts import SERVE_PORT, SPARK_EVERY_ENV
from pulsar_lens.core.settings import format_duration
from pulsar_lens.core.storeroot import check_root

MAX_BROKERS = 8  # brokers of a local demo cluster: about 0.8 GiB each beside ZooKeeper and a bookie
DEMO_INTERVAL = dt.timedelta(seconds=5)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = sub.add_parser(
        "demo", help="start a local Pulsar, drive demo workloads on it, and serve the dashboard"
    )
    add_common(d, store_help="store folder (default: a new temporary folder, removed on exit)")
    d.add_argument("--no-unloads", action="store_true", help="never unload a bundle")
    d.add_argument(
        "--unload-every",
        type=duration_arg,
        metavar="DURATION",
        help="unload one demo bundle this often, e.g. 45s (45s)",
    )
    d.add_argument(
        "--brokers",
        type=bounded_int("--brokers", 1, MAX_BROKERS),
        default=1,
        metavar="N",
        help="run a real N-broker cluster instead of a standalone; unloads then move bundles "
        "between brokers, and probes measure what each move costs (1)",
    )
    d.add_argument(
        "--load-manager",
        choices=("modular", "extensible"),
        default="modular",
        help="the cluster's load manager with --brokers 2 or more (modular)",
    )
    add_pulsar_release(d, also="; its jars must be assembled (`pulsar-lens pulsar assemble`)")
    d.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from pulsar_lens.lab import runtime

    scratch = None if args.store else Path(tempfile.mkdtemp(prefix="pulsar-lens-demo-"))
    store = Path(args.store).resolve() if args.store else Path(str(scratch)) / "store"
    try:
        check_root(store, writable=True)  # before a local Pulsar takes a minute to start
        # so is the release: a demo never waits minutes on Maven in the middle of starting
        runtime.require_assembled(args.pulsar or runtime.PULSAR_VERSION)
        return run_demo_in(store, args)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def run_demo_in(store: Path, args: argparse.Namespace) -> int:
    """A local broker, the demo workloads on it, and serve(); everything stopped on the way out."""
    from pulsar_lens.core.mutations import ALLOW_MUTATIONS
    from pulsar_lens.lab import runtime
    from pulsar_lens.lab.cluster import LocalPulsarCluster
    from pulsar_lens.lab.demo import DemoSettings, DemoWorkloads
    from pulsar_lens.lab.localpulsar import LocalPulsar

    # The History pages are Spark jobs: in a demo, a new round every 2 minutes shows them move.
    settings = settings_of(args)
    every = settings.spark.every
    child_env = {SPARK_EVERY_ENV: format_duration(dt.timedelta(seconds=every)) if every else "2m"}
    version = runtime.release(args.pulsar or runtime.PULSAR_VERSION).version
    pulsar: LocalPulsar | LocalPulsarCluster
    brokers: tuple[str, ...] = ()
    probes: tuple[str, ...] = ()
    if args.brokers > 1:
        print(
            f"Starting a local Pulsar {version} cluster of {args.brokers} brokers "
            f"({args.load_manager} load manager) on 127.0.0.1 ...",
            flush=True,
        )
        cluster = LocalPulsarCluster(
            brokers=args.brokers, load_manager=args.load_manager, version=version
        )
        pulsar = cluster.start()  # stops itself if interrupted while starting
        brokers = tuple(cluster.broker_ids)
        # the demo's own cluster: its probes may create topics there
        child_env[ALLOW_MUTATIONS] = "1"
        probes = ("--probe", DemoSettings().namespace)
    else:
        print(f"Starting a local Pulsar {version} standalone on 127.0.0.1 ...", flush=True)
        pulsar = LocalPulsar(version=version).start()  # stops itself if interrupted while starting
    try:
        demo = DemoSettings()
        if args.no_unloads or args.unload_every:
            every = 0.0 if args.no_unloads else args.unload_every.total_seconds()
            demo = DemoSettings(unload_every=every)
        with DemoWorkloads(pulsar.service_url, pulsar.admin_url, settings=demo, brokers=brokers):
            return serve(
                pulsar.admin_url,
                store,
                args.interval or DEMO_INTERVAL,
                address=args.address or "127.0.0.1",
                port=args.port,
                banner=demo_banner(pulsar.admin_url),
                metrics=metrics_port(
                    args.metrics_port, default=SERVE_PORT, settings=settings.metrics
                ),
                collect_args=(
                    "--sample-keys",
                    "--sample-every",
                    "3",
                    "--service-url",
                    pulsar.service_url,
                    *probes,
                ),
                settings=settings,
                child_env=child_env,
            )
    finally:
        try:  # a reader gone (a closed pipe) must not keep the JVMs from being stopped
            say("Stopping the demo workloads and the local Pulsar ...")
        finally:
            pulsar.stop()


def demo_banner(admin_url: str) -> list[str]:
    from pulsar_lens.lab.demo import DemoSettings

    return [
        f"Local Pulsar admin API: {admin_url}",
        f"Demo workloads in {DemoSettings().namespace}: Key_Shared with skewed keys "
        "(demo-orders), a consumer that stops acking (demo-payments), consumers joining and "
        "leaving, failover on a 6-partition topic (demo-events), an unread Shared "
        "subscription (demo-audit), a bundle unload now and then.",
    ]
