"""A loopback HTTP server that answers like the recorded Pulsar 4.0.7 admin API, then misbehaves
on request: for tests that run `pulsar-lens` as a subprocess against "a cluster".

`FakeAdmin(scenario)` serves tests/data/admin_api/<scenario> on 127.0.0.1 (a free port), with
the recorded broker address rewritten to its own, so per-broker calls come back to it.
`rule(path, fn)` replaces the answer of one path: `fn(request)` returns (status, headers,
body bytes) or an iterable of byte chunks to trickle, or `Raw(chunks)`: bytes sent as they
come, status line and headers included, to misbehave before the body; `mutate(path, fn)`
edits the recorded JSON instead. GET and POST are answered alike (a POST's body is read and
dropped). Every request is kept in `requests` (path, headers, method).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.collectors.recorded import DATA, index

RECORDED_HOST = "127.0.0.1:8080"


@dataclass(frozen=True)
class Seen:
    path: str
    query: str
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "GET"


@dataclass(frozen=True)
class Raw:
    """An answer written exactly as `chunks` give it, each flushed on its own: the status
    line and headers are the rule's to send (or to trickle, or never to finish)."""

    chunks: Iterable[bytes]


Answer = tuple[int, dict[str, str], bytes | Iterable[bytes]] | Raw
Rule = Callable[[Seen], Answer]


class FakeAdmin:
    def __init__(self, scenario: str = "default") -> None:
        self.scenario = scenario
        self.rules: dict[str, Rule] = {}
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.host}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeAdmin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- what it answers -----------------------------------------------------------------

    def recorded(self, path: str, query: str = "") -> tuple[int, bytes]:
        """The recorded answer (status, body) of a path, the broker address made ours."""
        entries = [e for e in index(self.scenario) if e["path"] == path]
        exact = [e for e in entries if e["query"] == query] or entries
        if not exact:
            return 404, json.dumps({"reason": f"no recording of {path}"}).encode()
        entry = exact[0]
        text = (DATA / self.scenario / entry["file"]).read_text() if entry["file"] else ""
        return int(entry["status"]), text.replace(RECORDED_HOST, self.host).encode()

    def rule(self, path: str, answer: Rule) -> None:
        self.rules[path.replace(RECORDED_HOST, self.host)] = answer

    def mutate(self, path: str, edit: Callable[[Any], Any]) -> None:
        """Answer `path` with its recorded JSON passed through `edit`."""

        def answer(seen: Seen) -> Answer:
            status, body = self.recorded(path, seen.query)
            payload = edit(json.loads(body))
            return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()

        self.rule(path, answer)

    def seen(self, path_part: str = "") -> list[Seen]:
        with self._lock:
            return [s for s in self.requests if path_part in s.path]

    # --- the server ----------------------------------------------------------------------

    def _answer(self, seen: Seen) -> Answer:
        rule = self.rules.get(seen.path)
        if rule is not None:
            return rule(seen)
        path = seen.path.replace(self.host, RECORDED_HOST)
        status, body = self.recorded(path, seen.query)
        return status, {"Content-Type": "application/json"}, body

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each body waits ~40 ms for an ACK

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                seen = Seen(parts.path, parts.query, dict(self.headers.items()), self.command)
                with fake._lock:
                    fake.requests.append(seen)
                try:
                    answer = fake._answer(seen)
                except Exception as exc:  # a broken rule is a 500, never a hung test
                    answer = 500, {}, f"fake admin: {exc!r}".encode()
                if isinstance(answer, Raw):
                    self.close_connection = True
                    self._trickle(answer.chunks)
                    return
                status, headers, body = answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_header("Connection", "close")
                self.end_headers()
                self._trickle(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.do_GET()

            def _trickle(self, chunks: Iterable[bytes]) -> None:
                try:
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError:  # the client gave up: that is what trickling tests want
                    return

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


def echo_headers(seen: Seen) -> Iterator[str]:
    """The request's headers as an echoing server would quote them."""
    for name, value in seen.headers.items():
        yield f"{name}: {value}"
