"""AdminClient: one HTTP session to a Pulsar admin REST API (auth, TLS, timeouts, retries).

Every call has a timeout. Only idempotent GETs are retried (connection errors, a connection
that breaks mid-answer: reset, or closed before its Content-Length; 429, 502, 503, 504) with
exponential backoff or the server's Retry-After; PUT, POST and DELETE are sent once. Within a
poll (`deadline` set) no wait, read or retry outlasts the poll's deadline, not even a status
line or headers trickled a byte at a time (`collectors.transport`): a retry that would is not
made, and the failure is told as it was. Failures raise `AdminApiError` or
`AdminApiUnreachable`, whose texts go through `core.secrets.clean`: no token, password or Basic
credential, even when a server echoes request headers, and no control characters.

Credentials (the Bearer token, or `user:password@` in the admin URL sent as HTTP Basic) go
only to the admin URL's origin (scheme, host and port) and to the origins listed in
`PULSAR_LENS_TRUSTED_ORIGINS`; calls to, and redirects to, any other host, such as the
broker URLs a cluster lists, are sent without them. `PULSAR_LENS_TRUSTED_ORIGINS=cluster`
extends the trust to every broker the cluster lists.

Authentication is a static token, an OAuth2 access token (client credentials, refreshed
before it expires, `pulsar_lens.collectors.oauth2`), a client certificate (mutual TLS), or the URL's
password. TLS verification is never off silently: PULSAR_LENS_TLS_VERIFY=false logs a warning.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3.exceptions

from pulsar_lens.collectors.answers import (
    AnswerBroken,
    AnswerLate,
    AnswerStalled,
    AnswerTooLarge,
    decode_json,
    read_body,
)
from pulsar_lens.collectors.credentials import read_token_file
from pulsar_lens.collectors.oauth2 import (
    ClientCredentialsFlow,
    flow_from_env,
    jwt_claims,
    token_expired_at,
)
from pulsar_lens.collectors.transport import DeadlineAdapter, reads_by
from pulsar_lens.core.errors import BODY_EXCERPT, AdminApiError, AdminApiUnreachable, CollectorError
from pulsar_lens.core.secrets import Secret, clean, display_url, header_safe, split_credentials
from pulsar_lens.core.settings import process_environ
from pulsar_lens.core.values import admin_url_problem

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 502, 503, 504})
DEFAULT_MAX_RESPONSE = 64 * 1024 * 1024
CALL_TIMEOUTS = 3  # a whole answer may take this many per-read timeouts, no more
MAX_BACKOFF = 5.0
AUTH_HINT_MISSING = "set PULSAR_ADMIN_TOKEN or PULSAR_ADMIN_TOKEN_FILE"
TOKEN_SOURCE = "the token from PULSAR_ADMIN_TOKEN / PULSAR_ADMIN_TOKEN_FILE"
OAUTH2_SOURCE = "the OAuth2 access token (PULSAR_LENS_OAUTH2_*)"
PASSWORD_SOURCE = "the password of user {user!r} in PULSAR_ADMIN_URL"
TLS_HINT = "set PULSAR_LENS_CA_BUNDLE to the cluster's CA file (or PULSAR_LENS_TLS_VERIFY=false)"
CLIENT_CERT_HINT = (
    "the broker wants a client certificate it trusts; set PULSAR_LENS_TLS_CERT_FILE and "
    "PULSAR_LENS_TLS_KEY_FILE"
)
# what Pulsar 4.0 says in a 401 that refuses a permission to an authenticated role
_AUTHORIZATION_MARKERS = ("Unauthorized to ", "requires super-user access", "Don't have permission")
_CLIENT_CERT_ALERTS = ("certificate required", "bad certificate", "unknown ca", "handshake failure")
UNTRUSTED_HINT = (
    "credentials go only to the admin URL's host; list this one in PULSAR_LENS_TRUSTED_ORIGINS "
    "(or set it to 'cluster') to send them there too"
)
TRUST_CLUSTER = "cluster"
NOT_RETRIED = "not retried: the poll's deadline would pass during the wait"

Params = Mapping[str, str | int | float | bool] | None


def origin(url: str) -> str:
    """`scheme://host:port` of a URL (default ports made explicit, host lower-cased)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


