"""Where /metrics listens (`MetricsSettings`, a part of the settings) and its HTTP server.

PULSAR_LENS_METRICS_PORT              port of /metrics (0: off)
PULSAR_LENS_METRICS_ADDRESS           bind address (127.0.0.1)
PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS per-subscription series for at most this many (500)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.registry import Collector, CollectorRegistry

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.parts import DEFAULT_METRICS_ADDRESS as DEFAULT_ADDRESS
from pulsar_lens.core.parts import METRICS_ADDRESS_ENV as ADDRESS_ENV
from pulsar_lens.core.parts import METRICS_MAX_SUBSCRIPTIONS_ENV as MAX_SUBSCRIPTIONS_ENV
from pulsar_lens.core.parts import METRICS_PORT_ENV as PORT_ENV
from pulsar_lens.core.parts import SERVE_PORT, MetricsSettings, parse_port
from pulsar_lens.exporter.http import Route, serve_registry

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "MAX_SUBSCRIPTIONS_ENV",
    "PORT_ENV",
    "SERVE_PORT",
    "MetricsServer",
    "MetricsSettings",
    "parse_port",
    "start_metrics_server",
]


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
            f"--metrics-port or set {PORT_ENV} to a free port, or 0 to turn /metrics off",
            setting=PORT_ENV,
        ) from exc
    return MetricsServer(
        address=address, port=int(server.server_port), _server=server, _thread=thread
    )
