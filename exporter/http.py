"""The HTTP server of /metrics, with room for a few plain routes beside it (`/health`).

prometheus_client renders the metrics at any path; a route named here answers its own path
instead, with the status and JSON body its function gives at each request.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import CollectorRegistry

Route = Callable[[], tuple[int, str]]
"""A route's answer: the HTTP status and a JSON body."""
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
REASONS = {200: "200 OK", 503: "503 Service Unavailable", 500: "500 Internal Server Error"}


class QuietHandler(WSGIRequestHandler):
    """No line on stderr per request: a scrape every 15 s would drown the heartbeats."""

    def log_message(self, format: str, *args: Any) -> None:
        return


def with_routes(app: WsgiApp, routes: Mapping[str, Route]) -> WsgiApp:
    """`app`, except at the paths of `routes`."""

    def dispatch(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        route = routes.get(environ.get("PATH_INFO", ""))
        if route is None:
            return app(environ, start_response)
        status, text = route()
        body = text.encode("utf-8")
        headers = [
            ("Content-Type", "application/json; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ]
        start_response(REASONS.get(status, f"{status} Status"), headers)
        return [body]

    return dispatch


def serve_registry(
    registry: CollectorRegistry, *, address: str, port: int, routes: Mapping[str, Route]
) -> tuple[WSGIServer, threading.Thread]:
    """Serve the registry (and `routes`) on address:port from a daemon thread; OSError when
    the address cannot be bound."""

    class Server(ThreadingWSGIServer):
        address_family = _family(address, port)

    app = with_routes(make_wsgi_app(registry), routes)
    server = make_server(address, port, app, Server, handler_class=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True)
    thread.start()
    return server, thread


def _family(address: str, port: int) -> socket.AddressFamily:
    """IPv6 for an IPv6 address (`::`), else IPv4."""
    infos = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM)
    return infos[0][0] if infos else socket.AF_INET
