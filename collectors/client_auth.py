"""How a `pulsar-client` connection authenticates: the token (PULSAR_CLIENT_TOKEN, else the
admin token or its file), else OAuth2, else a client certificate, and the TLS options."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.credentials import read_token_file
from pulsar_lens.collectors.oauth2 import read_credentials
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.settings import process_environ

TOKEN_VARS = ("PULSAR_CLIENT_TOKEN", "PULSAR_ADMIN_TOKEN")


def client_token(env: Mapping[str, str] | None = None) -> Secret | None:
    """The token for the binary protocol: PULSAR_CLIENT_TOKEN, else the admin token
    (PULSAR_ADMIN_TOKEN or the file named by PULSAR_ADMIN_TOKEN_FILE); None without one."""
    env = process_environ() if env is None else env
    for name in TOKEN_VARS:
        value = (env.get(name) or "").strip()
        if value:
            return Secret(value)
    token_file = (env.get("PULSAR_ADMIN_TOKEN_FILE") or "").strip()
    if token_file:
        return Secret(read_token_file(token_file))
    return None


def _file_url(ref: str) -> str:
    if ref.startswith(("file:", "data:")):
        return ref
    return Path(ref).resolve().as_uri()


def client_auth_from_env(env: Mapping[str, str] | None = None) -> Any:
    """The `pulsar.Authentication` for these settings, or None: a token
    (PULSAR_CLIENT_TOKEN, PULSAR_ADMIN_TOKEN, PULSAR_ADMIN_TOKEN_FILE), else OAuth2
    (PULSAR_LENS_OAUTH2_*), else a client certificate (PULSAR_LENS_TLS_CERT_FILE and
    PULSAR_LENS_TLS_KEY_FILE)."""
    import pulsar

    env = process_environ() if env is None else env
    token = client_token(env)
    if token is not None:
        return pulsar.AuthenticationToken(token.reveal())
    ref = (env.get("PULSAR_LENS_OAUTH2_PRIVATE_KEY") or "").strip()
    if ref:
        creds = read_credentials(ref)  # checked here: a bad file fails before connecting
        params = {
            "issuer_url": (env.get("PULSAR_LENS_OAUTH2_ISSUER_URL") or "").strip()
            or creds.issuer_url,
            "private_key": _file_url(ref),
        }
        for key, name in (("audience", "AUDIENCE"), ("scope", "SCOPE")):
            value = (env.get(f"PULSAR_LENS_OAUTH2_{name}") or "").strip()
            if value:
                params[key] = value
        return pulsar.AuthenticationOauth2(json.dumps(params))
    cert = (env.get("PULSAR_LENS_TLS_CERT_FILE") or "").strip()
    key = (env.get("PULSAR_LENS_TLS_KEY_FILE") or "").strip()
    if cert and key:
        return pulsar.AuthenticationTLS(cert, key)
    return None


def client_options_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`pulsar.Client` keyword arguments for these settings: `authentication` (see
    `client_auth_from_env`) and, for `pulsar+ssl://`, the CA of PULSAR_LENS_CA_BUNDLE and
    PULSAR_LENS_TLS_VERIFY."""
    env = process_environ() if env is None else env
    options: dict[str, Any] = {}
    auth = client_auth_from_env(env)
    if auth is not None:
        options["authentication"] = auth
    ca = (env.get("PULSAR_LENS_CA_BUNDLE") or "").strip()
    if ca:
        options["tls_trust_certs_file_path"] = ca
    verify = (env.get("PULSAR_LENS_TLS_VERIFY") or "").strip().lower()
    if verify in {"0", "false", "no", "off"}:
        options["tls_allow_insecure_connection"] = True
        options["tls_validate_hostname"] = False
    return options