class _BrokerSession(requests.Session):
    """Keeps the Authorization header on a redirect only when its target origin is trusted.

    Brokers answer 307 to the owner of a topic or bundle; within the trusted origins the
    token follows (else the redirect would end in a 401), anywhere else it is dropped.
    """

    def __init__(self) -> None:
        super().__init__()
        self.trusted_origins: set[str] = set()

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        return origin(new_url) not in self.trusted_origins


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
            f"cannot read {os.fspath(path)!r}: {exc.strerror}; fix {setting}"
        ) from None


def _env_flag(value: str | None, *, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in {"0", "false", "no", "off"}


def _max_response(text: str | None) -> int:
    """PULSAR_LENS_MAX_RESPONSE in MiB (default 64)."""
    if not text or not text.strip():
        return DEFAULT_MAX_RESPONSE
    try:
        mib = int(text)
    except ValueError:
        mib = 0
    if not 1 <= mib <= 4096:
        raise CollectorError(
            f"PULSAR_LENS_MAX_RESPONSE must be a whole number of MiB from 1 to 4096, got {text!r}"
        )
    return mib * 1024 * 1024


class AdminClient:
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
        self.deadline: float | None = None  # time.monotonic() after which calls are skipped
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        setting = "PULSAR_ADMIN_TOKEN"
        if token is None and token_file is not None:
            token = read_token_file(token_file)
            setting = f"PULSAR_ADMIN_TOKEN_FILE ({os.fspath(token_file)!r})"
        self._secret = Secret(token) if token else None
        if token and not header_safe(token):
            raise CollectorError(
                "the admin token holds a line break, a control character or a character "
                f"outside ASCII (an emoji?), which no HTTP header can carry; check {setting}"
            )
        self.session = _BrokerSession()
        self.session.trusted_origins.add(origin(self.base_url))
        self.trust_cluster = False
        for trusted in trusted_origins:
            if trusted.strip() == TRUST_CLUSTER:
                self.trust_cluster = True
            elif trusted.strip():
                self.session.trusted_origins.add(origin(trusted.strip()))
        adapter = DeadlineAdapter(pool_connections=pool_size, pool_maxsize=pool_size)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["Accept"] = "application/json"
        self.session.headers["User-Agent"] = "pulsar-lens"
        self._oauth2 = None if self._secret else oauth2
        if self._secret:
            self.session.headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        elif password is not None and self._oauth2 is None:
            pair = f"{user or ''}:{password.reveal()}".encode()
            self.session.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self._has_credentials = "Authorization" in self.session.headers or bool(self._oauth2)
        self._source = (
            TOKEN_SOURCE
            if self._secret
            else OAUTH2_SOURCE
            if self._oauth2
            else PASSWORD_SOURCE.format(user=clean(user or ""))
        )
        self.session.verify = os.fspath(ca_bundle) if (ca_bundle and verify) else verify
        if not verify:
            _warn_unverified()
        if bool(cert_file) != bool(key_file):
            raise CollectorError(
                "a client certificate needs both PULSAR_LENS_TLS_CERT_FILE and "
                "PULSAR_LENS_TLS_KEY_FILE"
            )
        if cert_file and key_file:
            self.session.cert = (
                _readable(cert_file, "PULSAR_LENS_TLS_CERT_FILE"),
                _readable(key_file, "PULSAR_LENS_TLS_KEY_FILE"),
            )
        self._lock = threading.Lock()
        self._requests_made = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> AdminClient:
        """Build a client from PULSAR_ADMIN_URL, PULSAR_ADMIN_TOKEN / PULSAR_ADMIN_TOKEN_FILE,
        PULSAR_LENS_OAUTH2_ISSUER_URL / _AUDIENCE / _PRIVATE_KEY / _SCOPE (used when no token
        is set), PULSAR_LENS_CA_BUNDLE, PULSAR_LENS_TLS_VERIFY (default true),
        PULSAR_LENS_TLS_CERT_FILE / _KEY_FILE and PULSAR_LENS_TRUSTED_ORIGINS
        (comma-separated URLs, or `cluster`)."""
        env = process_environ() if env is None else env
        url = env.get("PULSAR_ADMIN_URL") or "http://localhost:8080"
        verify = _env_flag(env.get("PULSAR_LENS_TLS_VERIFY"), default=True)
        has_token = env.get("PULSAR_ADMIN_TOKEN") or env.get("PULSAR_ADMIN_TOKEN_FILE")
        # the issuer is checked against the system's CAs, as Pulsar's clients do
        oauth2 = None if has_token else flow_from_env(env, verify=verify)
        return cls(
            url,
            trusted_origins=(env.get("PULSAR_LENS_TRUSTED_ORIGINS") or "").split(","),
            token=env.get("PULSAR_ADMIN_TOKEN") or None,
            token_file=env.get("PULSAR_ADMIN_TOKEN_FILE") or None,
            ca_bundle=env.get("PULSAR_LENS_CA_BUNDLE") or None,
            max_response_bytes=_max_response(env.get("PULSAR_LENS_MAX_RESPONSE")),
            verify=verify,
            cert_file=env.get("PULSAR_LENS_TLS_CERT_FILE") or None,
            key_file=env.get("PULSAR_LENS_TLS_KEY_FILE") or None,
            oauth2=oauth2,
            **kwargs,
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

    def trusts(self, url: str) -> bool:
        """Whether credentials may be sent to `url`."""
        return origin(url) in self.session.trusted_origins

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
    ) -> Any:
        """GET `path` and decode its JSON body (None for an empty body, e.g. 204).

        `base_url` sends the call to another broker of the same cluster (same session,
        token and TLS settings). Retries as the class says; raises AdminApiError for an
        error status or a body that is not JSON, AdminApiUnreachable when no answer came.
        """
        resp = self._send("GET", path, params=params, base_url=base_url, timeout=timeout)
        return self._decode(resp, "GET", self._url(path, base_url) if base_url else path)

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
        if _is_html(resp):
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

    def _url(self, path: str, base_url: str | None) -> str:
        base = (base_url or self.base_url).rstrip("/")
        url = base + (path if path.startswith("/") else "/" + path)
        if self._base_query and base == self.base_url:
            url += ("&" if "?" in url else "?") + self._base_query
        return url

    def _count(self) -> None:
        with self._lock:
            self._requests_made += 1

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        base_url: str | None = None,
        timeout: float | None = None,
        json_body: Any = None,
    ) -> requests.Response:
        url = self._url(path, base_url)
        # errors of calls sent to a named broker say which broker answered
        path = display_url(url) if base_url else path
        trusted = self.trusts(url)
        headers: dict[str, str | None] | None = None if trusted else {"Authorization": None}
        attempts = 1 + (self.retries if method == "GET" else 0)
        per_read = timeout if timeout is not None else self.timeout
        for attempt in range(attempts):
            last = attempt == attempts - 1
            deadline = self._call_deadline(per_read, method, path)
            if trusted and self._oauth2 is not None:  # raises OAuth2Error when there is none
                headers = {"Authorization": f"Bearer {self._oauth2.token(deadline).reveal()}"}
            resp: requests.Response | None = None
            failure: CollectorError
            wait = per_read
            try:
                self._count()
                # no wait for the head may outlast the call's deadline (the poll's, at most):
                # not connecting, not one read, not a head trickled a byte at a time
                wait = _bounded(per_read, deadline)
                with reads_by(deadline):
                    resp = self.session.request(
                        method,
                        url,
                        params=params,
                        json=json_body,
                        headers=headers,
                        timeout=wait,
                        stream=True,
                        # per call, else REQUESTS_CA_BUNDLE in the environment overrides our CA
                        verify=self.session.verify,
                    )
                self._read_body(resp, deadline, per_read, method, path)
            except requests.exceptions.SSLError as exc:
                raise AdminApiUnreachable(method, path, self._reason(exc, _tls_hint(exc))) from None
            except (requests.ConnectionError, requests.exceptions.ConnectTimeout) as exc:
                if _client_cert_refused(exc):  # TLS 1.3 reports the refusal after the handshake
                    raise AdminApiUnreachable(
                        method, path, self._reason(exc, CLIENT_CERT_HINT)
                    ) from None
                failure = AdminApiUnreachable(method, path, self._connection_reason(exc))
                why = "connection failed"
            except _BrokenAnswer as exc:  # the connection broke while the body arrived
                failure, why = AdminApiUnreachable(method, path, exc.reason), exc.reason
            except requests.Timeout:
                # a read timeout is not retried: the broker is slow, asking again adds load
                late = self._late(deadline)
                raise AdminApiUnreachable(method, path, late or _no_answer(per_read)) from None
            except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
                raise AdminApiUnreachable(method, path, self._reason(exc)) from None
            except OSError as exc:  # requests' own: a CA bundle or client cert it cannot read
                hint = "fix PULSAR_LENS_CA_BUNDLE / PULSAR_LENS_TLS_CERT_FILE / _KEY_FILE"
                raise AdminApiUnreachable(method, path, self._reason(exc, hint)) from None
            else:
                if resp.status_code < 400:
                    return resp
                failure = self._error(method, path, resp, trusted=trusted)
                if resp.status_code not in RETRY_STATUSES:
                    raise failure
                why = f"status {resp.status_code}"
            if last:
                raise (
                    _with_note(failure, f"gave up after {attempts} attempts")
                    if attempt
                    else failure
                )
            if not self._wait(attempt, resp, method, path, why):
                raise _with_note(failure, NOT_RETRIED)
        raise AssertionError("unreachable")  # pragma: no cover

    def _call_deadline(self, per_read: float, method: str, path: str) -> float:
        """When this call must have its whole answer; refuses to start past the poll's."""
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            raise AdminApiUnreachable(method, path, "skipped: the poll's deadline had passed")
        own = now + per_read * CALL_TIMEOUTS
        return own if self.deadline is None else min(own, self.deadline)

    def _late(self, deadline: float) -> str:
        """Why a call that timed out at its `deadline` has no answer ("" when it timed out
        before: one read waited its whole timeout)."""
        if time.monotonic() < deadline:
            return ""
        whose = "the poll's" if deadline == self.deadline else "the call's"
        return f"no whole status line and headers came before {whose} deadline passed"

    def _read_body(
        self, resp: requests.Response, deadline: float, per_read: float, method: str, path: str
    ) -> None:
        """Read the streamed body (`collectors.answers.read_body`) into `resp`. A connection
        that breaks mid-answer raises `_BrokenAnswer` (never a partial body taken for the
        whole)."""
        try:
            body = read_body(
                resp, deadline=deadline, per_read=per_read, cap=self.max_response_bytes
            )
        except AnswerLate as exc:
            raise AdminApiUnreachable(
                method,
                path,
                f"the answer was still arriving after {exc.size} bytes "
                "when the call's deadline passed",
            ) from None
        except AnswerStalled as exc:
            raise AdminApiUnreachable(
                method,
                path,
                f"the answer stopped after {exc.size} bytes: nothing more came "
                f"within {per_read:g}s",
            ) from None
        except AnswerBroken as exc:
            raise _BrokenAnswer(exc.reason) from None
        except AnswerTooLarge:
            raise AdminApiError(
                method,
                path,
                resp.status_code,
                "",
                f"the answer is larger than {self.max_response_bytes // 1024 // 1024} MiB "
                "(PULSAR_LENS_MAX_RESPONSE); it was not read",
            ) from None
        resp._content = body
        resp._content_consumed = True  # type: ignore[attr-defined]

    def _wait(
        self, attempt: int, resp: requests.Response | None, method: str, path: str, why: str
    ) -> bool:
        """Sleep before the next attempt; False (no sleep) when the poll's deadline would
        pass first: the failure is then told as it is, not as a skipped call."""
        delay = min(self.backoff * (2**attempt), MAX_BACKOFF)
        if resp is not None:
            retry_after = resp.headers.get("Retry-After", "")
            if retry_after.isdigit():
                delay = min(max(delay, float(retry_after)), MAX_BACKOFF)
            resp.close()
        if self.deadline is not None and time.monotonic() + delay >= self.deadline:
            log.debug("%s %s: %s; no retry, the poll's deadline comes first", method, path, why)
            return False
        log.debug("%s %s: %s; retry %d in %.2fs", method, path, why, attempt + 1, delay)
        if delay:
            time.sleep(delay)
        return True

    def _connection_reason(self, exc: BaseException) -> str:
        """Why no answer came, a plain sentence first when the server reset or closed."""
        text = str(exc)
        plain = ""
        if "ConnectionResetError" in text or "Connection reset" in text:
            plain = "the connection was reset before an answer came"
        elif "RemoteDisconnected" in text:
            plain = "the server closed the connection without an answer"
        return f"{plain} ({self._reason(exc)})" if plain else self._reason(exc)

    def _reason(self, exc: BaseException, hint: str = "") -> str:
        # requests' messages carry the URL and the low-level cause, never request headers
        text = self.redact(f"{type(exc).__name__}: {exc}")[:BODY_EXCERPT]
        return f"{text}; {hint}" if hint else text

    def _error(
        self, method: str, path: str, resp: requests.Response, *, trusted: bool
    ) -> AdminApiError:
        body = _reason_text(resp)
        hint = ""
        if resp.status_code in (401, 403) and self._has_credentials and not trusted:
            hint = UNTRUSTED_HINT
        elif resp.status_code in (401, 403):
            forbidden = resp.status_code == 403 or _is_authorization(body)
            hint = AUTH_HINT_MISSING
            if self._has_credentials:
                hint = self._auth_hint(forbidden=forbidden)
        elif resp.status_code == 404:
            hint = "it does not exist (deleted, or a wrong tenant, namespace or topic)"
        elif resp.status_code in (307, 308):
            hint = "the broker redirected elsewhere"
        return AdminApiError(method, path, resp.status_code, body, hint)

    def _auth_hint(self, *, forbidden: bool) -> str:
        """What to fix when the broker refused our credentials: who we are (expired, wrong
        key) or what our role may do (`forbidden`; Pulsar answers most of those with 401)."""
        source = self._source
        token = self._secret.reveal() if self._secret else ""
        if forbidden:
            role = jwt_claims(token).get("sub") if token else None
            who = f" (role {clean(role)!r})" if isinstance(role, str) else ""
            return (
                f"forbidden: {source}{who} was refused access to this; grant that role "
                "access, or use a role that has it"
            )
        if self._oauth2 is not None:
            self._oauth2.invalidate()
            return (
                f"{source} was refused: the broker could not authenticate it; check "
                "PULSAR_LENS_OAUTH2_AUDIENCE and that the broker trusts the issuer's key"
            )
        if not token:
            return (
                f"{source} was refused: the broker could not authenticate that user with it; "
                "check both"
            )
        expired = token_expired_at(token)
        if expired is not None:
            when = f"{expired:%Y-%m-%dT%H:%M:%SZ}"
            return f"{source} was refused: it expired at {when}; create a new one"
        return (
            f"{source} was refused: the broker could not authenticate it (signed with another "
            "key, malformed, or for another cluster); replace it"
        )

    def _decode(self, resp: requests.Response, method: str, path: str) -> Any:
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return decode_json(resp.content)
        except ValueError:
            kind = resp.headers.get("Content-Type") or "no Content-Type"
            hint = f"status {resp.status_code} with a body not JSON ({kind})"
            raise AdminApiError(method, path, None, resp.text, hint) from None


