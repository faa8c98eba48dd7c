"""AdminClient: auth, TLS settings, timeouts, retries only on GET, typed errors, no leaks."""

from __future__ import annotations

import base64
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
from requests.adapters import HTTPAdapter
from responses import matchers

from pulsar_lens.collectors import admin_auth
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.core.errors import AdminApiError, AdminApiUnreachable, CollectorError

BASE = "http://broker-0:8080"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXJvbGU.s3cr3t-SIGNATURE_value"
CLUSTERS = f"{BASE}/admin/v2/clusters"


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def client(**kwargs: object) -> AdminClient:
    return AdminClient(BASE, backoff=0.0, **kwargs)  # type: ignore[arg-type]


def test_admin_client_sends_bearer_token(mock: responses.RequestsMock) -> None:
    mock.get(
        CLUSTERS,
        json=["standalone"],
        match=[matchers.header_matcher({"Authorization": f"Bearer {TOKEN}"})],
    )
    assert client(token=TOKEN).get_json("/admin/v2/clusters") == ["standalone"]


def test_admin_client_reads_token_file(mock: responses.RequestsMock, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    mock.get(
        CLUSTERS,
        json=["c"],
        match=[matchers.header_matcher({"Authorization": f"Bearer {TOKEN}"})],
    )
    assert client(token_file=path).get_json("/admin/v2/clusters") == ["c"]


def test_admin_client_missing_token_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(CollectorError, match="PULSAR_ADMIN_TOKEN_FILE"):
        client(token_file=tmp_path / "absent")


def test_admin_client_from_env_reads_url_token_and_tls(tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text(TOKEN)
    env = {
        "PULSAR_ADMIN_URL": "https://broker-0:8443",
        "PULSAR_ADMIN_TOKEN_FILE": str(token_file),
        "PULSAR_LENS_CA_BUNDLE": "/etc/ssl/pulsar-ca.pem",
    }
    made = AdminClient.from_env(env)
    assert made.base_url == "https://broker-0:8443"
    assert made.session.headers["Authorization"] == f"Bearer {TOKEN}"
    assert made.session.verify == "/etc/ssl/pulsar-ca.pem"


def test_admin_client_from_env_prefers_token_over_file_and_can_skip_verify() -> None:
    env = {
        "PULSAR_ADMIN_TOKEN": TOKEN,
        "PULSAR_ADMIN_TOKEN_FILE": "/nonexistent",
        "PULSAR_LENS_TLS_VERIFY": "false",
    }
    made = AdminClient.from_env(env)
    assert made.base_url == "http://localhost:8080"
    assert made.session.verify is False
    assert made.has_token


def test_admin_client_verifies_tls_by_default() -> None:
    assert AdminClient("https://broker-0:8443").session.verify is True


def test_admin_client_rejects_a_relative_url() -> None:
    with pytest.raises(CollectorError, match="PULSAR_ADMIN_URL"):
        AdminClient("broker-0:8080")


def test_admin_client_passes_a_timeout_on_every_call(mock: responses.RequestsMock) -> None:
    seen: list[object] = []
    original = requests.Session.request

    def spy(self: requests.Session, *args: object, **kwargs: object) -> requests.Response:
        seen.append(kwargs.get("timeout"))
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    mock.get(CLUSTERS, json=[])
    mock.put(f"{BASE}/admin/v2/x", status=204)
    c = client(timeout=3.5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(requests.Session, "request", spy)
        c.get_json("/admin/v2/clusters")
        c.get_json("/admin/v2/clusters", timeout=1.0)
        c.put("/admin/v2/x")
    assert seen == [3.5, 1.0, 3.5]


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_admin_client_retries_get_on_transient_status(
    mock: responses.RequestsMock, status: int
) -> None:
    mock.get(CLUSTERS, status=status)
    mock.get(CLUSTERS, json=["standalone"])
    c = client(retries=3)
    assert c.get_json("/admin/v2/clusters") == ["standalone"]
    assert c.requests_made == 2


def test_admin_client_retries_get_on_connection_error(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, body=requests.ConnectionError("refused"))
    mock.get(CLUSTERS, json=["standalone"])
    assert client().get_json("/admin/v2/clusters") == ["standalone"]


def test_admin_client_gives_up_after_bounded_retries(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, status=503, json={"reason": "busy"})
    c = client(retries=2)
    with pytest.raises(AdminApiError) as caught:
        c.get_json("/admin/v2/clusters")
    assert caught.value.status == 503
    assert c.requests_made == 3


def test_admin_client_backs_off_exponentially(
    mock: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    ours, real_sleep = threading.get_ident(), time.sleep

    def sleep(seconds: float) -> None:  # `time.sleep` is every thread's: count this one's
        if threading.get_ident() == ours:
            waits.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr("pulsar_lens.collectors.admin_transport.time.sleep", sleep)
    mock.get(CLUSTERS, status=502)
    c = AdminClient(BASE, retries=3, backoff=0.1)
    with pytest.raises(AdminApiError):
        c.get_json("/admin/v2/clusters")
    assert waits == pytest.approx([0.1, 0.2, 0.4])


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_admin_client_never_retries_writes(mock: responses.RequestsMock, method: str) -> None:
    url = f"{BASE}/admin/v2/namespaces/public/default/unload"
    mock.add(method, url, status=503)
    mock.add(method, url, status=204)
    c = client(retries=3)
    call = c.put if method == "PUT" else c.post
    with pytest.raises(AdminApiError):
        call("/admin/v2/namespaces/public/default/unload")
    assert c.requests_made == 1


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_admin_client_never_retries_writes_on_connection_error(
    mock: responses.RequestsMock, method: str
) -> None:
    url = f"{BASE}/admin/v2/x"
    mock.add(method, url, body=requests.ConnectionError("reset"))
    c = client(retries=3)
    with pytest.raises(AdminApiUnreachable):
        (c.put if method == "PUT" else c.post)("/admin/v2/x")
    assert c.requests_made == 1


def test_admin_client_does_not_retry_a_read_timeout(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, body=requests.ReadTimeout("slow"))
    c = client(retries=3, timeout=2.0)
    with pytest.raises(AdminApiUnreachable, match="no answer within 2s"):
        c.get_json("/admin/v2/clusters")
    assert c.requests_made == 1


def test_admin_client_unauthorized_hints_at_the_token_setting(
    mock: responses.RequestsMock,
) -> None:
    mock.get(CLUSTERS, status=401, body="HTTP 401 Unauthorized")
    with pytest.raises(AdminApiError) as caught:
        client().get_json("/admin/v2/clusters")
    assert caught.value.status == 401
    assert "set PULSAR_ADMIN_TOKEN" in str(caught.value)
    assert str(caught.value).startswith("GET /admin/v2/clusters returned 401")


def test_admin_client_forbidden_with_token_says_it_was_refused(
    mock: responses.RequestsMock,
) -> None:
    mock.get(CLUSTERS, status=403, json={"reason": "Don't have permission"})
    with pytest.raises(AdminApiError, match="was refused") as caught:
        client(token=TOKEN).get_json("/admin/v2/clusters")
    assert "Don't have permission" in str(caught.value)


def test_admin_client_not_found_keeps_the_broker_reason(mock: responses.RequestsMock) -> None:
    mock.get(
        f"{BASE}/admin/v2/namespaces/t/gone/bundles",
        status=404,
        json={"reason": "Namespace does not exist"},
    )
    with pytest.raises(AdminApiError, match="Namespace does not exist") as caught:
        client().get_json("/admin/v2/namespaces/t/gone/bundles")
    assert caught.value.status == 404


def test_admin_client_malformed_json_is_an_unreadable_body(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, body='{"truncated": [', content_type="application/json")
    with pytest.raises(AdminApiError, match="unreadable body") as caught:
        client().get_json("/admin/v2/clusters")
    assert caught.value.status is None


def test_admin_client_empty_204_is_none(mock: responses.RequestsMock) -> None:
    mock.get(f"{BASE}/admin/v2/broker-stats/load-report", status=204)
    assert client().get_json("/admin/v2/broker-stats/load-report") is None


def test_admin_client_unreachable_is_typed(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, body=requests.ConnectionError("Connection refused"))
    with pytest.raises(AdminApiUnreachable, match="Connection refused"):
        client(retries=1).get_json("/admin/v2/clusters")


def test_admin_client_tls_failure_hints_at_ca_bundle(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, body=requests.exceptions.SSLError("certificate verify failed"))
    c = client(retries=3)
    with pytest.raises(AdminApiUnreachable, match="PULSAR_LENS_CA_BUNDLE"):
        c.get_json("/admin/v2/clusters")
    assert c.requests_made == 1


def test_admin_client_sends_to_another_broker_and_names_it(mock: responses.RequestsMock) -> None:
    mock.get("http://broker-1:8080/admin/v2/broker-stats/topics", status=500, body="boom")
    with pytest.raises(AdminApiError) as caught:
        client().get_json("/admin/v2/broker-stats/topics", base_url="http://broker-1:8080")
    assert caught.value.path == "http://broker-1:8080/admin/v2/broker-stats/topics"


def calls_to_two_brokers(mock: responses.RequestsMock, rounds: int = 3) -> None:
    """`rounds` calls to broker-1 and to broker-2 by turns, from one client."""
    for broker in ("broker-1", "broker-2"):
        mock.get(f"http://{broker}:8080/admin/v2/brokers/ready", body="ok")
    c = client()
    for _ in range(rounds):
        for broker in ("broker-1", "broker-2"):
            c.get_text("/admin/v2/brokers/ready", base_url=f"http://{broker}:8080")


def test_the_environments_proxies_apply_per_broker_and_are_read_once_per_origin(
    mock: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """requests reads HTTP_PROXY / NO_PROXY for every call; the session reads them once per
    origin, with the same outcome: the proxied broker goes through the proxy, the one
    NO_PROXY names does not, call after call."""
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "broker-2")
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    reads: list[str] = []
    real = requests.utils.get_environ_proxies

    def counted(url: str, no_proxy: str | None = None) -> dict[str, str]:
        reads.append(url)
        return real(url, no_proxy=no_proxy)

    monkeypatch.setattr(requests.sessions, "get_environ_proxies", counted)
    calls_to_two_brokers(mock)
    proxies = [call.request.req_kwargs["proxies"] for call in mock.calls]  # type: ignore[attr-defined]
    assert [p.get("http") for p in proxies[0::2]] == ["http://proxy.example:3128"] * 3
    assert [p.get("http") for p in proxies[1::2]] == [None] * 3
    assert len(reads) == 2  # once per origin, not once per call
    monkeypatch.setenv("HTTP_PROXY", "http://other.example:3128")
    assert client().get_text("/admin/v2/brokers/ready", base_url="http://broker-1:8080") == "ok"
    newest = mock.calls[-1].request.req_kwargs["proxies"]  # type: ignore[attr-defined]
    assert newest.get("http") == "http://other.example:3128"  # a new client reads it anew


def test_admin_client_keeps_token_on_redirect_to_a_trusted_broker(
    mock: responses.RequestsMock,
) -> None:
    stats = "/admin/v2/persistent/public/default/t/stats"
    mock.get(BASE + stats, status=307, headers={"Location": f"http://broker-1:8080{stats}"})
    mock.get(
        f"http://broker-1:8080{stats}",
        json={"ok": True},
        match=[matchers.header_matcher({"Authorization": f"Bearer {TOKEN}"})],
    )
    c = client(token=TOKEN, trusted_origins=["http://broker-1:8080"])
    assert c.get_json(stats) == {"ok": True}


def test_admin_client_counts_requests(mock: responses.RequestsMock) -> None:
    mock.get(CLUSTERS, json=[])
    c = client()
    for _ in range(3):
        c.get_json("/admin/v2/clusters")
    assert c.requests_made == 3


# --- the token never leaks -----------------------------------------------------------------


def _echo_headers(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
    echoed = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
    return 401, {}, f"Unauthorized. You sent:\n{echoed}"


@pytest.mark.parametrize("status", [400, 401, 403, 500])
def test_admin_client_never_puts_the_token_in_errors_even_when_echoed(
    mock: responses.RequestsMock, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    def echo(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        _, headers, text = _echo_headers(request)
        return status, headers, f'{{"reason": "{text.replace(chr(10), " ")}"}}'

    mock.add_callback("GET", CLUSTERS, callback=echo)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AdminApiError) as caught:
        client(token=TOKEN).get_json("/admin/v2/clusters")
    texts = [str(caught.value), repr(caught.value), caught.value.body, caught.value.hint]
    texts += [r.getMessage() for r in caplog.records]
    assert all(TOKEN not in t for t in texts)
    assert "Bearer ***" in caught.value.body


def test_admin_client_never_puts_the_token_in_unreadable_body_errors(
    mock: responses.RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    mock.add_callback("GET", CLUSTERS, callback=lambda r: (200, {}, "<html>" + _echo_headers(r)[2]))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AdminApiError) as caught:
        client(token=TOKEN).get_json("/admin/v2/clusters")
    assert TOKEN not in str(caught.value)
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


def test_admin_client_never_puts_the_token_in_retry_logs_or_unreachable_errors(
    mock: responses.RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    mock.get(CLUSTERS, body=requests.ConnectionError(f"refused; header was Bearer {TOKEN}"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AdminApiUnreachable) as caught:
        client(token=TOKEN, retries=2).get_json("/admin/v2/clusters")
    assert TOKEN not in str(caught.value)
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert caplog.records  # the retries were logged


def test_admin_client_repr_hides_the_token() -> None:
    c = client(token=TOKEN)
    assert TOKEN not in repr(c)
    assert "token" in repr(c)


def test_admin_client_get_text_redacts_an_echoed_token(mock: responses.RequestsMock) -> None:
    mock.add_callback(
        "GET", f"{BASE}/admin/v2/brokers/version", callback=lambda r: (200, {}, str(r.headers))
    )
    assert TOKEN not in client(token=TOKEN).get_text("/admin/v2/brokers/version")


# --- where credentials may go --------------------------------------------------------------


def _no_auth(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
    assert "Authorization" not in request.headers, "credentials sent to an untrusted host"
    return 200, {}, '{"ok": true}'


def test_admin_client_drops_the_token_on_a_redirect_to_an_untrusted_host(
    mock: responses.RequestsMock,
) -> None:
    stats = "/admin/v2/persistent/public/default/t/stats"
    mock.get(BASE + stats, status=307, headers={"Location": f"http://elsewhere:8080{stats}"})
    mock.add_callback("GET", f"http://elsewhere:8080{stats}", callback=_no_auth)
    assert client(token=TOKEN).get_json(stats) == {"ok": True}


def test_admin_client_sends_no_token_to_brokers_the_cluster_lists_unless_trusted(
    mock: responses.RequestsMock,
) -> None:
    report = "/admin/v2/broker-stats/load-report"
    mock.add_callback("GET", f"http://broker-1:8080{report}", callback=_no_auth)
    c = client(token=TOKEN)
    c.trust_brokers(["http://broker-1:8080"])  # listed by the cluster: not enough
    assert c.get_json(report, base_url="http://broker-1:8080") == {"ok": True}


def test_admin_client_trusts_listed_brokers_when_told_to(mock: responses.RequestsMock) -> None:
    report = "/admin/v2/broker-stats/load-report"
    mock.get(
        f"http://broker-1:8080{report}",
        json={"ok": True},
        match=[matchers.header_matcher({"Authorization": f"Bearer {TOKEN}"})],
    )
    c = client(token=TOKEN, trusted_origins=["cluster"])
    c.trust_brokers(["http://broker-1:8080"])
    assert c.get_json(report, base_url="http://broker-1:8080") == {"ok": True}


def test_a_401_from_an_untrusted_broker_says_how_to_trust_it(
    mock: responses.RequestsMock,
) -> None:
    mock.get("http://broker-1:8080/admin/v2/x", status=401, body="no")
    with pytest.raises(AdminApiError, match="PULSAR_LENS_TRUSTED_ORIGINS"):
        client(token=TOKEN).get_json("/admin/v2/x", base_url="http://broker-1:8080")


# --- secrets in every shape ----------------------------------------------------------------

PASSWORD = "pa55-W0RD-never-shown"


def test_url_credentials_go_as_basic_auth_and_never_show(
    mock: responses.RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    mock.add_callback(
        "GET", CLUSTERS, callback=lambda r: (500, {}, "echo " + r.headers["Authorization"])
    )
    c = AdminClient(f"http://admin:{PASSWORD}@broker-0:8080", backoff=0.0, retries=0)
    assert c.base_url == BASE and PASSWORD not in repr(c)
    with pytest.raises(AdminApiError) as caught:
        c.get_json("/admin/v2/clusters")
    assert "Basic ***" in str(caught.value)
    texts = [str(caught.value), *(r.getMessage() for r in caplog.records)]
    assert all(PASSWORD not in t and "YWRtaW46" not in t for t in texts)


def test_a_token_with_a_newline_is_refused_without_showing_any_part(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = "first-half-of-it\nsecond-half-of-it"
    with pytest.raises(CollectorError, match="line break") as caught:
        client(token=token)
    texts = [str(caught.value), *(r.getMessage() for r in caplog.records)]
    assert all("half-of-it" not in t for t in texts)


def test_an_unexpected_shape_quoting_the_token_is_redacted_past_the_excerpt(
    mock: responses.RequestsMock,
) -> None:
    from pulsar_lens.collectors.topics import collect_topic_stats

    padding = "x" * 190
    mock.add_callback(
        "GET",
        f"{BASE}/admin/v2/persistent/public/default/t/stats",
        callback=lambda r: (200, {}, f'["{padding}", "{r.headers["Authorization"]}"]'),
    )
    with pytest.raises(AdminApiError) as caught:
        collect_topic_stats(
            client(token=TOKEN), "persistent://public/default/t", web_url=None, timeout=5
        )
    assert TOKEN[:8] not in str(caught.value)


def test_a_newline_in_an_error_body_cannot_forge_a_log_line(
    mock: responses.RequestsMock,
) -> None:
    mock.get(CLUSTERS, status=500, body="boom\n2026-11-25 INFO poll ok\r\x1b[31m")
    with pytest.raises(AdminApiError) as caught:
        client(retries=0).get_json("/admin/v2/clusters")
    text = str(caught.value)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert "boom\\n2026-11-25 INFO poll ok\\r\\x1b[31m" in text


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://[::1", "is not a valid URL"),
        ("ftp://broker:8080", "must start with http:// or https://"),
        ("http://broker:0", "has port 0"),
        ("http://:8080", "has no host"),
    ],
)
def test_admin_urls_that_cannot_work_are_refused(url: str, expected: str) -> None:
    with pytest.raises(CollectorError, match=expected):
        AdminClient(url)


def test_a_binary_token_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(CollectorError, match="is not UTF-8 text"):
        client(token_file=path)


# --- a server that breaks the connection: resets, truncated bodies, silence ----------------

Step = Callable[[socket.socket], bool]  # answers one request; False when the connection is gone


class RawServer:
    """A loopback server that answers each request with the next step of a script (the last
    step repeats), at the socket level: what an HTTP server library would not send."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.stop = threading.Event()
        self.requests = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(5)
        self.listener.close()

    def _serve(self) -> None:
        self.listener.settimeout(0.05)  # so that it sees `stop`
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            while not self.stop.is_set():
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(4096)
                    if not data:
                        return
                    head += data
                step = self.steps[min(self.requests, len(self.steps) - 1)]
                self.requests += 1
                if not step(conn):
                    return


def _head(body: bytes, status: str = "200 OK") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()


def answer(body: bytes) -> Step:
    def step(conn: socket.socket) -> bool:
        conn.sendall(_head(body) + body)
        return True

    return step


def cut(body: bytes, sent: int) -> Step:
    """The whole body's Content-Length, `sent` bytes of it, then the connection closed."""

    def step(conn: socket.socket) -> bool:
        conn.sendall(_head(body) + body[:sent])
        conn.shutdown(socket.SHUT_WR)
        return False

    return step


def _rst(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def reset(*, after_head: bytes | None = None) -> Step:
    def step(conn: socket.socket) -> bool:
        if after_head is not None:
            conn.sendall(_head(after_head))
            time.sleep(0.05)
        _rst(conn)
        return False

    return step


def stall(server_stop: threading.Event, *, head: bytes | None = None, sent: int = 0) -> Step:
    """Nothing more after `sent` bytes of `head`'s answer (or nothing at all), until the end."""

    def step(conn: socket.socket) -> bool:
        if head is not None:
            conn.sendall(_head(head) + head[:sent])
        server_stop.wait(30)
        return False

    return step


def test_a_truncated_body_is_never_taken_for_the_answer_and_a_get_asks_again() -> None:
    # "12" is valid JSON: only the Content-Length tells it is the start of 12345
    with RawServer(cut(b"12345", 2), answer(b"12345")) as server:
        c = AdminClient(server.url, backoff=0.0)
        assert c.get_json("/admin/v2/x") == 12345
    assert c.requests_made == 2


def test_a_body_always_truncated_is_a_clear_error_after_bounded_retries() -> None:
    with RawServer(cut(b"12345", 2)) as server:
        c = AdminClient(server.url, backoff=0.0, retries=3)
        with pytest.raises(AdminApiUnreachable) as caught:
            c.get_json("/admin/v2/x")
    assert c.requests_made == 4
    text = str(caught.value)
    assert text.startswith("GET /admin/v2/x ")
    assert "the answer was truncated: 2 of the 5 bytes its Content-Length announced came" in text
    assert "gave up after 4 attempts" in text


def test_a_reset_after_the_headers_is_retried_and_told_as_a_reset() -> None:
    with RawServer(reset(after_head=b'["a"]'), answer(b'["a"]')) as server:
        c = AdminClient(server.url, backoff=0.0)
        assert c.get_json("/admin/v2/x") == ["a"]
    assert c.requests_made == 2
    with RawServer(reset(after_head=b'["a"]')) as server:
        c = AdminClient(server.url, backoff=0.0, retries=1)
        with pytest.raises(AdminApiUnreachable, match="reset after the headers"):
            c.get_json("/admin/v2/x")
    assert c.requests_made == 2


def test_a_reset_before_any_answer_says_so() -> None:
    with RawServer(reset()) as server:
        c = AdminClient(server.url, backoff=0.0, retries=1)
        with pytest.raises(AdminApiUnreachable, match="reset before an answer came"):
            c.get_json("/admin/v2/x")
    assert c.requests_made == 2


def test_a_truncated_answer_to_a_write_is_not_sent_again() -> None:
    with RawServer(cut(b'{"ok": true}', 3), answer(b'{"ok": true}')) as server:
        c = AdminClient(server.url, backoff=0.0, retries=3)
        with pytest.raises(AdminApiUnreachable, match="truncated"):
            c.post("/admin/v2/x")
    assert c.requests_made == 1


@pytest.mark.parametrize("head", [None, b'{"a": 1}'], ids=["no-answer", "stops-mid-body"])
def test_a_silent_server_cannot_hold_a_call_past_the_polls_deadline(head: bytes | None) -> None:
    stop = threading.Event()
    with RawServer(stall(stop, head=head, sent=3)) as server:
        c = AdminClient(server.url, timeout=20.0)  # a per-read timeout far past the deadline
        c.deadline = time.monotonic() + 0.5
        started = time.monotonic()
        with pytest.raises(AdminApiUnreachable) as caught:
            c.get_json("/admin/v2/x")
        took = time.monotonic() - started
        stop.set()
    # far under the 20 s a read could wait, with room for a busy machine
    assert took < 10, f"the call lasted {took:.1f}s with 0.5s left to the poll"
    said = str(caught.value)
    assert "poll's deadline" in said if head is None else "after 3 bytes" in said, said
    assert c.requests_made == 1  # a timeout is not retried


class ManualClock:
    """The `time` of collectors.admin_transport and collectors.answers: it moves only when the
    client sleeps, so deadline and backoff decisions do not depend on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    manual = ManualClock()
    monkeypatch.setattr("pulsar_lens.collectors.admin_transport.time", manual)
    monkeypatch.setattr("pulsar_lens.collectors.answers.time", manual)
    return manual


def test_a_retry_after_past_the_polls_deadline_is_not_waited_for(
    mock: responses.RequestsMock, clock: ManualClock
) -> None:
    mock.get(CLUSTERS, status=503, headers={"Retry-After": "4"}, body="busy")
    c = client(retries=3)
    c.deadline = clock.now + 1.0
    with pytest.raises(AdminApiError) as caught:
        c.get_json("/admin/v2/clusters")
    assert clock.slept == []
    assert caught.value.status == 503
    assert "not retried: the poll's deadline would pass during the wait" in str(caught.value)
    assert c.requests_made == 1


def test_the_backoff_stops_where_the_polls_deadline_would_pass(
    mock: responses.RequestsMock, clock: ManualClock
) -> None:
    mock.get(CLUSTERS, status=502)
    c = AdminClient(BASE, retries=3, backoff=0.2)
    c.deadline = clock.now + 0.5  # room for the first wait (0.2s), not the second (0.4s)
    with pytest.raises(AdminApiError, match=r"returned 502.*not retried"):
        c.get_json("/admin/v2/clusters")
    assert clock.slept == [0.2]
    assert c.requests_made == 2


def test_a_wait_that_overran_the_polls_deadline_tells_the_failure_it_was_for(
    mock: responses.RequestsMock, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy machine the wait before a retry can end past the poll's deadline though it
    was to end before it: the error is the failure retried for, not "skipped"."""
    mock.get(CLUSTERS, status=502)
    c = AdminClient(BASE, retries=3, backoff=0.2)
    c.deadline = clock.now + 0.5  # room for the first wait (0.2s) ...
    overslept = clock.sleep

    def busy(seconds: float) -> None:
        overslept(seconds + 1.0)  # ... that a busy machine stretches past the deadline

    monkeypatch.setattr(clock, "sleep", busy)
    with pytest.raises(AdminApiError) as caught:
        c.get_json("/admin/v2/clusters")
    assert caught.value.status == 502
    assert "not retried: the poll's deadline passed during the wait" in str(caught.value)
    assert "skipped" not in str(caught.value)
    assert c.requests_made == 1


def test_get_text_refuses_an_html_page_answered_with_200(mock: responses.RequestsMock) -> None:
    page = "<html><body><h1>Bad gateway</h1></body></html>"
    mock.get(f"{BASE}/admin/v2/brokers/version", body=page, content_type="text/html")
    with pytest.raises(AdminApiError, match="with an HTML page, not the answer"):
        client().get_text("/admin/v2/brokers/version")


def test_a_json_call_answered_with_an_html_page_says_it_is_not_json(
    mock: responses.RequestsMock,
) -> None:
    mock.get(CLUSTERS, body="<html>oops</html>", content_type="text/html")
    with pytest.raises(AdminApiError, match=r"status 200 with a body not JSON \(text/html\)"):
        client().get_json("/admin/v2/clusters")


def test_netrc_credentials_go_where_requests_sends_them_looked_up_once_per_origin(
    mock: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A `.netrc` entry reaches its host as requests would send it, and only there; the file
    is looked up once per origin, not for every call."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine broker-1 login reader password netrc-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    lookups: list[str] = []
    real = admin_auth.get_netrc_auth

    def counted(url: str, raise_errors: bool = False) -> tuple[str, str] | None:
        lookups.append(url)
        return real(url, raise_errors)

    monkeypatch.setattr(admin_auth, "get_netrc_auth", counted)
    calls_to_two_brokers(mock)
    sent = [call.request.headers.get("Authorization") for call in mock.calls]
    basic = "Basic " + base64.b64encode(b"reader:netrc-secret").decode()
    assert sent == [basic, None] * 3
    assert len(lookups) == 2


def test_the_connection_pool_key_is_requests_own_worked_out_once_per_origin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Whether the CA bundle is a file or a folder is checked once per origin: the pool key
    equals requests' own, and calls to one server share one connection."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path))  # a folder: `ca_cert_dir`
    worked_out: list[str] = []
    real = HTTPAdapter.build_connection_pool_key_attributes

    def counted(self: HTTPAdapter, request: Any, verify: Any, cert: Any = None) -> Any:
        worked_out.append(request.url)
        return real(self, request, verify, cert)

    monkeypatch.setattr(HTTPAdapter, "build_connection_pool_key_attributes", counted)
    with RawServer(answer(b'["c"]')) as server:
        c = AdminClient(server.url, backoff=0.0)
        for _ in range(4):
            assert c.get_json("/admin/v2/clusters") == ["c"]
        adapter = c.session.get_adapter(server.url)
        request = requests.Request("GET", server.url + "/admin/v2/clusters").prepare()
        verify = c.session.merge_environment_settings(server.url, {}, True, True, None)["verify"]
        assert adapter.build_connection_pool_key_attributes(request, verify) == real(
            adapter, request, verify
        )
        assert verify == str(tmp_path)
        c.close()
    assert len(worked_out) == 1


def test_a_netrc_entry_never_replaces_the_configured_token(
    mock: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """requests lets a `.netrc` entry for the host override an Authorization header; the
    token the settings name is what the admin host gets."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine broker-0 login reader password netrc-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    mock.get(CLUSTERS, json=[])
    client(token=TOKEN).get_json("/admin/v2/clusters")
    assert mock.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"
