"""The /metrics endpoint: a Prometheus collector over the store, and the HTTP server for it.

At each scrape `LensCollector` reports the loop's own polls (from a `PollRecorder`) and the
age of the newest stored snapshot (of each cluster, labelled `cluster`, when it polls
several); the cluster families (see `pulsar_lens.exporter.families`) and the families every loaded
plugin contributes through its `metrics(result, context)` hook (read from its stored result
of the newest snapshot) are built at most once per new snapshot id.
Built-ins and third-party plugins go through the same hook; a plugin whose analysis or hook
fails, or whose families break the rules (not `pulsar_lens_*`, a name taken), sets
`pulsar_lens_plugin_errors{plugin}` and the scrape goes on without its series. A plugin with
no hook is there too when the store keeps results: 1 when its stored analysis of the newest
snapshot failed. The hooks that failed are also written beside the stored results
(`results/.metrics-hooks.json`), so the dashboard says so on the plugin's page.
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from pulsar_lens.core import links
from pulsar_lens.core.errors import PluginError, ResultNotReady, SettingsError
from pulsar_lens.core.secrets import clean
from pulsar_lens.core.settings import process_environ
from pulsar_lens.exporter.families import (
    DEFAULT_MAX_SUBSCRIPTIONS,
    ClusterFacts,
    compute_cluster_families,
    compute_cluster_health_families,
    compute_collector_families,
    compute_plugin_error_families,
    top_subscriptions,
)
from pulsar_lens.exporter.http import Route, serve_registry
from pulsar_lens.exporter.polls import PollRecorder as PollRecorder  # where callers import it from

if TYPE_CHECKING:  # the analyses (and altair with them) load at the first scrape, not before
    from pulsar_lens.plugins.runner import SnapshotStore

log = logging.getLogger(__name__)

PORT_ENV = "PULSAR_LENS_METRICS_PORT"
ADDRESS_ENV = "PULSAR_LENS_METRICS_ADDRESS"
MAX_SUBSCRIPTIONS_ENV = "PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS"
DEFAULT_ADDRESS = "127.0.0.1"
SERVE_PORT = 9464  # the default of `serve` and `demo`; `collect` has it off unless asked
PREFIX = "pulsar_lens_"
COUNTED_TABLES = ("brokers", "topics", "subscriptions", "consumers")
HOOK_ERRORS = ".metrics-hooks.json"  # in the store's results/ folder


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
        """Settings from environ (default the process's); `port` (a command-line value) wins."""
        env = process_environ() if environ is None else environ
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


def exporting_plugins(
    plugin_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> tuple[list[Any], list[str]]:
    """Every loaded plugin with a `metrics` hook (built-in, entry point or drop-in from
    `plugin_dirs`, as `discover` takes them), and the names of plugins that failed to load."""
    loaded, _, unloaded = _discovered(plugin_dirs)
    return loaded, unloaded


def _discovered(
    plugin_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> tuple[list[Any], list[Any], list[str]]:
    """The loaded plugins with a `metrics` hook, the light ones without, and the names of
    plugins that failed to load."""
    from pulsar_lens.api import AnalysisPlugin
    from pulsar_lens.plugins.registry import discover

    registry = discover(plugin_dirs=plugin_dirs)
    hooked = [p for p in registry if type(p.plugin).metrics is not AnalysisPlugin.metrics]
    silent = [p for p in registry if p not in hooked and p.engine != "spark"]
    return hooked, silent, [f.plugin or f.source for f in registry.failures]


def hook_errors_path(store_root: str | os.PathLike[str]) -> Path:
    from pulsar_lens.plugins.results import RESULTS_DIR

    return Path(store_root) / RESULTS_DIR / HOOK_ERRORS


def read_hook_errors(store_root: str | os.PathLike[str]) -> dict[str, Any]:
    """What the last /metrics build wrote: `snapshot_id`, `at` and `failed` (slug -> why the
    plugin's metrics() hook failed); {} when there is none or it is unreadable."""
    try:
        loaded = json.loads(hook_errors_path(store_root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


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
        plugin_dirs: Sequence[str | os.PathLike[str]] | None = None,
        now: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        """`plugins` None: the ones `discover(plugin_dirs=plugin_dirs)` loads, at first use."""
        self._store = store
        self._plugin_dirs = plugin_dirs
        self._recorder = recorder or PollRecorder()
        self._max = max_subscriptions
        self._plugins: list[Any] | None = None if plugins is None else list(plugins)
        self._unloaded: list[str] = []
        self._silent: list[Any] = []  # loaded plugins without a hook (when discovered here)
        self._now = now
        self._lock = threading.Lock()
        self._cached: tuple[str, dt.datetime, list[Metric]] | None = None
        self._refreshing = threading.Event()
        self._refresher: threading.Thread | None = None
        self._closing = threading.Event()
        self.computations = 0  # how many times the snapshot families were computed
        self._recorder.on_record(self._after_poll)

    def collect(self) -> Iterable[Metric]:
        now = self._now()
        newest = self._newest()
        newest_at = newest[1] if newest else None
        families = self._health(newest_at, now)
        families.append(self._quarantined())
        if newest is not None:
            families.extend(self._snapshot_families(*newest, scrape=True))
        return families

    def _health(self, newest_at: dt.datetime | None, now: dt.datetime) -> list[Metric]:
        """The poll health families: per cluster when the polls name their clusters."""
        of = self._recorder.by_cluster()
        if not of:
            return compute_collector_families(self._recorder.stats(), newest_at=newest_at, now=now)
        newest = {name: self._newest_of(name) for name in of}
        return compute_cluster_health_families(of, newest_at=newest, now=now)

    def _newest_of(self, cluster: str) -> dt.datetime | None:
        """When the newest stored snapshot of `cluster` was collected; None without one."""
        from pulsar_lens.core.clusterview import ClusterView

        try:
            index = ClusterView(self._store, cluster).snapshots(limit=1)  # type: ignore[arg-type]
        except Exception:  # a scrape must answer even when the store cannot be read
            log.exception("reading the snapshot index of cluster %s for /metrics failed", cluster)
            return None
        if not len(index):
            return None
        at: dt.datetime = pd.Timestamp(index["collected_at"].iloc[-1]).to_pydatetime()
        return at

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
        when the process exits deadlocks arrow's thread pool at exit. The refresh stops at
        its next plugin: running every plugin to the end held a stopping process for as long
        as a whole round of analyses took."""
        self._closing.set()
        refresher = self._refresher
        if refresher is not None:
            refresher.join(timeout)

    def _refresh(self) -> None:
        try:
            done = None
            while not self._closing.is_set() and (newest := self._newest()) is not None:
                if newest[0] == done:
                    break
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
        from pulsar_lens.api import MetricsContext

        cluster = compute_cluster_families(facts, keep=keep)
        context = MetricsContext(subscriptions=tuple(keep), max_groups=self._max)
        contributed, failed, hooks = self._contributed(context, taken=_names(cluster))
        names = [p.name for p in self._loaded()] + self._unloaded
        checked, silent_failed = self._stored_failures(self._silent)
        self._write_hook_errors(sid, hooks)
        return [
            *cluster,
            *contributed,
            *compute_plugin_error_families(names + checked, failed + silent_failed),
        ]

    def _loaded(self) -> list[Any]:
        if self._plugins is None:
            self._plugins, self._silent, self._unloaded = _discovered(self._plugin_dirs)
        return self._plugins

    def _contributed(
        self, context: Any, *, taken: set[str]
    ) -> tuple[list[Metric], list[str], dict[str, str]]:
        """The plugins' families, the plugins that failed, and why each failed hook did."""
        from pulsar_lens.plugins import runner

        families: list[Metric] = []
        plugins = self._loaded()  # discovers on the first call, which fills `_unloaded`
        failed = list(self._unloaded)
        hooks: dict[str, str] = {}
        for plugin in plugins:
            if self._closing.is_set():
                break  # closed: nothing will scrape what the other plugins contribute
            name = getattr(plugin, "name", "?")
            try:
                result = runner.run(plugin, self._store, use_cache=False).result
            except ResultNotReady:  # a Spark analysis before its first job: nothing to say yet
                continue
            except Exception as exc:  # one failing plugin must not break the scrape
                log.warning("/metrics: plugin %s contributed no series: %s", name, exc)
                failed.append(name)
                continue
            try:
                mine = runner.metrics(plugin, result, context)
                _check_families(mine, taken)
            except Exception as exc:  # its hook: the analysis itself is fine
                log.warning("/metrics: the metrics() hook of plugin %s failed: %s", name, exc)
                failed.append(name)
                why = exc.detail if isinstance(exc, PluginError) else str(exc)
                hooks[name] = clean(why, limit=500)
                continue
            taken |= _names(mine)
            families.extend(mine)
        return families, failed, hooks

    def _stored_failures(self, plugins: Sequence[Any]) -> tuple[list[str], list[str]]:
        """Of the plugins without a hook: those whose stored result of the newest snapshot
        can be read, and those of them whose stored analysis failed (none without results)."""
        from pulsar_lens.plugins import runner

        results = runner.results_for(self._store)
        if results is None:
            return [], []
        checked: list[str] = []
        failed: list[str] = []
        for loaded in plugins:
            plugin = loaded.plugin
            try:
                window = runner.snapshot_window(plugin, self._store)
                ids = [str(s) for s in window["snapshot_id"]]
                params = runner.validate_params(plugin, None).model_dump(mode="json")
                stored = results.read(plugin.name, plugin.version, params, ids)
            except Exception as exc:  # reading it must not break the scrape
                log.warning("/metrics: the stored result of %s is unreadable: %s", plugin.name, exc)
                continue
            checked.append(plugin.name)
            if stored is not None and stored.status == "failed":
                failed.append(plugin.name)
        return checked, failed

    def _write_hook_errors(self, sid: str, hooks: Mapping[str, str]) -> None:
        root = getattr(self._store, "root", None)
        if not isinstance(root, str | os.PathLike):
            return
        path = hook_errors_path(root)
        at = self._now().isoformat()
        text = json.dumps({"snapshot_id": sid, "at": at, "failed": dict(hooks)})
        staging = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            links.real_folder(Path(root), path.parent.relative_to(root))  # never through a link
            staging.write_text(text, encoding="utf-8")
            os.replace(staging, path)
        except OSError as exc:  # e.g. a read-only store: /metrics still answers
            log.warning("could not write %s: %s", path, exc)


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


def start_metrics_server(
    collector: Collector, *, address: str, port: int, routes: Mapping[str, Route] | None = None
) -> MetricsServer:
    """Serve `collector` on http://address:port/metrics from a fresh registry, in a thread,
    and each of `routes` at its own path (`/health`).

    Raises SettingsError when the address cannot be bound (e.g. the port is taken).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, thread = serve_registry(registry, address=address, port=port, routes=routes or {})
    except OSError as exc:
        raise SettingsError(
            f"cannot serve /metrics on {address}:{port} ({exc.strerror or exc}); pass "
            f"--metrics-port or set {PORT_ENV} to a free port, or 0 to turn /metrics off"
        ) from exc
    return MetricsServer(
        address=address, port=int(server.server_port), _server=server, _thread=thread
    )
