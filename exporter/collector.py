"""The /metrics endpoint: a Prometheus collector over the store, and the HTTP server for it.

At each scrape `LensCollector` reports the loop's own polls (from a `PollRecorder`) and the
age of the newest stored snapshot; the cluster families (see `exporter.families`) and the
families every loaded plugin contributes through its `metrics(result, context)` hook (read
from its stored result of the newest snapshot) are built at most once per new snapshot id.
Built-ins and third-party plugins go through the same hook; a plugin whose analysis or hook
fails, or whose families break the rules (not `pulsar_lens_*`, a name taken), sets
`pulsar_lens_plugin_errors{plugin}` and the scrape goes on without its series.
After each poll the recorder reports, a background thread builds the new snapshot's families,
so a scrape never waits for the analyses: while that thread runs, a scrape answers with the
previous snapshot's families (Prometheus gives up on a scrape slower than its scrape_timeout).

    PULSAR_LENS_METRICS_PORT              port of /metrics (0: off)
    PULSAR_LENS_METRICS_ADDRESS           bind address (127.0.0.1)
    PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS per-subscription series for at most this many (500)
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd
from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from core.errors import ResultNotReady, SettingsError
from exporter.families import (
    DEFAULT_MAX_SUBSCRIPTIONS,
    ClusterFacts,
    PollStats,
    compute_cluster_families,
    compute_collector_families,
    compute_plugin_error_families,
    top_subscriptions,
)

if TYPE_CHECKING:  # the analyses (and altair with them) load at the first scrape, not before
    from plugins.runner import SnapshotStore

log = logging.getLogger(__name__)

PORT_ENV = "PULSAR_LENS_METRICS_PORT"
ADDRESS_ENV = "PULSAR_LENS_METRICS_ADDRESS"
MAX_SUBSCRIPTIONS_ENV = "PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS"
DEFAULT_ADDRESS = "127.0.0.1"
SERVE_PORT = 9464  # the default of `serve` and `demo`; `collect` has it off unless asked
PREFIX = "pulsar_lens_"
COUNTED_TABLES = ("brokers", "topics", "subscriptions", "consumers")


def parse_port(text: str, *, name: str = PORT_ENV) -> int:
    """A TCP port 0..65535 (0 turns /metrics off); SettingsError names the setting."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise SettingsError(f"{name} must be a port 0..65535 (0 turns /metrics off), got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """Where /metrics listens and how many subscriptions get their own series."""

    port: int = 0
    address: str = DEFAULT_ADDRESS
    max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, port: int | None = None
    ) -> MetricsSettings:
        """Settings from environ (default os.environ); `port` (a command-line value) wins."""
        env = os.environ if environ is None else environ
        port_text = env.get(PORT_ENV, "").strip()
        limit_text = env.get(MAX_SUBSCRIPTIONS_ENV, "").strip()
        limit = DEFAULT_MAX_SUBSCRIPTIONS
        if limit_text:
            try:
                limit = int(limit_text)
            except ValueError:
                limit = -1
            if limit < 1:
                raise SettingsError(
                    f"{MAX_SUBSCRIPTIONS_ENV} must be a whole number >= 1, got {limit_text!r}"
                )
        if port is None:
            port = parse_port(port_text) if port_text else 0
        return cls(
            port=port,
            address=env.get(ADDRESS_ENV, "").strip() or DEFAULT_ADDRESS,
            max_subscriptions=limit,
        )


class PollRecorder:
    """Thread-safe tally of the loop's polls, read by the collector at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = PollStats()
        self._listeners: list[Callable[[], None]] = []

    def on_record(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after each poll is recorded (in the recording thread)."""
        with self._lock:
            self._listeners.append(listener)

    def record(
        self, *, at: dt.datetime, duration: float, requests: int, errors: int, failed: bool
    ) -> None:
        with self._lock:
            self._stats = replace(
                self._stats,
                polls=self._stats.polls + 1,
                failed_polls=self._stats.failed_polls + int(failed),
                last_poll_at=at,
                last_duration_s=duration,
                last_requests=requests,
                last_errors=errors,
            )
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def stats(self) -> PollStats:
        with self._lock:
            return self._stats


