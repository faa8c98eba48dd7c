"""A call ends by its deadline whichever part of the answer is slow: the connection accepted
but never served, a status line or headers trickled a byte at a time, a body or its chunk
sizes trickled. Each byte comes well within the per-read timeout, so only the deadline can end
the call; a trickle would last 300 s."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import pytest

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.oauth2 import (
    WELL_KNOWN,
    ClientCredentialsFlow,
    Credentials,
    OAuth2Error,
)
from pulsar_lens.core.errors import AdminApiUnreachable
from pulsar_lens.core.model import parse_errors
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.store import Store
from tests.fake_admin import FakeAdmin, Raw, Seen
from tests.lens_cli import run_lens

EVERY = 1.5  # seconds between two bytes: far within every per-read timeout used here
BYTES = 200  # so a trickle lasts 300 s
CLUSTERS = "/admin/v2/clusters"
TENANTS = "/admin/v2/tenants"
BULK = "/admin/v2/broker-stats/topics"
TOKEN = "/oauth/token"
SECRET = "client-secret-b9f2e7"


def dripped(data: bytes) -> Iterator[bytes]:
    for i in range(len(data)):
        time.sleep(EVERY)
        yield data[i : i + 1]


def slow_answer(phase: str) -> Raw:
    """A 200 answer that comes a byte every EVERY seconds from `phase` on."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if phase == "status line":
        return Raw(dripped(b"HTTP/1.1 200 " + b"O" * BYTES))
    if phase == "header line":
        return Raw(chain([b"HTTP/1.1 200 OK\r\n"], dripped(b"X-Slow: " + b"a" * BYTES)))
    if phase == "header lines":  # under http.client's 100 headers, each a line of its own
        return Raw(chain([b"HTTP/1.1 200 OK\r\n"], dripped(b"A: 1\r\n" * (BYTES // 6))))
    if phase == "body":
        body = b"[" + b" " * BYTES + b"]"
        return Raw(chain([head + b"Content-Length: %d\r\n\r\n" % len(body)], dripped(body)))
    if phase == "chunk size line":  # one chunk whose size line never ends
        size_line = b"0" * BYTES + b"2\r\n[]\r\n0\r\n\r\n"
        return Raw(chain([head + b"Transfer-Encoding: chunked\r\n\r\n"], dripped(size_line)))
    raise AssertionError(f"no such phase {phase!r}")


PHASES = ("accept", "status line", "header line", "header lines", "body", "chunk size line")
DEADLINE = 2.0
LONGEST = 30.0  # seconds: a wide margin past DEADLINE for a loaded machine, far below 300


@contextlib.contextmanager
def misbehaving(phase: str, path: str) -> Iterator[str]:
    """The base URL of a loopback server whose answer to `path` is slow in `phase`."""
    if phase == "accept":  # never accepted: the kernel queues the connection, nobody reads it
        with socket.create_server(("127.0.0.1", 0)) as listener:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        return
    with FakeAdmin() as fake:
        fake.rule(path, lambda seen: slow_answer(phase))
        yield fake.url


@pytest.mark.parametrize("phase", PHASES)
def test_admin_call_ends_by_the_polls_deadline_whatever_part_is_slow(phase: str) -> None:
    with misbehaving(phase, CLUSTERS) as url:
        client = AdminClient(url, timeout=10.0)
        started = time.monotonic()
        client.deadline = started + DEADLINE
        with pytest.raises(AdminApiUnreachable) as caught:
            client.get_json(CLUSTERS)
        took = time.monotonic() - started
        client.close()
    assert took < LONGEST, f"{phase}: the call took {took:.1f}s with a {DEADLINE:g}s deadline"
    assert caught.value.path == CLUSTERS
    assert "deadline passed" in caught.value.reason, caught.value.reason


@pytest.mark.parametrize("phase", PHASES)
def test_token_fetch_ends_by_the_callers_deadline_whatever_part_is_slow(phase: str) -> None:
    with misbehaving(phase, WELL_KNOWN) as url:
        flow = ClientCredentialsFlow(Credentials("lens", Secret(SECRET), url), timeout=10.0)
        started = time.monotonic()
        with pytest.raises(OAuth2Error) as caught:
            flow.token(deadline=started + DEADLINE)
        took = time.monotonic() - started
        flow.close()
    assert took < LONGEST, f"{phase}: the fetch took {took:.1f}s with a {DEADLINE:g}s deadline"
    assert f"OAuth2 issuer at {url}{WELL_KNOWN}: no whole answer" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_connection_cut_off_at_its_deadline_is_not_reused() -> None:
    with FakeAdmin() as fake:
        fake.rule(CLUSTERS, lambda seen: slow_answer("header line"))
        client = AdminClient(fake.url, timeout=10.0, pool_size=1)
        client.deadline = time.monotonic() + DEADLINE
        with pytest.raises(AdminApiUnreachable):
            client.get_json(CLUSTERS)
        client.deadline = None
        # a half-read connection taken again would read the trickle's bytes as this answer
        assert client.get_json(TENANTS) == json.loads(fake.recorded(TENANTS)[1])
        client.close()


# --- through `pulsar-lens collect --once` ---------------------------------------------------

POLL_DEADLINE = 10  # seconds; the run must end well within CLI_LONGEST
CLI_LONGEST = 60.0


def collect_once(store: Path, env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds taken, exit status, stderr) of `collect --once` with a 10 s poll deadline."""
    settings = {"PULSAR_LENS_POLL_DEADLINE": f"{POLL_DEADLINE}s", **env}
    started = time.monotonic()
    done = run_lens("collect", "--once", "--store", str(store), env=settings, timeout=240)
    return time.monotonic() - started, done.returncode, done.stderr


LATE_HEAD = "could not reach the admin API: no whole status line and headers came before the poll's"


def test_collect_once_ends_by_its_deadline_when_the_first_calls_headers_trickle(
    tmp_path: Path,
) -> None:
    with FakeAdmin() as fake:
        fake.rule(CLUSTERS, lambda seen: slow_answer("header line"))
        took, status, stderr = collect_once(tmp_path, {"PULSAR_ADMIN_URL": fake.url})
        asked = len(fake.seen(CLUSTERS))
    assert took < CLI_LONGEST, f"collect --once took {took:.0f}s with a {POLL_DEADLINE}s deadline"
    # without the clusters no broker is known and no table has a row: nothing is stored
    assert (status, asked) == (1, 1), stderr[-3000:]
    last_line = stderr.strip().splitlines()[-1]
    assert f"(GET {CLUSTERS}: {LATE_HEAD} deadline passed)" in last_line


def test_collect_once_ends_by_its_deadline_when_a_per_broker_calls_headers_trickle(
    tmp_path: Path,
) -> None:
    with FakeAdmin() as fake:
        fake.rule(BULK, lambda seen: slow_answer("header line"))
        took, status, stderr = collect_once(tmp_path, {"PULSAR_ADMIN_URL": fake.url})
        asked = len(fake.seen(BULK))
    assert took < CLI_LONGEST, f"collect --once took {took:.0f}s with a {POLL_DEADLINE}s deadline"
    assert (status, asked) == (0, 1), stderr[-3000:]
    errors = parse_errors(Store(tmp_path).snapshots()["errors_json"].iloc[0])
    (error,) = [e for e in errors if e.endpoint == f"GET {fake.url}{BULK}"]
    assert LATE_HEAD in error.message
    assert Store(tmp_path).read_latest("bundles").num_rows > 0  # what did answer is stored


def test_collect_once_ends_by_its_deadline_when_the_token_endpoints_headers_trickle(
    tmp_path: Path,
) -> None:
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"client_id": "lens", "client_secret": SECRET}))

    def discovery(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps({"token_endpoint": fake.url + TOKEN}).encode()
        return 200, {"Content-Type": "application/json"}, body

    with FakeAdmin() as fake:
        fake.rule(WELL_KNOWN, discovery)
        fake.rule(TOKEN, lambda seen: slow_answer("header line"))
        env = {
            "PULSAR_ADMIN_URL": fake.url,
            "PULSAR_LENS_OAUTH2_ISSUER_URL": fake.url,
            "PULSAR_LENS_OAUTH2_PRIVATE_KEY": str(credentials),
        }
        took, status, stderr = collect_once(tmp_path / "store", env)
        token_posts = [s for s in fake.seen(TOKEN) if s.method == "POST"]
        admin_calls = fake.seen("/admin/")
    assert took < CLI_LONGEST, f"collect --once took {took:.0f}s with a {POLL_DEADLINE}s deadline"
    assert token_posts and not admin_calls  # no call went out without its token
    assert status == 1, stderr[-3000:]  # nothing answered: nothing stored, and said so
    assert f"OAuth2 issuer at {fake.url}{TOKEN}: no whole answer" in stderr
    assert SECRET not in stderr
