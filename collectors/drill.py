"""The unload drill: probe one bundle, unload it, measure what it cost, clean up.

Steps, each bounded in time:
1. poll the cluster once;
2. start a probe on the bundle (again, while the time lasts, when its client fails) and wait
   for a clean baseline (`baseline` seconds of acknowledged publishes, none slow or failed);
3. poll again: the "before" snapshot (the probe's topic keeps the bundle owned from here on);
4. unload the bundle (to `to` where given; the extensible load manager refuses the owner);
5. wait until the probe's publishes are acknowledged again, and `settle` seconds more;
6. stop the probe (its rows go to the store's `probes` table);
7. poll again: the "after" snapshot; delete the probe topic.
The report is the `unload-latency` plugin's result over the stored rows: the drill
measures, the plugin judges.

The drill changes the cluster (a topic, a subscription, a bundle move): it needs
PULSAR_LENS_ALLOW_MUTATIONS=1.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.events import diff
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.probe import ProbeRunner, ProbeSettings, ProbeStartError, ProbeTarget
from pulsar_lens.collectors.probe_loop import lookup_service_url, store_sink
from pulsar_lens.collectors.sampling import service_url_of
from pulsar_lens.core.bundles import parse_bundle_name
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.mutations import MutationSettings, require_mutations
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DrillPlan:
    namespace: str  # "tenant/ns"
    bundle: str  # "0x00000000_0x40000000"
    to: str | None = None  # destination broker id, e.g. "10.0.0.2:8080"
    rate: float = 20.0  # probe messages per second
    baseline: float = 3.0  # seconds of clean publishes before the unload
    settle: float = 3.0  # seconds of probing after the probe is through again
    timeout: float = 120.0  # seconds for the whole drill
    keep_topic: bool = False  # keep the probe topic afterwards

    @classmethod
    def parse(cls, target: str, **options: Any) -> DrillPlan:
        """`tenant/ns/0x00000000_0x40000000` -> a plan; SettingsError when malformed."""
        parts = target.strip("/").split("/")
        if len(parts) != 3:
            raise SettingsError(
                f"--bundle {target!r}: expected TENANT/NAMESPACE/0xLOWER_0xUPPER, "
                "e.g. public/default/0x00000000_0x40000000",
                setting="--bundle",
            )
        try:
            parse_bundle_name(parts[2])
        except Exception as exc:
            raise SettingsError(f"--bundle {target!r}: {exc}", setting="--bundle") from None
        return cls(namespace=f"{parts[0]}/{parts[1]}", bundle=parts[2], **options)


@dataclass
class DrillRun:
    """What the drill did, for its report."""

    plan: DrillPlan
    topic: str = ""
    probe_run: str = ""  # the probe run id: its rows are this drill's
    owner_before: str | None = None
    owner_after: str | None = None
    unload_at: dt.datetime | None = None
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    finished_at: dt.datetime | None = None
    probe_counts: dict[str, int] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def run_drill(
    plan: DrillPlan,
    *,
    admin: AdminClient,
    service_url: str | None,
    store: Store,
    mutations: MutationSettings,
    token: Secret | None = None,
    connection: ClusterSettings | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> DrillRun:
    """Carry out the drill against the cluster behind `admin`; rows and polls go to `store`.
    Without a `service_url`, the brokers' own binary URL from the first poll is used; the
    probe connects with `token` and the OAuth2 and TLS settings of `connection`. Refused
    unless `mutations` allow changes."""
    require_mutations(f"the unload drill on {plan.namespace}/{plan.bundle}", mutations)
    deadline = time.monotonic() + plan.timeout
    run = DrillRun(plan)

    def step(line: str) -> None:
        run.steps.append(line)
        log.info("drill: %s", line)
        progress(line)

    before = _poll_and_store(admin, store, plan.namespace, None)
    step(f"polled the cluster ({before.cluster})")
    target = ProbeTarget.of(plan.namespace, plan.bundle)
    service_url = service_url or service_url_of(before) or lookup_service_url(admin, target.topic)
    if not service_url:
        raise SettingsError(
            "no service URL: the brokers report none; pass --service-url", setting="--service-url"
        )
    run.topic = target.topic
    probe = ProbeRunner(
        service_url,
        [target],
        store_sink(store, before.cluster),
        token=token,
        settings=ProbeSettings(rate=plan.rate, flush_every=1.0),
        connection=connection,
        mutations=mutations,
    )
    run.probe_run = probe.run_id
    start_probe(probe, deadline, step)
    try:
        step(f"probing {target.topic} at {plan.rate:g} msg/s")
        _wait_clean(probe, plan.baseline, deadline)
        # the "before" poll: the probe's topic keeps the bundle owned from here on
        before = _poll_and_store(admin, store, plan.namespace, before)
        run.owner_before = owner_of(admin, target.topic)
        if plan.to is not None and plan.to == run.owner_before:
            raise SettingsError(
                f"--to {plan.to}: that broker already owns the bundle", setting="--to"
            )
        step(f"baseline clean; {run.owner_before} owns the bundle; unloading")
        params = {"destinationBroker": plan.to} if plan.to else None
        run.unload_at = dt.datetime.now(dt.UTC)
        admin.put(f"/admin/v2/namespaces/{plan.namespace}/{plan.bundle}/unload", params=params)
        _wait_through(probe, run.unload_at, deadline)
        time.sleep(max(0.0, min(plan.settle, deadline - time.monotonic())))
        run.owner_after = owner_of(admin, target.topic)
        step(f"probe through again; {run.owner_after} owns the bundle")
    finally:
        counts = probe.stop(drain=5.0)
        run.probe_counts = dict(vars(counts))
    after = _poll_and_store(admin, store, plan.namespace, before)
    step(f"polled the cluster again ({len(after.bundles)} bundles)")
    if not plan.keep_topic:
        run.deleted = probe.delete_topics(admin)
        step(f"deleted {', '.join(run.deleted) or 'nothing'}")
    run.finished_at = dt.datetime.now(dt.UTC)
    return run


RETRY_PAUSE = 1.0  # seconds between attempts to start the probe


def start_probe(probe: ProbeRunner, deadline: float, step: Callable[[str], None]) -> None:
    """Start `probe`, and again after a transient failure while time is left before
    `deadline` (time.monotonic()): on a busy cluster the lookup of a probe topic that an
    earlier drill has just deleted, or of a bundle still being assigned, can outlast the
    client's operation timeout once. Each such failure is a step; the last one is raised,
    saying the time ran out. Any other failure (refused credentials) is raised at once."""
    while True:
        try:
            probe.start()
            return
        except ProbeStartError as exc:
            if not exc.transient:
                raise
            if time.monotonic() + RETRY_PAUSE >= deadline:
                raise ProbeStartError(
                    f"{exc}; no time is left for another attempt before the drill's timeout",
                    setting="--timeout",
                ) from exc
            step(f"{exc}; trying again")
            time.sleep(RETRY_PAUSE)


def owner_of(admin: AdminClient, topic: str) -> str | None:
    """The broker id (host:webPort) owning `topic` now, from a lookup."""
    answer = admin.get_json("/lookup/v2/topic/" + topic.replace("://", "/", 1))
    url = str((answer or {}).get("httpUrl") or (answer or {}).get("httpUrlTls") or "")
    return url.split("://", 1)[-1].rstrip("/") or None


def _poll_and_store(
    admin: AdminClient, store: Store, namespace: str, previous: Snapshot | None
) -> Snapshot:
    snapshot = poll(admin, namespaces=[namespace])
    events = diff(previous, snapshot) if previous is not None else []
    store.write(snapshot, events=events)
    return snapshot


def _wait_clean(probe: ProbeRunner, seconds: float, deadline: float) -> None:
    """Until `seconds` pass in which publishes were acknowledged and none was slow or failed
    (a new topic's first publishes are slow while its ledger opens)."""
    start = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        quiet = probe.quiet_for()
        calm = time.monotonic() - start if quiet is None else min(quiet, time.monotonic() - start)
        if calm >= seconds and probe.counts.acked > 0:
            return
    raise SettingsError(
        "the probe never had a clean baseline before the drill's timeout", setting="--timeout"
    )


def _wait_through(probe: ProbeRunner, since: dt.datetime, deadline: float) -> None:
    """Until a publish sent after `since` is acknowledged (the producer is through)."""
    while time.monotonic() < deadline:
        if probe.last_ack_sent_after(since):
            return
        time.sleep(0.05)
    raise SettingsError(
        "the probe was not through again before the drill's timeout", setting="--timeout"
    )
