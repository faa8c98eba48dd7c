"""Probes beside the collect loop: which bundles the `--probe` specs pick from a poll, where
their rows go (the store's `probes` table), and `CollectProbes`, which starts a
`ProbeRunner` once a stored poll lists those bundles.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulsar_lens.collectors.probe import ProbeRunner, ProbeSettings, ProbeTarget, Sink
from pulsar_lens.core.bundles import parse_bundle_name
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.model import ProbeRecord
from pulsar_lens.core.mutations import MutationSettings
from pulsar_lens.core.secrets import Secret, clean

log = logging.getLogger(__name__)


def store_sink(store: Any, cluster: str) -> Sink:
    """A sink writing probe rows to the store's `probes` table, a batch per call."""
    from pulsar_lens.core.model import records_to_table

    def write(rows: list[ProbeRecord]) -> None:
        now = dt.datetime.now(dt.UTC)
        batch = f"probe-{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:6]}"
        table = records_to_table(
            "probes", rows, snapshot_id=batch, collected_at=now, cluster=cluster
        )
        store.write_table("probes", table)

    return write


def targets_of(
    bundles: Iterable[tuple[str, str]],
) -> list[ProbeTarget]:
    """One probe target per (namespace, bundle), in the order given, without repeats."""
    seen: dict[tuple[str, str], ProbeTarget] = {}
    for namespace, bundle in bundles:
        if (namespace, bundle) not in seen:
            seen[(namespace, bundle)] = ProbeTarget.of(namespace, bundle)
    return list(seen.values())


def lookup_service_url(admin: Any, topic: str) -> str | None:
    """The binary URL of the broker a lookup of `topic` names: where a probe can connect
    when the brokers publish no load report to read it from (standalone, extensible load
    manager). `admin` is an AdminClient."""
    answer = admin.get_json("/lookup/v2/topic/" + topic.replace("://", "/", 1))
    return str((answer or {}).get("brokerUrl") or "") or None


def parse_probe_spec(spec: str) -> tuple[str, str | None]:
    """`tenant/ns` -> (ns, None): every bundle of it; `tenant/ns/0x.._0x..` -> one bundle."""
    parts = spec.strip().strip("/").split("/")
    if len(parts) == 2 and all(parts):
        return f"{parts[0]}/{parts[1]}", None
    if len(parts) == 3 and all(parts):
        parse_bundle_name(parts[2])
        return f"{parts[0]}/{parts[1]}", parts[2]
    raise ModelError(f"probe {spec!r}: expected TENANT/NAMESPACE or TENANT/NAMESPACE/0xLO_0xHI")


def resolve_targets(specs: Sequence[str], bundles: Iterable[Any]) -> list[ProbeTarget]:
    """The probe targets of `specs` among a poll's bundle records (namespace, bundle)."""
    known = [(b.namespace, b.bundle) for b in bundles]
    chosen: list[tuple[str, str]] = []
    for spec in specs:
        namespace, bundle = parse_probe_spec(spec)
        chosen += [(ns, b) for ns, b in known if ns == namespace and bundle in (None, b)]
    return targets_of(chosen)


@dataclass
class CollectProbes:
    """Probes started by the collect loop: once a stored poll lists the bundles `specs` name,
    a ProbeRunner probes them until close(). A failure to start is logged and retried after
    the next poll; probing never stops the loop. The watched set is fixed at start (a bundle
    split later is probed through the half that holds the probe topic)."""

    store: Any
    specs: Sequence[str]
    rate: float = 10.0
    service_url: str | None = None
    token: Secret | None = field(default=None, repr=False)
    lookup: Callable[[str], str | None] | None = field(default=None, repr=False)
    connection: ClusterSettings | None = field(default=None, repr=False)  # as ProbeRunner's
    mutations: MutationSettings = field(default_factory=MutationSettings, repr=False)
    runner: ProbeRunner | None = field(default=None, init=False)
    _latest: Any = field(default=None, init=False, repr=False)

    def wrap(self, poll: Callable[[], Any]) -> Callable[[], Any]:
        def remembering() -> Any:
            snapshot = poll()
            self._latest = snapshot
            return snapshot

        return remembering

    def after(self, first: Callable[[Any], None]) -> Callable[[Any], None]:
        def both(beat: Any) -> None:
            first(beat)
            snapshot, self._latest = self._latest, None
            if self.runner is None and beat.snapshot_id is not None and snapshot is not None:
                self.start(snapshot)

        return both

    def start(self, snapshot: Any) -> None:
        from pulsar_lens.collectors.sampling import service_url_of

        targets = resolve_targets(self.specs, snapshot.bundles)
        url = self.service_url or service_url_of(snapshot)
        if url is None and targets and self.lookup is not None:
            try:
                url = self.lookup(targets[0].topic)
            except Exception as exc:  # reported; retried after the next poll
                log.warning("probes: looking up a broker failed: %s", clean(str(exc)))
        if not targets or url is None:
            log.warning(
                "probes not started: %s",
                "no bundle of the poll matches --probe"
                if url
                else "no service URL; pass --service-url or set PULSAR_SERVICE_URL",
            )
            return
        runner = ProbeRunner(
            url,
            targets,
            store_sink(self.store, snapshot.cluster),
            token=self.token,
            settings=ProbeSettings(rate=self.rate),
            connection=self.connection,
            mutations=self.mutations,
        )
        try:
            self.runner = runner.start()
        except Exception as exc:  # reported, never fatal: retried after the next poll
            log.warning("probes could not start: %s", clean(str(exc)))

    def close(self) -> None:
        if self.runner is not None:
            counts = self.runner.stop()
            log.info("probes stopped: %s", counts)
            self.runner = None
