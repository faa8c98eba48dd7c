"""AdminClient: one HTTP session to a Pulsar admin REST API (auth, TLS, timeouts, retries).

The client is built here, from arguments or from a cluster's settings (`from_settings`), and offers
the calls (`get_json`, `get_text`, `put`, `post`, `delete`). Its parts live beside it:

* `admin_auth`: the token, the URL's password or OAuth2, TLS and the client certificate,
  and the trusted origins credentials may go to (the admin URL's; `cluster` adds every
  broker the cluster lists); TLS verification is never off silently;
* `admin_transport`: sending a call within its timeout and the poll's deadline, retrying
  only idempotent GETs;
* `admin_hints`: what a failure says to fix.

Failures raise `AdminApiError` or `AdminApiUnreachable`, whose texts go through
`core.secrets.clean`: no token, password or Basic credential, even when a server echoes
request headers, and no control characters.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from pulsar_lens.collectors.admin_auth import (
    BrokerSession,
    admin_token,
    authorize,
    set_tls,
    trust,
)
from pulsar_lens.collectors.admin_hints import is_html
from pulsar_lens.collectors.admin_transport import AdminTransport, Params
from pulsar_lens.collectors.answers import decode_json
from pulsar_lens.collectors.oauth2 import ClientCredentialsFlow, flow_from_settings
from pulsar_lens.collectors.transport import DeadlineAdapter, origin
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.errors import AdminApiError, CollectorError
from pulsar_lens.core.parts import DEFAULT_MAX_RESPONSE
from pulsar_lens.core.secrets import clean, split_credentials
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.values import admin_url_problem


class AdminClient(AdminTransport):
    """A Pulsar admin REST client bound to one base URL, e.g. http://broker:8080.

    `token` (or the content of `token_file`) is sent as a Bearer token, or else a token of
    the `oauth2` flow. `ca_bundle` is a CA file for TLS; `verify=False` turns verification off
    (with a warning); `cert_file` and `key_file` are a client certificate (PEM). `timeout`
    (seconds) applies to every call; `retries` bounds the extra attempts of a GET; `backoff`
    is the first wait (seconds), doubled after each retry. `requests_made` counts HTTP
    requests actually sent.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_bundle: str | os.PathLike[str] | None = None,
        verify: bool = True,
        cert_file: str | os.PathLike[str] | None = None,
        key_file: str | os.PathLike[str] | None = None,
        oauth2: ClientCredentialsFlow | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.2,
        pool_size: int = 32,
        trusted_origins: Iterable[str] = (),
        max_response_bytes: int = DEFAULT_MAX_RESPONSE,
    ) -> None:
        problem = admin_url_problem(base_url)
        if problem:
            raise CollectorError(
                f"admin URL {problem}; set PULSAR_ADMIN_URL, e.g. http://localhost:8080"
            )
        base_url, user, password = split_credentials(base_url)
        # a query in the admin URL (an API gateway's key) goes with every call to that URL,
        # after the call's path: never spliced in before it
        parts = urlsplit(base_url)
        self.base_url = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
        self._base_query = parts.query
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.deadline = None
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        self._secret = admin_token(token, token_file)
        self.session = BrokerSession()
        self.trust_cluster = trust(self.session, self.base_url, trusted_origins)
        adapter = DeadlineAdapter(pool_connections=pool_size, pool_maxsize=pool_size)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["Accept"] = "application/json"
        self.session.headers["User-Agent"] = "pulsar-lens"
        self._oauth2 = None if self._secret else oauth2
        self._source = authorize(
            self.session, self._secret, user, password, oauth2=self._oauth2 is not None
        )
        self._has_credentials = "Authorization" in self.session.headers or bool(self._oauth2)
        set_tls(
            self.session, ca_bundle=ca_bundle, verify=verify, cert_file=cert_file, key_file=key_file
        )
        self._lock = threading.Lock()
        self._requests_made = 0

    @classmethod
    def from_settings(
        cls,
        cluster: ClusterSettings,
        *,
        admin_url: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE,
        **kwargs: Any,
    ) -> AdminClient:
        """A client for `cluster` at `admin_url` (default the cluster's own, else
        http://localhost:8080): its token or token file, else its OAuth2 flow, its TLS (CA
        bundle, verification, client certificate) and its trusted origins (URLs, or
        `cluster`)."""
        verify = cluster.tls.verify
        # the issuer is checked against the system's CAs, as Pulsar's clients do
        has_token = cluster.token is not None or cluster.token_file is not None
        oauth2 = None if has_token else flow_from_settings(cluster.oauth2, verify=verify)
        return cls(
            admin_url or cluster.admin_url or "http://localhost:8080",
            trusted_origins=cluster.trusted_origins,
            token=cluster.token.reveal() if cluster.token is not None else None,
            token_file=cluster.token_file,
            ca_bundle=cluster.tls.ca_bundle,
            max_response_bytes=max_response_bytes,
            verify=verify,
            cert_file=cluster.tls.cert_file,
            key_file=cluster.tls.key_file,
            oauth2=oauth2,
            **kwargs,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> AdminClient:
        """`from_settings` for the one cluster the variables of `env` describe
        (PULSAR_ADMIN_URL, PULSAR_ADMIN_TOKEN, PULSAR_LENS_TLS_*, PULSAR_LENS_OAUTH2_*, ...),
        as `core.settings.Settings.from_env` reads them."""
        settings = Settings.from_env(env)
        return cls.from_settings(
            settings.cluster, max_response_bytes=settings.max_response, **kwargs
        )

    def __repr__(self) -> str:
        auth = (
            "token"
            if self._secret
            else "oauth2"
            if self._oauth2
            else "password"
            if self._has_credentials
            else "no token"
        )
        return f"AdminClient({self.base_url!r}, {auth})"

    @property
    def has_token(self) -> bool:
        return self._secret is not None

    @property
    def requests_made(self) -> int:
        with self._lock:
            return self._requests_made

    def trust_brokers(self, web_urls: Iterable[str]) -> None:
        """The broker URLs the cluster lists: trusted with credentials only when
        PULSAR_LENS_TRUSTED_ORIGINS is `cluster` (else ignored)."""
        if self.trust_cluster:
            self.session.trusted_origins.update(origin(u) for u in web_urls if "://" in u)

    def close(self) -> None:
        self.session.close()
        if self._oauth2 is not None:
            self._oauth2.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- calls -------------------------------------------------------------------------

    def get_json(
        self,
        path: str,
        *,
        params: Params = None,
        base_url: str | None = None,
        timeout: float | None = None,
        decode: Callable[[bytes], Any] = decode_json,
    ) -> Any:
        """GET `path` and decode its JSON body (None for an empty body, e.g. 204) with
        `decode` (which raises ValueError for a body that is not JSON).

        `base_url` sends the call to another broker of the same cluster (same session,
        token and TLS settings). Retries as the class says; raises AdminApiError for an
        error status or a body that is not JSON, AdminApiUnreachable when no answer came.
        """
        resp = self._send("GET", path, params=params, base_url=base_url, timeout=timeout)
        shown = self._url(path, base_url) if base_url else path
        return self._decode(resp, "GET", shown, decode=decode)

    def get_text(
        self,
        path: str,
        *,
        params: Params = None,
        base_url: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """GET `path` and return the body as text (some endpoints answer bare strings); an
        HTML page (a proxy's or gateway's error page, even with 200) is refused, not returned."""
        resp = self._send("GET", path, params=params, base_url=base_url, timeout=timeout)
        if is_html(resp):
            shown = self._url(path, base_url) if base_url else path
            hint = f"status {resp.status_code} with an HTML page, not the answer"
            raise AdminApiError("GET", shown, None, resp.text, hint)
        return self.redact(resp.text)

    def put(self, path: str, *, json_body: Any = None, params: Params = None) -> Any:
        """PUT once (never retried); the decoded JSON answer or None."""
        resp = self._send("PUT", path, params=params, json_body=json_body)
        return self._decode(resp, "PUT", path)

    def post(self, path: str, *, json_body: Any = None, params: Params = None) -> Any:
        """POST once (never retried); the decoded JSON answer or None."""
        resp = self._send("POST", path, params=params, json_body=json_body)
        return self._decode(resp, "POST", path)

    def delete(self, path: str, *, params: Params = None) -> Any:
        """DELETE once (never retried); the decoded JSON answer or None."""
        resp = self._send("DELETE", path, params=params)
        return self._decode(resp, "DELETE", path)

    # --- internals ---------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """`text` made safe to show: credentials redacted, control characters escaped."""
        return clean(text)

    def _decode(
        self,
        resp: requests.Response,
        method: str,
        path: str,
        *,
        decode: Callable[[bytes], Any] = decode_json,
    ) -> Any:
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return decode(resp.content)
        except ValueError:
            kind = resp.headers.get("Content-Type") or "no Content-Type"
            hint = f"status {resp.status_code} with a body not JSON ({kind})"
            raise AdminApiError(method, path, None, resp.text, hint) from None
