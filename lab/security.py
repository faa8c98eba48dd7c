"""A secured local Pulsar's material: token keys, tokens, a CA and certificates, an issuer.

The key pair comes from the broker's own token tool (`TokensCliUtils` in the pulsar-broker
jar) or is written here in the same format; the tool makes tokens from it, so the broker's
tooling judges the format; other tokens are signed with PyJWT by the same private key.
Certificates are made with `cryptography`. `LoopbackIssuer` is an OAuth2 issuer on
127.0.0.1 that grants client-credentials tokens signed with that key, so one broker validates
both kinds.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab.runtime import PULSAR_VERSION, ensure_runtime, find_java

TOKEN_TOOL = "org.apache.pulsar.utils.auth.tokens.TokensCliUtils"
BROKER_ROLE = "pulsar-broker"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


def token_tool(*args: str, timeout: float = 60.0) -> str:
    """Run the broker's `tokens` tool with `args`; its stdout, stripped."""
    lib = ensure_runtime(PULSAR_VERSION)
    done = subprocess.run(
        [find_java(), "-cp", f"{lib}/*", TOKEN_TOOL, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise LocalPulsarError(
            f"the token tool failed ({done.returncode}): {done.stderr[-500:]}",
            process=TOKEN_TOOL,
            exit_code=done.returncode,
        )
    return done.stdout.strip()


@dataclass(frozen=True)
class TokenKeys:
    """An RS256 key pair written by the token tool (DER files, as the broker reads them)."""

    private_key: Path
    public_key: Path

    @classmethod
    def create(cls, folder: Path) -> TokenKeys:
        folder.mkdir(parents=True, exist_ok=True)
        keys = cls(folder / "token-private.key", folder / "token-public.key")
        token_tool(
            "create-key-pair",
            "--signature-algorithm",
            "RS256",
            "--output-private-key",
            str(keys.private_key),
            "--output-public-key",
            str(keys.public_key),
        )
        return keys

    @classmethod
    def generate(cls, folder: Path) -> TokenKeys:
        """The same files made here (PKCS#8 and X.509 DER, as the tool writes them), without
        a JVM: for a test that lets the tool judge them by the token it makes from them."""
        folder.mkdir(parents=True, exist_ok=True)
        keys = cls(folder / "token-private.key", folder / "token-public.key")
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        keys.private_key.write_bytes(
            key.private_bytes(
                serialization.Encoding.DER,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        keys.public_key.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return keys

    def tool_token(self, subject: str, *, expiry: str | None = None) -> str:
        """A token made by the broker's tool, e.g. expiry "1h"; None: never expires."""
        args = ["create", "--private-key", self.private_key.as_uri(), "--subject", subject]
        return token_tool(*args, *(["--expiry-time", expiry] if expiry else []))

    def sign(self, subject: str, *, expires_at: float | None = None, **claims: Any) -> str:
        """A token signed here with the same key (PyJWT), e.g. one already expired."""
        key = serialization.load_der_private_key(self.private_key.read_bytes(), password=None)
        payload: dict[str, Any] = {"sub": subject, **claims}
        if expires_at is not None:
            payload["exp"] = int(expires_at)
        return jwt.encode(payload, key, algorithm="RS256")  # type: ignore[arg-type]


def foreign_token(subject: str) -> str:
    """A well-formed RS256 token signed by a key no broker trusts."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode({"sub": subject}, key, algorithm="RS256")


# --- TLS -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


@dataclass
class CertificateAuthority:
    """A self-signed CA that issues server and client certificates (PEM files)."""

    name: str
    folder: Path
    key: rsa.RSAPrivateKey = field(repr=False)
    cert: x509.Certificate = field(repr=False)

    @classmethod
    def create(cls, folder: Path, name: str) -> CertificateAuthority:
        folder.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        ca = cls(name, folder, key, cert)
        ca.bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return ca

    @property
    def bundle(self) -> Path:
        return self.folder / f"{self.name}-ca.pem"

    def issue(self, common_name: str, *, server: bool) -> CertFiles:
        """A certificate for `common_name` (a server one is valid for 127.0.0.1/localhost);
        the key is PKCS#8 PEM, which both the broker and Python read."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            names: list[x509.GeneralName] = [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        files = CertFiles(
            self.folder / f"{common_name}.cert.pem", self.folder / f"{common_name}.key.pem"
        )
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return files


# --- the broker's settings -------------------------------------------------------------


def secured_settings(
    keys: TokenKeys,
    *,
    super_users: tuple[str, ...],
    broker_token: str,
    ca: CertificateAuthority | None = None,
    server: CertFiles | None = None,
    require_client_cert: bool = False,
) -> dict[str, str]:
    """Broker settings: token (and, with `ca`, TLS client-certificate) authentication,
    authorization, these superusers plus the broker's own role, TLS on the web service."""
    providers = ["org.apache.pulsar.broker.authentication.AuthenticationProviderToken"]
    if ca is not None:
        providers.append("org.apache.pulsar.broker.authentication.AuthenticationProviderTls")
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProviders": ",".join(providers),
        "tokenPublicKey": keys.public_key.as_uri(),
        "superUserRoles": ",".join((*super_users, BROKER_ROLE)),
        "brokerClientAuthenticationPlugin": TOKEN_PLUGIN,
        "brokerClientAuthenticationParameters": f"token:{broker_token}",
        "functionsWorkerEnabled": "false",
    }
    if ca is not None and server is not None:
        settings |= {
            "tlsCertificateFilePath": str(server.cert),
            "tlsKeyFilePath": str(server.key),
            "tlsTrustCertsFilePath": str(ca.bundle),
            "tlsRequireTrustedClientCertOnConnect": str(require_client_cert).lower(),
            "tlsAllowInsecureConnection": "false",
        }
    return settings


# --- an OAuth2 issuer on loopback -----------------------------------------------------


@dataclass(frozen=True)
class Grant:
    client_id: str
    issued_at: float
    expires_at: float
    token: str = field(repr=False)


class LoopbackIssuer:
    """An OAuth2 issuer on 127.0.0.1: discovery document and a client-credentials token
    endpoint whose tokens (subject = client_id) are signed by `keys`, valid `lifetime` s.

    `clients` maps client_id to client_secret. A refused client gets a 401 whose
    description echoes what it sent, secret included, as a careless issuer might: the
    caller must not repeat it. `grants` lists what was issued.
    """

    def __init__(
        self, keys: TokenKeys, clients: Mapping[str, str], *, lifetime: float = 3600.0
    ) -> None:
        self.keys = keys
        self.clients = dict(clients)
        self.lifetime = lifetime
        self.grants: list[Grant] = []
        self.requests: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> LoopbackIssuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> LoopbackIssuer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def credentials(self, folder: Path, client_id: str, secret: str | None = None) -> Path:
        """Write Pulsar's credentials file for `client_id` (its own secret unless given)."""
        path = folder / f"{client_id}.json"
        data = {
            "type": "client_credentials",
            "client_id": client_id,
            "client_secret": self.clients.get(client_id, "") if secret is None else secret,
            "issuer_url": self.url,
        }
        path.write_text(json.dumps(data))
        return path

    def grant(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(dict(form))
        client_id = form.get("client_id", "")
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if client_id not in self.clients or self.clients[client_id] != form.get("client_secret"):
            echoed = f"client {client_id} with secret {form.get('client_secret')}"
            return 401, {"error": "invalid_client", "error_description": f"unknown {echoed}"}
        now = time.time()
        token = self.keys.sign(client_id, expires_at=now + self.lifetime, iat=int(now))
        with self._lock:
            self.grants.append(Grant(client_id, now, now + self.lifetime, token))
        body = {"access_token": token, "token_type": "Bearer", "expires_in": int(self.lifetime)}
        return 200, body

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._answer(
                        200,
                        {
                            "issuer": issuer.url,
                            "token_endpoint": f"{issuer.url}/oauth/token",
                            "grant_types_supported": ["client_credentials"],
                        },
                    )
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(min(length, 65536)).decode("utf-8", "replace")
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                if self.path != "/oauth/token":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(*issuer.grant(form))

        return Handler
