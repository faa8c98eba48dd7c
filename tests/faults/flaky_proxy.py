"""A loopback HTTP proxy in front of a real admin API that is slow, flaky and lies, at set and
seeded rates per request.

`FlakyProxy(upstream, rates={...}, seed=...)` listens on 127.0.0.1 (a free port) and forwards
each request to `upstream`, then answers it according to a fault drawn for that request:

    delay          the real answer, after `delay` seconds
    reset_before   the connection reset (RST) before a byte of the answer is sent
    reset_after    the status line and headers sent, then the connection reset (an answer
                   with no body, e.g. 204, is complete with its head: sent as it is)
    502, 503       an error status with an HTML page, no Retry-After
    503_retry      503 with `Retry-After: <retry_after>`
    truncate       Content-Length of the whole answer, half of it sent, then the connection
                   closed (no body: sent as it is, and recorded as no fault)
    html200        200 with an HTML error page (Content-Type text/html)

`rates` maps faults to probabilities (their sum at most 1; the rest are answered as they are).
The draw of a request depends only on the seed, the method, the path and query and how many
times that path was asked before, so a run is the same whatever the order of the threads.
A path containing one of `stall` is never answered: the connection is accepted and held open
until the proxy stops. Every request is recorded in `seen` (when it arrived, what it got).

The upstream's own address (host:port) in answers and Location headers is rewritten to the
proxy's, and back in request targets, so the per-broker calls a poll makes to the addresses
the broker lists come back through the proxy too. Upstream answers are asked for uncompressed.
"""

from __future__ import annotations

import http.client
import random
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

FAULTS = (
    "delay",
    "reset_before",
    "reset_after",
    "502",
    "503",
    "503_retry",
    "truncate",
    "html200",
)
STALL_LIMIT = 600.0  # seconds a stalled connection is held at most (the proxy stops first)
MAX_REQUEST_HEAD = 64 * 1024
HTML = (
    b"<html><head><title>Error</title></head><body><h1>Service temporarily unavailable</h1>"
    b"<p>The gateway could not reach the server.</p></body></html>"
)
REASONS = {200: "OK", 502: "Bad Gateway", 503: "Service Unavailable"}
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass(frozen=True)
class Seen:
    """One request the proxy received: when, what, and the fault it got."""

    at: float  # time.monotonic()
    wall: float  # time.time(), to place it in a poll by the snapshot's collected_at
    method: str
    path: str
    query: str
    fault: str  # one of FAULTS, "stall", or "" for a faithful answer


