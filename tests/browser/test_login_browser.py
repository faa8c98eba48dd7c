"""The dashboard behind an OIDC login, served by `pulsar-lens serve` and driven in Chromium.

The test runs its own OpenID provider on 127.0.0.1: a discovery document, a JWKS, an
/authorize that approves a test user at once and redirects back with a code, and a /token
that checks the client's secret and the PKCE verifier and returns an RS256 id_token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from playwright.sync_api import Page, expect

from pulsar_lens.lab.localpulsar import free_port
from tests.browser.conftest import ROOT
from tests.dashboard.scenario import write_scenario
from tests.waits import wait_until_ok

TIMEOUT_MS = 60_000
CLIENT_ID = "pulsar-lens-test"
CLIENT_SECRET = "oidc-client-secret-Vb7Qx2"
COOKIE_SECRET = "oidc-cookie-secret-0123456789abcdef"
USER = {"sub": "ada", "name": "Ada Lovelace", "email": "ada@example.com"}
KID = "test-key-1"


@dataclass
class Provider:
    """A loopback OpenID provider that approves USER at once."""

    port: int = field(default_factory=free_port)
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)  # "METHOD path" of every request
    tokens_issued: int = 0

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metadata_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "email", "profile"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
        }

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]}

    def authorize(self, query: dict[str, str]) -> str:
        """The redirect back to the client, with a fresh code (the user approves at once)."""
        assert query.get("client_id") == CLIENT_ID, query
        assert query.get("response_type") == "code", query
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        back = {"code": code, "state": query.get("state", "")}
        return f"{query['redirect_uri']}?{urlencode(back)}"

    def token(self, form: dict[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        if authorization and authorization.startswith("Basic "):
            pair = base64.b64decode(authorization[6:]).decode()
            client_id, _, client_secret = pair.partition(":")
        if (client_id, client_secret) != (CLIENT_ID, CLIENT_SECRET):
            return 401, {"error": "invalid_client"}
        request = self.codes.pop(form.get("code", ""), None)
        if request is None or form.get("redirect_uri") != request["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        challenge = request.get("code_challenge")
        if challenge is not None:
            verifier = form.get("code_verifier", "").encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
            if digest.decode() != challenge:
                return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        now = int(time.time())
        claims = {
            **USER,
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": request.get("nonce"),
        }
        id_token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": KID})
        self.tokens_issued += 1
        body = {
            "access_token": secrets.token_urlsafe(16),
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": id_token,
        }
        return 200, body


def provider_handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            provider.seen.append(f"GET {url.path}")
            if url.path == "/.well-known/openid-configuration":
                self._json(200, provider.metadata())
            elif url.path == "/jwks":
                self._json(200, provider.jwks())
            elif url.path == "/authorize":
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                self.send_response(302)
                self.send_header("Location", provider.authorize(query))
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            provider.seen.append(f"POST {url.path}")
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if url.path != "/token":
                self._json(404, {"error": "not_found"})
                return
            status, body = provider.token(form, self.headers.get("Authorization"))
            self._json(status, body)

    return Handler


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    idp = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", idp.port), provider_handler(idp))
    thread = threading.Thread(target=server.serve_forever, name="oidc-provider", daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    tmp: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def wait_healthy(served: Served, timeout: float = 120.0) -> None:
    wait_until_ok(
        f"{served.url}/_stcore/health",
        timeout=timeout,
        exit_code=served.process.poll,
        output=served.output,
        what="serve",
    )


def stop(served: Served) -> None:
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGTERM)  # serve stops its children and cleans up
        try:
            served.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(served.process.pid, signal.SIGKILL)
            served.process.wait(timeout=10)


@pytest.fixture(scope="module")
def served(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`pulsar-lens serve` over a store (offline: dashboard only) with the provider set."""
    base = tmp_path_factory.mktemp("login")
    store, tmp = base / "store", base / "tmp"
    tmp.mkdir()
    write_scenario(store, polls=3)
    port = free_port()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),  # where serve writes the login's secrets file
        "PULSAR_LENS_POLL_INTERVAL": "1h",
        "PULSAR_LENS_OIDC_METADATA_URL": provider.metadata_url,
        "PULSAR_LENS_OIDC_CLIENT_ID": CLIENT_ID,
        "PULSAR_LENS_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "PULSAR_LENS_OIDC_COOKIE_SECRET": COOKIE_SECRET,
    }
    argv = [
        sys.executable,
        "-m",
        "pulsar_lens.cli.main",
        "serve",
        "--store",
        str(store),
        "--port",
        str(port),
    ]
    log = base / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
    app = Served(f"http://127.0.0.1:{port}", process, log, tmp)
    try:
        wait_healthy(app)
        yield app
    finally:
        stop(app)
    assert not list(tmp.glob("pulsar-lens-auth-*")), "serve left the login's secrets behind"


def expect_login_page(page: Page) -> None:
    expect(page.get_by_role("button", name="Log in")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("h1").first).to_have_text("Pulsar Lens")
    expect(page.get_by_text("Log in to see the cluster.")).to_be_visible()
    expect(page.get_by_test_id("stMetric")).to_have_count(0)
    expect(page.get_by_text("standalone")).to_have_count(0)  # the cluster's name


@pytest.mark.parametrize("path", ["", "key-shared", "plugins"])
def test_login_anonymous_visit_sees_the_login_not_the_data(
    served: Served, page: Page, path: str
) -> None:
    page.goto(f"{served.url}/{path}", timeout=TIMEOUT_MS)
    expect_login_page(page)


def test_login_flow_shows_the_pages_and_logout_returns_to_the_login(
    served: Served, provider: Provider, page: Page
) -> None:
    page.goto(served.url, timeout=TIMEOUT_MS)
    expect_login_page(page)
    issued = provider.tokens_issued
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("h1").first).to_have_text("Overview", timeout=TIMEOUT_MS)
    assert provider.tokens_issued == issued + 1
    assert {"GET /authorize", "POST /token", "GET /jwks"} <= set(provider.seen)
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text("Ada Lovelace")).to_be_visible(timeout=TIMEOUT_MS)
    expect(sidebar.get_by_text("standalone")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("stMetric").first).to_be_visible(timeout=TIMEOUT_MS)

    page.goto(f"{served.url}/key-shared", timeout=TIMEOUT_MS)  # the cookie holds across pages
    expect(page.locator("h1").first).to_have_text("Key_Shared", timeout=TIMEOUT_MS)

    page.get_by_test_id("stSidebar").get_by_role("button", name="Log out").click()
    expect_login_page(page)
    page.goto(served.url, timeout=TIMEOUT_MS)
    expect_login_page(page)


def test_login_secrets_never_reach_the_output_and_the_file_is_private(served: Served) -> None:
    [folder] = served.tmp.glob("pulsar-lens-auth-*")
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct((folder / "secrets.toml").stat().st_mode & 0o777) == "0o600"
    output = served.output()
    assert "dashboard login through" in output
    assert CLIENT_SECRET not in output and COOKIE_SECRET not in output
