"""The collect process's /metrics endpoint: its command-line option, its server, its tally.

`pulsar-lens collect --metrics-port N` (or PULSAR_LENS_METRICS_PORT) serves Prometheus text on
PULSAR_LENS_METRICS_ADDRESS (127.0.0.1) while the loop runs, and `/health` beside it (see
`pulsar_lens.collectors.health`); port 0 or unset: no endpoint.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.parts import METRICS_PORT_ENV as PORT_ENV
from pulsar_lens.core.parts import MetricsSettings, PluginLimits, parse_port

if TYPE_CHECKING:  # the exporter's collector and the store (pandas) load once a command runs
    from pulsar_lens.collectors.health import HealthRecorder
    from pulsar_lens.collectors.heartbeat import Heartbeat, HeartbeatFn
    from pulsar_lens.core.passes import PassProgress
    from pulsar_lens.core.store import Store
    from pulsar_lens.exporter.server import MetricsServer

HEALTH_PATH = "/health"


def port_arg(text: str) -> int:
    try:
        return parse_port(text, name="--metrics-port")
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_metrics_port(parser: argparse.ArgumentParser, *, default_text: str) -> None:
    parser.add_argument(
        "--metrics-port",
        type=port_arg,
        metavar="N",
        help=f"serve Prometheus /metrics on this port, 0 for none (default {PORT_ENV} "
        f"or {default_text})",
    )


class MetricsEndpoint:
    """/metrics over `store` and this process's polls, and /health from `health`, when a port
    is set; else nothing. Given the `clusters` it polls side by side, the poll health is per
    cluster."""

    def __init__(
        self,
        store: Store,
        settings: MetricsSettings,
        *,
        health: HealthRecorder | None = None,
        clusters: Sequence[str] = (),
        plugin_dirs: Sequence[str | os.PathLike[str]] = (),
        plugin_limits: PluginLimits | None = None,
        follows_analyses: bool = True,
    ) -> None:
        """`follows_analyses`: a collect process's, whose results pass calls `analysed()`
        and `record_analyses()` (its families read 0 until the first pass ends); False
        (offline): the families, the plugins' included, are computed at a scrape, and none
        tells of results passes.
        `settings` with the port to serve on (`MetricsSettings.with_port` lays the
        command line's over the settings'); third-party plugins load from `plugin_dirs`
        and run under `plugin_limits`."""
        from pulsar_lens.core.passes import PassProgress
        from pulsar_lens.exporter.collector import LensCollector, PollRecorder

        self.settings = settings
        self.health = health
        self.recorder = PollRecorder(clusters)
        if follows_analyses:
            self.recorder.record_passes(PassProgress())
        self.collector = LensCollector(
            store,
            recorder=self.recorder,
            max_subscriptions=self.settings.max_subscriptions,
            plugin_dirs=plugin_dirs,
            plugin_limits=plugin_limits,
            dashboard_url=self.settings.external_url,
            refresh_on_record=not follows_analyses,
        )
        self.server: MetricsServer | None = None

    def start(self) -> None:
        """Listen now (SettingsError if the port is taken), so a bad port fails at once."""
        if self.settings.port and self.server is None:
            from pulsar_lens.exporter.server import start_metrics_server  # prometheus_client

            routes = {HEALTH_PATH: self.health.answer} if self.health else {}
            self.server = start_metrics_server(
                self.collector,
                address=self.settings.address,
                port=self.settings.port,
                routes=routes,
            )
            print(f"serving metrics on {self.server.url}", file=sys.stderr, flush=True)

    def analysed(self) -> None:
        """The analyses of a new snapshot are stored: build its families from them, off the
        scrape path, when there is an endpoint to scrape them (none: nothing is built)."""
        if self.server is not None:
            self.collector.refresh()

    def record_analyses(self, progress: PassProgress) -> None:
        """The results passes so far, once one has ended (`ResultsWorker.progress()`)."""
        self.recorder.record_passes(progress)

    def record(self, beat: Heartbeat) -> None:
        self.recorder.record(
            at=beat.at,
            duration=beat.duration,
            requests=beat.requests,
            errors=beat.errors,
            failed=not beat.reachable,
            not_stored=beat.write_error is not None,
            cluster=beat.cluster,
            write_seconds=beat.write_seconds,
            interval=beat.interval,
            overran=None if beat.interval is None else beat.overrun is not None,
        )

    def wrap(self, on_heartbeat: HeartbeatFn) -> HeartbeatFn:
        """`on_heartbeat`, then the tally of this poll."""

        def both(beat: Heartbeat) -> None:
            on_heartbeat(beat)
            self.record(beat)

        return both

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.collector.close()


def metrics_port(value: int | None, *, default: int, settings: MetricsSettings) -> int:
    """The command-line port if given, else PULSAR_LENS_METRICS_PORT, else `default`."""
    return settings.with_port(value, default=default).port


def metrics_url(port: int, settings: MetricsSettings) -> str:
    """Where a local browser or curl finds /metrics on this port."""
    address = settings.address
    host = "127.0.0.1" if address in ("", "0.0.0.0", "::") else address
    return f"http://{host}:{port}/metrics"