class _BrokenAnswer(Exception):
    """The connection broke while an answer's body arrived (reset, or closed before its
    Content-Length): no answer at all, as a connection error is, so a GET may be retried."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _bounded(per_read: float, deadline: float) -> float:
    """The socket timeout of one call: `per_read`, or less when `deadline` is nearer."""
    left = deadline - time.monotonic()
    return per_read if per_read <= left else max(0.001, left)


def _no_answer(per_read: float) -> str:
    return f"no answer within {per_read:g}s"


def _with_note(exc: CollectorError, note: str) -> CollectorError:
    """The same failure, told with `note` (why it was not retried, or how often it was)."""
    if isinstance(exc, AdminApiError):
        hint = f"{exc.hint}; {note}" if exc.hint else note
        return AdminApiError(exc.method, exc.path, exc.status, exc.body, hint)
    if isinstance(exc, AdminApiUnreachable):
        return AdminApiUnreachable(exc.method, exc.path, f"{exc.reason}; {note}")
    return exc


def _is_html(resp: requests.Response) -> bool:
    kind = resp.headers.get("Content-Type", "").lower()
    return kind.startswith("text/html") or resp.text.lstrip()[:1] == "<"


def _is_authorization(reason: str) -> bool:
    """Whether a 401's reason says the role lacks a permission (not that it is unknown)."""
    return any(m in reason for m in _AUTHORIZATION_MARKERS)


def _client_cert_refused(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "alert" in text and any(a in text for a in _CLIENT_CERT_ALERTS)


def _tls_hint(exc: BaseException) -> str:
    if "wrong version number" in str(exc).lower():
        return "that port does not speak TLS (a plain http:// port?)"
    return CLIENT_CERT_HINT if _client_cert_refused(exc) else TLS_HINT


def _reason_text(resp: requests.Response) -> str:
    """The broker's `reason` field when the body is Pulsar's JSON error, else the raw text."""
    try:
        payload = resp.json()
    except ValueError:
        return resp.text
    if isinstance(payload, dict) and isinstance(payload.get("reason"), str):
        return str(payload["reason"])
    return resp.text