class FlakyProxy:
    def __init__(
        self,
        upstream: str,
        *,
        rates: Mapping[str, float] | None = None,
        seed: int = 0,
        delay: float = 0.5,
        retry_after: int = 1,
        stall: Iterable[str] = (),
    ) -> None:
        parts = urlsplit(upstream)
        assert parts.scheme == "http" and parts.hostname and parts.port, upstream
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.upstream_netloc = parts.netloc
        self.delay = delay
        self.retry_after = retry_after
        self.configure(rates or {}, seed=seed, stall=stall)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.proxy = self
        self.netloc = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.netloc}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def configure(
        self, rates: Mapping[str, float], *, seed: int = 0, stall: Iterable[str] = ()
    ) -> None:
        """New fault rates, seed and stalled paths for the requests from now on."""
        unknown = set(rates) - set(FAULTS)
        assert not unknown, f"unknown faults {unknown}"
        assert sum(rates.values()) <= 1.0 + 1e-9, rates
        self.rates = dict(rates)
        self.seed = seed
        self.stall = tuple(stall)

    def __enter__(self) -> FlakyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)

    def clear(self) -> list[Seen]:
        """The requests seen so far, forgotten (the next draws start again per path)."""
        with self._lock:
            seen, self.seen = self.seen, []
        return seen

    # --- the draw ----------------------------------------------------------------------

    def _draw(self, method: str, path: str, query: str) -> Seen:
        with self._lock:
            if any(part in path for part in self.stall):
                fault = "stall"
            else:
                key = (method, path, query)
                n = sum(1 for s in self.seen if (s.method, s.path, s.query) == key)
                roll = random.Random(f"{self.seed}|{method}|{path}?{query}|{n}").random()
                fault, edge = "", 0.0
                for name in FAULTS:
                    edge += self.rates.get(name, 0.0)
                    if roll < edge:
                        fault = name
                        break
            seen = Seen(time.monotonic(), time.time(), method, path, query, fault)
            self.seen.append(seen)
        return seen

    def _void(self, seen: Seen) -> None:
        """Record that a drawn fault could not be played (an empty answer cannot be cut)."""
        with self._lock:
            self.seen = [replace(s, fault="") if s is seen else s for s in self.seen]

    # --- the answer --------------------------------------------------------------------

    def forward(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            sent = {k: v for k, v in headers if k.lower() not in _HOP_BY_HOP | {"host"}}
            sent["Accept-Encoding"] = "identity"
            sent["Host"] = self.upstream_netloc
            # a broker id in the path (ownedNamespaces) is the upstream's own
            target = target.replace(self.netloc, self.upstream_netloc)
            conn.request(method, target, body=body or None, headers=sent)
            resp = conn.getresponse()
            data = resp.read()
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP]
            status, reason = resp.status, resp.reason
        finally:
            conn.close()
        ours, theirs = self.netloc.encode(), self.upstream_netloc.encode()
        kept = [
            (k, v.replace(self.upstream_netloc, self.netloc) if k.lower() == "location" else v)
            for k, v in kept
        ]
        return status, reason, kept, data.replace(theirs, ours)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: FlakyProxy


def _head(status: int, reason: str, headers: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        proxy = self.server.proxy
        while not proxy._stopped.is_set():  # keep-alive: one request after another
            try:
                request = self._read_request()
            except OSError:
                return
            if request is None:
                return
            method, target, headers, body = request
            parts = urlsplit(target)
            seen = proxy._draw(method, parts.path, parts.query)
            if not self._answer(proxy, seen, method, target, headers, body):
                return

    def _read_request(self) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
        line = self.rfile.readline(MAX_REQUEST_HEAD)
        if not line:
            return None
        method, target, _version = line.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        while True:
            raw = self.rfile.readline(MAX_REQUEST_HEAD).decode("latin-1")
            if raw in ("\r\n", "\n", ""):
                break
            name, _, value = raw.partition(":")
            headers.append((name.strip(), value.strip()))
        length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        body = self.rfile.read(length) if length else b""
        return method, target, headers, body

    def _reset(self) -> None:
        """Close with an RST: SO_LINGER on with a zero timeout."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _answer(
        self,
        proxy: FlakyProxy,
        seen: Seen,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> bool:
        """Answer one request; False when the connection is gone."""
        fault = seen.fault
        if fault == "stall":
            proxy._stopped.wait(STALL_LIMIT)
            return False
        if fault == "reset_before":
            self._reset()
            return False
        if fault in ("502", "503", "503_retry", "html200"):
            status = 200 if fault == "html200" else int(fault[:3])
            extra = [("Retry-After", str(proxy.retry_after))] if fault == "503_retry" else []
            kept = [("Content-Type", "text/html"), *extra]
            head = _head(status, REASONS[status], kept, len(HTML))
            self.wfile.write(head + HTML)
            return True
        if fault == "delay":
            time.sleep(proxy.delay)
        status, reason, kept, data = proxy.forward(method, target, headers, body)
        head = _head(status, reason, kept, len(data))
        if fault in ("reset_after", "truncate") and not data:  # e.g. a 204: whole at its head
            proxy._void(seen)
            fault = ""
        if fault == "reset_after":
            self.wfile.write(head)
            time.sleep(0.05)  # the head leaves before the reset
            self._reset()
            return False
        if fault == "truncate":
            self.wfile.write(head + data[: len(data) // 2])
            self.connection.shutdown(socket.SHUT_WR)
            return False
        self.wfile.write(head + data)
        return True
