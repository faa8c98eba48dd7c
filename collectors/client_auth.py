"""How a `pulsar-client` connection authenticates: the token (PULSAR_CLIENT_TOKEN, else the
admin token or its file), else OAuth2, else a client certificate, and the TLS options; all
from a cluster's settings, as the admin client's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.credentials import read_token_file
from pulsar_lens.collectors.oauth2 import read_credentials
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.settings import Settings


def client_token(cluster: ClusterSettings, *, shared: Secret | None = None) -> Secret | None:
    """The token for the binary protocol: `shared` (PULSAR_CLIENT_TOKEN, the one cluster's),
    else the cluster's admin token (or the content of its token file); None without one."""
    if shared is not None:
        return shared
    if cluster.token is not None:
        return cluster.token
    if cluster.token_file is not None:
        return Secret(read_token_file(cluster.token_file))
    return None


def _file_url(ref: str) -> str:
    if ref.startswith(("file:", "data:")):
        return ref
    return Path(ref).resolve().as_uri()


def client_auth(cluster: ClusterSettings, *, token: Secret | None = None) -> Any:
    """The `pulsar.Authentication` for `cluster`, or None: `token` (see `client_token`), else
    its OAuth2 settings, else its client certificate (both TLS files)."""
    import pulsar

    if token is not None:
        return pulsar.AuthenticationToken(token.reveal())
    oauth2 = cluster.oauth2
    if oauth2.private_key is not None:
        ref = oauth2.private_key.reveal()
        creds = read_credentials(ref)  # checked here: a bad file fails before connecting
        params = {
            "issuer_url": oauth2.issuer_url or creds.issuer_url,
            "private_key": _file_url(ref),
        }
        for name, value in (("audience", oauth2.audience), ("scope", oauth2.scope)):
            if value:
                params[name] = value
        return pulsar.AuthenticationOauth2(json.dumps(params))
    cert, key = cluster.tls.cert_file, cluster.tls.key_file
    if cert is not None and key is not None:
        return pulsar.AuthenticationTLS(str(cert), str(key))
    return None


def client_options(cluster: ClusterSettings, *, token: Secret | None = None) -> dict[str, Any]:
    """`pulsar.Client` keyword arguments for `cluster`: `authentication` (see `client_auth`)
    and, for `pulsar+ssl://`, its CA bundle and whether TLS is verified."""
    options: dict[str, Any] = {}
    auth = client_auth(cluster, token=token)
    if auth is not None:
        options["authentication"] = auth
    if cluster.tls.ca_bundle is not None:
        options["tls_trust_certs_file_path"] = str(cluster.tls.ca_bundle)
    if not cluster.tls.verify:
        options["tls_allow_insecure_connection"] = True
        options["tls_validate_hostname"] = False
    return options


def client_auth_from_env(env: Mapping[str, str]) -> Any:
    """`client_auth` for the one cluster the variables of `env` describe."""
    settings = Settings.from_env(env)
    return client_auth(
        settings.cluster, token=client_token(settings.cluster, shared=settings.client_token)
    )


def client_options_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """`client_options` for the one cluster the variables of `env` describe."""
    settings = Settings.from_env(env)
    token = client_token(settings.cluster, shared=settings.client_token)
    return client_options(settings.cluster, token=token)
