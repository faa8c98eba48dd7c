"""Who `AdminClient` is to the broker and where its credentials may go: the token, the URL's
password (HTTP Basic) or OAuth2; TLS and the client certificate; the trusted origins.

Credentials go only to the admin URL's origin (scheme, host and port) and to the origins
listed in `PULSAR_LENS_TRUSTED_ORIGINS`; any other host, such as a broker URL the cluster
lists or a redirect's target, gets the call without them (`BrokerSession`). `cluster` in that
list extends the trust to every broker the cluster lists. TLS verification is never off
silently.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import requests
import urllib3.exceptions
from requests.utils import get_netrc_auth

from pulsar_lens.collectors.admin_hints import OAUTH2_SOURCE, PASSWORD_SOURCE, TOKEN_SOURCE
from pulsar_lens.collectors.credentials import read_token_file
from pulsar_lens.collectors.transport import OriginMemo, origin
from pulsar_lens.core.errors import CollectorError
from pulsar_lens.core.secrets import Secret, clean, header_safe

if TYPE_CHECKING:
    from requests.sessions import _Settings

log = logging.getLogger(__name__)

TRUST_CLUSTER = "cluster"


class _NoAuth(requests.auth.AuthBase):
    """No credentials, as `.netrc` has none for the origin: given to a call, it keeps requests
    from looking the file up again."""

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        return r


NO_AUTH = _NoAuth()


class BrokerSession(requests.Session):
    """Keeps the Authorization header on a redirect only when its target origin is trusted.

    Brokers answer 307 to the owner of a topic or bundle; within the trusted origins the
    token follows (else the redirect would end in a 401), anywhere else it is dropped.
    """

    def __init__(self) -> None:
        super().__init__()
        self.trusted_origins: set[str] = set()
        self._settings: OriginMemo[_Settings] = OriginMemo()
        self._netrc: OriginMemo[tuple[str, str] | None] = OriginMemo()

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        return origin(new_url) not in self.trusted_origins

    def merge_environment_settings(
        self, url: str | bytes | None, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> _Settings:
        """requests' own, once per origin (`OriginMemo`); a call or a session with proxies
        of its own is merged as requests does, each time."""
        if not isinstance(url, str) or proxies or self.proxies or not self.trust_env:
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        found = self._settings.get(
            (origin(url), stream, verify, cert),
            lambda: super(BrokerSession, self).merge_environment_settings(
                url, proxies, stream, verify, cert
            ),
        )
        settings = found.copy()
        settings["proxies"] = dict(found["proxies"])
        return settings

    def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
        """requests' own, with the `.netrc` lookup it makes for a call without credentials
        made once per origin (`OriginMemo`). A call that carries credentials (the session's
        token or URL password, the call's own OAuth2 token) never looks: requests would let
        a `.netrc` entry for the admin host replace them."""
        if self.trust_env and not request.auth and not self.auth and isinstance(request.url, str):
            url = request.url
            own = (request.headers or {}).get("Authorization", self.headers.get("Authorization"))
            if own:  # the session's (token, URL password) or the call's own (OAuth2)
                request.auth = NO_AUTH
            else:
                found = self._netrc.get(origin(url), lambda: get_netrc_auth(url))
                request.auth = found or NO_AUTH
        return super().prepare_request(request)


def trust(session: BrokerSession, base_url: str, trusted_origins: Iterable[str]) -> bool:
    """Trust the admin URL's origin and the listed ones; True when the list says `cluster`
    (every broker the cluster lists is trusted once it is known)."""
    session.trusted_origins.add(origin(base_url))
    cluster = False
    for trusted in trusted_origins:
        if trusted.strip() == TRUST_CLUSTER:
            cluster = True
        elif trusted.strip():
            session.trusted_origins.add(origin(trusted.strip()))
    return cluster


def admin_token(token: str | None, token_file: str | os.PathLike[str] | None) -> Secret | None:
    """The static token (read from `token_file` when not given), refused when no HTTP header
    could carry it; the error names the setting to fix, never the token."""
    setting = "PULSAR_ADMIN_TOKEN"
    if token is None and token_file is not None:
        token = read_token_file(token_file)
        setting = f"PULSAR_ADMIN_TOKEN_FILE ({os.fspath(token_file)!r})"
    secret = Secret(token) if token else None
    if token and not header_safe(token):
        raise CollectorError(
            "the admin token holds a line break, a control character or a character "
            f"outside ASCII (an emoji?), which no HTTP header can carry; check {setting}",
            setting="PULSAR_ADMIN_TOKEN" if token_file is None else "PULSAR_ADMIN_TOKEN_FILE",
        )
    return secret


def authorize(
    session: requests.Session,
    secret: Secret | None,
    user: str | None,
    password: Secret | None,
    *,
    oauth2: bool,
) -> str:
    """Set the session's Authorization header: the token, else HTTP Basic from the URL's
    password; none with OAuth2, whose token goes with each call. Returns whose credentials
    they are, as the hints name them."""
    if secret:
        session.headers["Authorization"] = f"Bearer {secret.reveal()}"
        return TOKEN_SOURCE
    if oauth2:
        return OAUTH2_SOURCE
    if password is not None:
        pair = f"{user or ''}:{password.reveal()}".encode()
        session.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return PASSWORD_SOURCE.format(user=clean(user or ""))


def set_tls(
    session: requests.Session,
    *,
    ca_bundle: str | os.PathLike[str] | None,
    verify: bool,
    cert_file: str | os.PathLike[str] | None,
    key_file: str | os.PathLike[str] | None,
) -> None:
    """The CA to verify the broker with (or no verification, said once), and the client
    certificate, whose files must both be given and readable."""
    session.verify = os.fspath(ca_bundle) if (ca_bundle and verify) else verify
    if not verify:
        _warn_unverified()
    if bool(cert_file) != bool(key_file):
        raise CollectorError(
            "a client certificate needs both PULSAR_LENS_TLS_CERT_FILE and "
            "PULSAR_LENS_TLS_KEY_FILE",
            setting="PULSAR_LENS_TLS_KEY_FILE" if cert_file else "PULSAR_LENS_TLS_CERT_FILE",
        )
    if cert_file and key_file:
        session.cert = (
            _readable(cert_file, "PULSAR_LENS_TLS_CERT_FILE"),
            _readable(key_file, "PULSAR_LENS_TLS_KEY_FILE"),
        )


_warned_unverified = threading.Event()


def _warn_unverified() -> None:
    """Say once per process that TLS certificates are not checked."""
    if not _warned_unverified.is_set():
        _warned_unverified.set()
        # said here once, in our words, rather than by urllib3 on every call
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        log.warning(
            "TLS verification is OFF (PULSAR_LENS_TLS_VERIFY=false): the admin API's "
            "certificate is not checked and anyone on the path can read the credentials; "
            "set PULSAR_LENS_CA_BUNDLE instead"
        )


def _readable(path: str | os.PathLike[str], setting: str) -> str:
    try:
        with open(path, "rb"):
            return os.fspath(path)
    except OSError as exc:
        raise CollectorError(
            f"cannot read {os.fspath(path)!r}: {exc.strerror}; fix {setting}", setting=setting
        ) from None
