"""Where /metrics listens (its settings from the environment) and the HTTP server for it.

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
from pulsar_lens.core.settings import process_environ
from pulsar_lens.exporter.families import DEFAULT_MAX_SUBSCRIPTIONS
from pulsar_lens.exporter.http import Route, serve_registry

PORT_ENV = "PULSAR_LENS_METRICS_PORT"
ADDRESS_ENV = "PULSAR_LENS_METRICS_ADDRESS"
MAX_SUBSCRIPTIONS_ENV = "PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS"
DEFAULT_ADDRESS = "127.0.0.1"
SERVE_PORT = 9464  # the default of `serve` and `demo`; `collect` has it off unless asked


def parse_port(text: str, *, name: str = PORT_ENV) -> int:
    """A TCP port 0..65535 (0 turns /metrics off); SettingsError names the setting."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise SettingsError(
            f"{name} must be a port 0..65535 (0 turns /metrics off), got {text!r}", setting=name
        )
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
                    f"{MAX_SUBSCRIPTIONS_ENV} must be a whole number >= 1, got {limit_text!r}",
                    setting=MAX_SUBSCRIPTIONS_ENV,
                )
        if port is None:
            port = parse_port(port_text) if port_text else 0
        return cls(
            port=port,
            address=env.get(ADDRESS_ENV, "").strip() or DEFAULT_ADDRESS,
            max_subscriptions=limit,
        )


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
