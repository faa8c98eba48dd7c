"""How `AdminClient` sends a call and reads its answer: timeouts, retries and deadlines.

Every call has a timeout. Only idempotent GETs are retried (connection errors, a connection
that breaks mid-answer: reset, or closed before its Content-Length; 429, 502, 503, 504) with
exponential backoff or the server's Retry-After; PUT, POST and DELETE are sent once. Within a
poll (`deadline` set) no wait, read or retry outlasts the poll's deadline, not even a status
line or headers trickled a byte at a time (`collectors.transport`): a retry that would is not
made, and the failure is told as it was (`collectors.admin_hints` words it).

`AdminTransport` is the half of `AdminClient` that sends; the client sets up the session,
credentials and limits it reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import requests
import urllib3.exceptions

from pulsar_lens.collectors.admin_auth import BrokerSession
from pulsar_lens.collectors.admin_hints import (
    CLIENT_CERT_HINT,
    NOT_RETRIED,
    RETRY_TOO_LATE,
    client_cert_refused,
    connection_reason,
    exception_reason,
    is_authorization,
    no_answer,
    reason_text,
    refused_hint,
    status_hint,
    tls_hint,
    too_large_hint,
    with_note,
)
from pulsar_lens.collectors.answers import (
    AnswerBroken,
    AnswerLate,
    AnswerStalled,
    AnswerTooLarge,
    read_body,
)
from pulsar_lens.collectors.oauth2 import ClientCredentialsFlow
from pulsar_lens.collectors.transport import origin, reads_by
from pulsar_lens.core.errors import AdminApiError, AdminApiUnreachable, CollectorError
from pulsar_lens.core.secrets import Secret, display_url

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 502, 503, 504})
CALL_TIMEOUTS = 3  # a whole answer may take this many per-read timeouts, no more
MAX_BACKOFF = 5.0

Params = Mapping[str, str | int | float | bool] | None


class AdminTransport:
    """Sends calls through `session` with the client's limits; see the module docstring."""

    session: BrokerSession
    base_url: str
    timeout: float
    retries: int
    backoff: float
    deadline: float | None  # time.monotonic() after which calls are skipped
    max_response_bytes: int
    _base_query: str
    _secret: Secret | None
    _oauth2: ClientCredentialsFlow | None
    _source: str
    _has_credentials: bool
    _lock: threading.Lock
    _requests_made: int

    def trusts(self, url: str) -> bool:
        """Whether credentials may be sent to `url`."""
        return origin(url) in self.session.trusted_origins

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
        previous: CollectorError | None = None  # the failure a retry is made for
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                deadline = self._call_deadline(per_read, method, path)
            except AdminApiUnreachable:
                if previous is None:
                    raise
                # the wait before the retry ended past the poll's deadline (a busy machine):
                # the failure is told as it is, not as a skipped call
                raise with_note(previous, RETRY_TOO_LATE) from None
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
                raise AdminApiUnreachable(
                    method, path, exception_reason(exc, tls_hint(exc))
                ) from None
            except (requests.ConnectionError, requests.exceptions.ConnectTimeout) as exc:
                if client_cert_refused(exc):  # TLS 1.3 reports the refusal after the handshake
                    raise AdminApiUnreachable(
                        method, path, exception_reason(exc, CLIENT_CERT_HINT)
                    ) from None
                failure = AdminApiUnreachable(method, path, connection_reason(exc))
                why = "connection failed"
            except _BrokenAnswer as exc:  # the connection broke while the body arrived
                failure, why = AdminApiUnreachable(method, path, exc.reason), exc.reason
            except requests.Timeout:
                # a read timeout is not retried: the broker is slow, asking again adds load
                late = self._late(deadline)
                raise AdminApiUnreachable(method, path, late or no_answer(per_read)) from None
            except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
                raise AdminApiUnreachable(method, path, exception_reason(exc)) from None
            except OSError as exc:  # requests' own: a CA bundle or client cert it cannot read
                hint = "fix PULSAR_LENS_CA_BUNDLE / PULSAR_LENS_TLS_CERT_FILE / _KEY_FILE"
                raise AdminApiUnreachable(method, path, exception_reason(exc, hint)) from None
            else:
                if resp.status_code < 400:
                    return resp
                failure = self._error(method, path, resp, trusted=trusted)
                if resp.status_code not in RETRY_STATUSES:
                    raise failure
                why = f"status {resp.status_code}"
            if last:
                raise (
                    with_note(failure, f"gave up after {attempts} attempts") if attempt else failure
                )
            if not self._wait(attempt, resp, method, path, why):
                raise with_note(failure, NOT_RETRIED)
            previous = failure
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
                too_large_hint(self.max_response_bytes),
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

    def _error(
        self, method: str, path: str, resp: requests.Response, *, trusted: bool
    ) -> AdminApiError:
        body = reason_text(resp)
        hint = status_hint(
            resp.status_code, body, credentials=self._has_credentials, trusted=trusted
        )
        if hint is None:
            hint = self._auth_hint(forbidden=resp.status_code == 403 or is_authorization(body))
        return AdminApiError(method, path, resp.status_code, body, hint)

    def _auth_hint(self, *, forbidden: bool) -> str:
        """Why the broker refused our credentials; a refused OAuth2 token is dropped, so the
        next call fetches a new one."""
        if not forbidden and self._oauth2 is not None:
            self._oauth2.invalidate()
        token = self._secret.reveal() if self._secret else ""
        return refused_hint(
            self._source, token, forbidden=forbidden, oauth2=self._oauth2 is not None
        )


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
