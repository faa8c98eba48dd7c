"""`pulsar-lens drill unload`: unload one bundle under a probe and report what it cost.

The measuring is `collectors.drill`; the report is the `unload-latency` plugin's result over
what the drill stored, narrowed to the drill's bundle and time.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from pulsar_lens.cli.arguments import bounded_float, settings_of
from pulsar_lens.cli.collect_cmd import require_admin_url
from pulsar_lens.core.secrets import display_url
from pulsar_lens.core.settings import Settings

if TYPE_CHECKING:  # pandas loads with the report, once a drill has run
    import pandas as pd

PLUGIN = "unload-latency"
MAX_PROBE_RATE = 1000.0  # as collect --probe-rate
MAX_DRILL_SECONDS = 86_400.0  # a drill that has not settled within a day never will


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "drill",
        help="run an operational drill against the cluster (needs PULSAR_LENS_ALLOW_MUTATIONS=1)",
        description="Drills change the cluster on purpose and measure the effect.",
    )
    kinds = p.add_subparsers(dest="drill", required=True, metavar="DRILL")
    u = kinds.add_parser(
        "unload",
        help="probe a bundle, unload it, report the outage, delete the probe topic",
        description="Starts a probe on the bundle, waits for a clean baseline, unloads the "
        "bundle (to --to where the load manager supports it), measures, stops the probe, "
        "deletes the probe topic and prints the report. Creates a topic and a subscription "
        "and moves a bundle: needs PULSAR_LENS_ALLOW_MUTATIONS=1.",
    )
    u.add_argument(
        "--bundle",
        required=True,
        metavar="NS/RANGE",
        help="e.g. public/default/0x00000000_0x40000000",
    )
    u.add_argument("--to", metavar="BROKER", help="destination broker id (host:webPort)")
    u.add_argument("--admin-url", help="admin REST URL (default PULSAR_ADMIN_URL)")
    u.add_argument(
        "--service-url", help="binary protocol URL (default PULSAR_SERVICE_URL, else a broker's)"
    )
    u.add_argument("--store", help="snapshot store directory (default PULSAR_LENS_STORE)")
    u.add_argument(
        "--rate",
        type=bounded_float("--rate", 0, MAX_PROBE_RATE),
        default=20.0,
        help=f"probe messages per second (20, at most {MAX_PROBE_RATE:g})",
    )
    u.add_argument(
        "--timeout",
        type=bounded_float("--timeout", 0, MAX_DRILL_SECONDS),
        default=120.0,
        help=f"seconds for the whole drill (120, at most {MAX_DRILL_SECONDS:g})",
    )
    u.add_argument("--keep-topic", action="store_true", help="keep the probe topic afterwards")
    u.add_argument("--json", action="store_true", help="print the report as JSON")
    u.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_of(args)  # before the drill's imports: a refusal costs no pandas
    from pulsar_lens.collectors.admin import AdminClient
    from pulsar_lens.collectors.client_auth import client_token
    from pulsar_lens.collectors.drill import DrillPlan, run_drill
    from pulsar_lens.core.mutations import require_mutations
    from pulsar_lens.core.store import Store
    from pulsar_lens.core.storeroot import check_root

    plan = DrillPlan.parse(
        args.bundle, to=args.to, rate=args.rate, timeout=args.timeout, keep_topic=args.keep_topic
    )
    require_mutations(f"the unload drill on {args.bundle}", settings.mutations)
    admin_url = require_admin_url("drill", args.admin_url, settings)
    if not admin_url:
        return 2
    store = Store(check_root(args.store or settings.store_dir, writable=True))
    cluster = settings.cluster
    with AdminClient.from_settings(
        cluster, admin_url=admin_url, max_response_bytes=settings.max_response
    ) as admin:
        service_url = args.service_url or settings.service_url
        print(f"drill: unload {args.bundle} on {display_url(admin_url)}", file=sys.stderr)
        drill = run_drill(
            plan,
            admin=admin,
            service_url=service_url,
            store=store,
            mutations=settings.mutations,
            token=client_token(cluster, shared=settings.client_token),
            connection=cluster,
            progress=lambda line: print(f"drill: {line}", file=sys.stderr),
        )
    report = drill_report(store, drill, settings)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report)
    return 1 if report["lost"] else 0


def drill_report(store: Any, drill: Any, settings: Settings) -> dict[str, Any]:
    """The unload-latency result over the stored rows, narrowed to this drill."""
    import pandas as pd

    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.isolation import limits_of
    from pulsar_lens.plugins.registry import discover

    loaded = discover(plugin_dirs=settings.plugin_dirs, limits=limits_of(settings)).get(PLUGIN)
    params = runner.validate_params(loaded.plugin, {"namespace": drill.plan.namespace})
    output = runner.run(loaded, store, params, use_cache=False, views=False)
    frames = output.result.frames
    # the events of this unload: seen by a poll after it, or an outage cut after it began
    # (less one probe interval: the last good ack may come just before the unload call)
    start = pd.Timestamp(drill.unload_at) - pd.Timedelta(seconds=1 / drill.plan.rate)
    # (a move seen by the poll after the unload is its event even when the outage its window
    # holds was cut just before the unload call: a slow publish on a busy machine)
    events = frames["events"]
    after = (events["at"] >= start) | (events["cut_at"].notna() & (events["cut_at"] >= start))
    mine = events[(events["bundle"] == drill.plan.bundle) & after]
    probes = frames["probes"]
    probe = probes[probes["probe"] == drill.probe_run]
    return {
        "bundle": f"{drill.plan.namespace}/{drill.plan.bundle}",
        "topic": drill.topic,
        "probe": drill.probe_run,
        "from": drill.owner_before,
        "to": drill.owner_after,
        "unload_at": drill.unload_at,
        "events": mine.to_dict(orient="records"),
        **_unload_outage(frames["outages"], drill.probe_run, start),
        "sent": int(probe["sent"].sum()),
        "received": int(probe["received"].sum()),
        "lost": int(probe["lost"].sum()),
        "duplicates": int(probe["duplicates"].sum()),
        "deleted": drill.deleted,
        "steps": drill.steps,
    }


def _unload_outage(outages: pd.DataFrame, probe_run: str, start: pd.Timestamp) -> dict[str, Any]:
    """The unload's outage: the probe run's first outage cut at or after the unload (0 when
    no publish was slow: a clean transfer); later ones (a blip while settling) are counted."""
    ours = outages[(outages["probe"] == probe_run) & (outages["cut_at"] >= start)]
    ours = ours.sort_values("cut_at", kind="stable")
    if ours.empty:
        return {"outage_ms": 0.0, "cut_at": None, "worst_publish_ms": None, "later_outages": 0}
    first = ours.iloc[0]
    return {
        "outage_ms": float(first["outage_ms"]),
        "cut_at": first["cut_at"],
        "worst_publish_ms": float(first["worst_publish_ms"]),
        "later_outages": len(ours) - 1,
    }


def _print_report(report: dict[str, Any]) -> None:
    print(f"unload drill on {report['bundle']}: {report['from']} -> {report['to']}")
    outage = report["outage_ms"]
    print(f"  outage: {'not measured' if outage is None else f'{outage:,.0f} ms'}")
    worst = report["worst_publish_ms"]
    print(f"  worst publish latency: {'-' if worst is None else f'{worst:,.0f} ms'}")
    print(
        f"  probe messages: {report['sent']} sent, {report['received']} received, "
        f"{report['lost']} lost, {report['duplicates']} duplicates"
    )
    if report["later_outages"]:
        print(f"  later outages while settling: {report['later_outages']}")
    if report["lost"]:
        print("  MESSAGES WERE LOST during the unload")
    for event in report["events"]:
        print(f"  event {event['kind']} at {event['at']}: {event['detail'] or ''}".rstrip())