def exporting_plugins() -> tuple[list[Any], list[str]]:
    """Every loaded plugin with a `metrics` hook (built-in, entry point or drop-in), and the
    names of plugins that failed to load."""
    from plugins.api import AnalysisPlugin
    from plugins.registry import discover

    registry = discover()
    loaded = [p for p in registry if type(p.plugin).metrics is not AnalysisPlugin.metrics]
    return loaded, [f.plugin or f.source for f in registry.failures]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LensCollector(Collector):
    """Prometheus collector over a store; analyses cached by the newest snapshot id."""

    def __init__(
        self,
        store: SnapshotStore,
        *,
        recorder: PollRecorder | None = None,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        plugins: Sequence[Any] | None = None,
        now: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._store = store
        self._recorder = recorder or PollRecorder()
        self._max = max_subscriptions
        self._plugins: list[Any] | None = None if plugins is None else list(plugins)
        self._unloaded: list[str] = []
        self._now = now
        self._lock = threading.Lock()
        self._cached: tuple[str, dt.datetime, list[Metric]] | None = None
        self._refreshing = threading.Event()
        self._refresher: threading.Thread | None = None
        self.computations = 0  # how many times the snapshot families were computed
        self._recorder.on_record(self._after_poll)

    def collect(self) -> Iterable[Metric]:
        now = self._now()
        newest = self._newest()
        newest_at = newest[1] if newest else None
        families = compute_collector_families(self._recorder.stats(), newest_at=newest_at, now=now)
        families.append(self._quarantined())
        if newest is not None:
            families.extend(self._snapshot_families(*newest, scrape=True))
        return families

    def _after_poll(self) -> None:
        """Start building the new snapshot's families off the scrape path (one thread at a
        time; a thread already running picks up the newer snapshot when it is done)."""
        if self._refreshing.is_set():
            return
        self._refreshing.set()
        refresher = threading.Thread(target=self._refresh, name="metrics-refresh", daemon=True)
        self._refresher = refresher
        refresher.start()

    def close(self, timeout: float = 30.0) -> None:
        """Wait (at most `timeout` s) for a refresh under way: a thread left inside pyarrow
        when the process exits deadlocks arrow's thread pool at exit."""
        refresher = self._refresher
        if refresher is not None:
            refresher.join(timeout)

    def _refresh(self) -> None:
        try:
            done = None
            while (newest := self._newest()) is not None and newest[0] != done:
                self._snapshot_families(*newest)
                done = newest[0]
        finally:
            self._refreshing.clear()

    def _quarantined(self) -> Metric:
        gauge = GaugeMetricFamily(
            "pulsar_lens_store_quarantined_files",
            "Files found in the store that could not be read as its tables (corrupt, empty, "
            "foreign) and were moved to its quarantine/ folder.",
        )
        counter = getattr(self._store, "quarantined_files", None)
        try:
            gauge.add_metric([], float(counter() if counter else 0))
        except OSError:
            log.exception("counting quarantined store files failed")
        return gauge

    def _newest(self) -> tuple[str, dt.datetime, Mapping[str, Any]] | None:
        try:
            index = self._store.snapshots(limit=1)
        except Exception:  # a scrape must answer even when the store cannot be read
            log.exception("reading the snapshot index for /metrics failed")
            return None
        if not len(index):
            return None
        row = index.iloc[-1].to_dict()
        at = pd.Timestamp(row["collected_at"]).to_pydatetime()
        return str(row["snapshot_id"]), at, row

    def _snapshot_families(
        self,
        sid: str,
        collected_at: dt.datetime,
        index_row: Mapping[str, Any],
        *,
        scrape: bool = False,
    ) -> list[Metric]:
        if scrape and (ready := self._ready(sid, collected_at)) is not None:
            return ready
        with self._lock:  # concurrent scrapes of a new snapshot compute it once
            if scrape and (ready := self._ready(sid, collected_at)) is not None:
                return ready  # built (or being rebuilt) by the refresh thread meanwhile
            if self._cached is None or self._cached[0] != sid:
                try:
                    families = self._compute(sid, collected_at, index_row)
                except Exception:
                    log.exception("computing /metrics for snapshot %s failed", sid)
                    return []
                self._cached = (sid, collected_at, families)
            return self._cached[2]

    def _ready(self, sid: str, collected_at: dt.datetime) -> list[Metric] | None:
        """What a scrape answers at once: `sid`'s families, or the last built while the
        refresh thread builds newer ones or when they are newer than `sid`; None when the
        scrape must build them itself."""
        cached = self._cached
        if cached is None:
            return None
        if cached[0] == sid or cached[1] >= collected_at or self._refreshing.is_set():
            return cached[2]
        return None

    def _compute(
        self, sid: str, collected_at: dt.datetime, index_row: Mapping[str, Any]
    ) -> list[Metric]:
        self.computations += 1
        facts = read_facts(self._store, sid, collected_at, index_row)
        keep = top_subscriptions(facts.subscriptions, self._max)
        from plugins.api import MetricsContext

        cluster = compute_cluster_families(facts, keep=keep)
        context = MetricsContext(subscriptions=tuple(keep), max_groups=self._max)
        contributed, failed = self._contributed(context, taken=_names(cluster))
        names = [p.name for p in self._loaded()] + self._unloaded
        return [*cluster, *contributed, *compute_plugin_error_families(names, failed)]

    def _loaded(self) -> list[Any]:
        if self._plugins is None:
            self._plugins, self._unloaded = exporting_plugins()
        return self._plugins

    def _contributed(self, context: Any, *, taken: set[str]) -> tuple[list[Metric], list[str]]:
        from plugins import runner

        families: list[Metric] = []
        failed = list(self._unloaded)
        for plugin in self._loaded():
            name = getattr(plugin, "name", "?")
            try:
                result = runner.run(plugin, self._store, use_cache=False).result
                mine = runner.metrics(plugin, result, context)
                _check_families(mine, taken)
            except ResultNotReady:  # a Spark analysis before its first job: nothing to say yet
                continue
            except Exception as exc:  # one failing plugin must not break the scrape
                log.warning("/metrics: plugin %s contributed no series: %s", name, exc)
                failed.append(name)
                continue
            taken |= _names(mine)
            families.extend(mine)
        return families, failed


def _names(families: Sequence[Metric]) -> set[str]:
    return {f.name for f in families}


def _check_families(families: Any, taken: set[str]) -> None:
    """A plugin's families: Prometheus metric families named pulsar_lens_*, none taken."""
    if not isinstance(families, list | tuple):
        raise TypeError(f"metrics() must return a list of metric families, found {type(families)}")
    seen: set[str] = set()
    for family in families:
        if not isinstance(family, Metric):
            raise TypeError(f"metrics() returned {type(family).__name__}, not a metric family")
        if not family.name.startswith(PREFIX):
            raise ValueError(f"metric {family.name!r} must be named {PREFIX}*")
        if family.name in taken or family.name in seen:
            raise ValueError(f"metric {family.name!r} is already exported")
        seen.add(family.name)


def read_facts(
    store: SnapshotStore, sid: str, collected_at: dt.datetime, index_row: Mapping[str, Any]
) -> ClusterFacts:
    """The newest snapshot's subscriptions table and row counts (from its index row if there)."""
    subscriptions = store.read("subscriptions", snapshot_ids=[sid]).to_pandas()
    counts = _index_counts(index_row)
    for table in COUNTED_TABLES:
        if table not in counts:
            counts[table] = (
                len(subscriptions) if table == "subscriptions" else _rows(store, table, sid)
            )
    return ClusterFacts(
        snapshot_id=sid, collected_at=collected_at, counts=counts, subscriptions=subscriptions
    )


def _index_counts(index_row: Mapping[str, Any]) -> dict[str, int]:
    text = index_row.get("row_counts_json")
    if not isinstance(text, str):
        return {}
    counts = json.loads(text)
    return {k: int(v) for k, v in counts.items() if k in COUNTED_TABLES}


def _rows(store: SnapshotStore, table: str, sid: str) -> int:
    return int(store.read(table, snapshot_ids=[sid]).num_rows)


@dataclass
class MetricsServer:
    """A running /metrics HTTP server; `close()` stops it."""

    address: str
    port: int
    _server: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def start_metrics_server(collector: Collector, *, address: str, port: int) -> MetricsServer:
    """Serve `collector` on http://address:port/metrics from a fresh registry, in a thread.

    Raises SettingsError when the address cannot be bound (e.g. the port is taken).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        raise SettingsError(
            f"cannot serve /metrics on {address}:{port} ({exc.strerror or exc}); pass "
            f"--metrics-port or set {PORT_ENV} to a free port, or 0 to turn /metrics off"
        ) from exc
    return MetricsServer(
        address=address, port=int(server.server_port), _server=server, _thread=thread
    )
