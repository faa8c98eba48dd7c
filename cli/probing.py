"""The probe options of `pulsar-lens collect`: `--probe NS[/BUNDLE]` and `--probe-rate`.

Probes create topics and subscriptions, so they need PULSAR_LENS_ALLOW_MUTATIONS=1; collect
refuses to start with `--probe` otherwise. With several clusters, every cluster probes the
`--probe` bundles of its own, each with its own connection settings.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from pulsar_lens.cli.arguments import bounded_float
from pulsar_lens.core.errors import ModelError, SettingsError

if TYPE_CHECKING:  # the probes (pyarrow, the client, pydantic) load once a collect runs
    from pulsar_lens.collectors.drill_queue import DrillService, DrillStatus
    from pulsar_lens.collectors.probe_loop import CollectProbes
    from pulsar_lens.core.config import ClusterSettings
    from pulsar_lens.core.settings import Settings
    from pulsar_lens.core.store import Store

MAX_PROBE_RATE = 1000.0  # messages per second per bundle


def add_probe_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "latency probes",
        "publish and consume a sequence-numbered message per tick on a topic in each watched "
        "bundle, into the probes table (creates topics: needs PULSAR_LENS_ALLOW_MUTATIONS=1)",
    )
    g.add_argument(
        "--probe",
        action="append",
        dest="probes",
        default=[],
        metavar="NS[/BUNDLE]",
        help="probe every bundle of TENANT/NS, or one bundle TENANT/NS/0xLO_0xHI (repeatable)",
    )
    g.add_argument(
        "--probe-rate",
        type=bounded_float("--probe-rate", 0, MAX_PROBE_RATE),
        default=10.0,
        metavar="PER_S",
        help="probe messages per second per bundle (10)",
    )


def probe_hooks(
    args: argparse.Namespace,
    settings: Settings,
    store: Store,
    admin_url: str,
    *,
    cluster: ClusterSettings | None = None,
) -> CollectProbes | None:
    """The collect loop's probes, or None without --probe; SettingsError for a bad spec or
    when mutations are not enabled. Given one `cluster` of several, its probes connect with
    that cluster's settings alone (service URL, token, OAuth2, TLS)."""
    if not args.probes:
        return None
    from pulsar_lens.collectors.client_auth import client_token
    from pulsar_lens.collectors.probe_loop import CollectProbes, parse_probe_spec
    from pulsar_lens.core.mutations import require_mutations

    require_mutations(
        f"--probe {' '.join(args.probes)} (creates topics and subscriptions)", settings.mutations
    )
    for spec in args.probes:
        try:
            parse_probe_spec(spec)
        except ModelError as exc:
            raise SettingsError(str(exc), setting="--probe") from None
    if not 0 < args.probe_rate <= MAX_PROBE_RATE:
        raise SettingsError(
            f"--probe-rate must be in (0, 1000], got {args.probe_rate:g}", setting="--probe-rate"
        )
    if cluster is None:
        connection = settings.cluster
        service_url = args.service_url or settings.service_url
        token = client_token(connection, shared=settings.client_token)
    else:  # PULSAR_CLIENT_TOKEN is the one cluster's: never sent to one of several
        connection = cluster
        service_url = cluster.service_url
        token = client_token(connection)
    return CollectProbes(
        store,
        list(args.probes),
        rate=args.probe_rate,
        service_url=service_url,
        token=token,
        lookup=partial(_lookup, admin_url, connection, settings.max_response),
        connection=connection,
        mutations=settings.mutations,
    )


def drill_service(
    args: argparse.Namespace, settings: Settings, store: Store, admin_url: str
) -> DrillService | None:
    """The thread that takes the drills the dashboard asks for: it runs those that
    `collectors.drill_queue.refusal` lets through, and refuses, visibly, the others (all of
    them unless mutations from the dashboard are on here), so none waits for a later start."""
    from pulsar_lens.collectors.client_auth import client_token
    from pulsar_lens.collectors.drill_queue import DrillQueue, DrillService

    def run(status: DrillStatus, progress: Callable[[str], None]) -> dict[str, Any]:
        from pulsar_lens.collectors.admin import AdminClient
        from pulsar_lens.collectors.drill import DrillPlan, run_drill

        plan = DrillPlan.parse(status.bundle, to=status.to)
        cluster = settings.cluster
        with AdminClient.from_settings(
            cluster, admin_url=admin_url, max_response_bytes=settings.max_response
        ) as admin:
            drill = run_drill(
                plan,
                admin=admin,
                service_url=args.service_url or settings.service_url,
                store=store,
                mutations=settings.mutations,
                token=client_token(cluster, shared=settings.client_token),
                connection=cluster,
                progress=progress,
            )
        return {"owner_before": drill.owner_before, "owner_after": drill.owner_after}

    return DrillService(DrillQueue(store.root), run, mutations=settings.mutations).start()


def _lookup(admin_url: str, cluster: ClusterSettings, max_response: int, topic: str) -> str | None:
    from pulsar_lens.collectors.admin import AdminClient
    from pulsar_lens.collectors.probe_loop import lookup_service_url

    with AdminClient.from_settings(
        cluster, admin_url=admin_url, max_response_bytes=max_response
    ) as admin:
        return lookup_service_url(admin, topic)
