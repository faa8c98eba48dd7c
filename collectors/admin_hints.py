"""What an admin call's failure tells the user: the hint that says what to fix, and the reason
read from the broker's answer or the exception.

`AdminClient` raises the errors; this module only words them. Every text that can hold what a
server or an exception said goes through `core.secrets.clean` first (no credential, no
control character), and nothing here sends a request.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator

import requests

from pulsar_lens.collectors.oauth2 import jwt_claims, token_expired_at
from pulsar_lens.core.errors import BODY_EXCERPT, AdminApiError, AdminApiUnreachable, CollectorError
from pulsar_lens.core.parts import BULK_BYTES_PER_TOPIC, MAX_MAX_RESPONSE_MIB, MAX_RESPONSE_ENV
from pulsar_lens.core.secrets import clean

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
# OpenSSL's reason codes (`ssl.SSLError.reason`) of the alerts a server sends when it refuses
# the client's certificate or its absence, e.g. TLSV13_ALERT_CERTIFICATE_REQUIRED
_CLIENT_CERT_ALERTS = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA", "HANDSHAKE_FAILURE")
_MAX_CAUSES = 20
UNTRUSTED_HINT = (
    "credentials go only to the admin URL's host; list this one in PULSAR_LENS_TRUSTED_ORIGINS "
    "(or set it to 'cluster') to send them there too"
)
NOT_RETRIED = "not retried: the poll's deadline would pass during the wait"
RETRY_TOO_LATE = "not retried: the poll's deadline passed during the wait"


def too_large_hint(cap: int) -> str:
    """What to set when an answer is larger than `cap` bytes: a cap twice as large (within
    the variable's limit), and the size a broker's topic stats take a topic."""
    mib = cap // 1024 // 1024
    more = min(2 * mib, MAX_MAX_RESPONSE_MIB)
    topics = cap // BULK_BYTES_PER_TOPIC
    what = f"the answer is larger than {mib} MiB ({MAX_RESPONSE_ENV}); it was not read"
    if more <= mib:
        return what
    return (
        f"{what}: set {MAX_RESPONSE_ENV}={more} or more (a broker's broker-stats/topics takes "
        f"about {BULK_BYTES_PER_TOPIC / 1000:.1f} kB a topic: {mib} MiB holds about "
        f"{topics:,} topics)"
    )


def status_hint(status: int, body: str, *, credentials: bool, trusted: bool) -> str | None:
    """The hint for an error status, or None when the credentials themselves were refused
    and the caller must say why (`refused_hint`)."""
    if status in (401, 403) and credentials and not trusted:
        return UNTRUSTED_HINT
    if status in (401, 403):
        return None if credentials else AUTH_HINT_MISSING
    if status == 404:
        return "it does not exist (deleted, or a wrong tenant, namespace or topic)"
    if status in (307, 308):
        return "the broker redirected elsewhere"
    return ""


def refused_hint(source: str, token: str, *, forbidden: bool, oauth2: bool) -> str:
    """What to fix when the broker refused our credentials: who we are (expired, wrong
    key) or what our role may do (`forbidden`; Pulsar answers most of those with 401)."""
    if forbidden:
        role = jwt_claims(token).get("sub") if token else None
        who = f" (role {clean(role)!r})" if isinstance(role, str) else ""
        return (
            f"forbidden: {source}{who} was refused access to this; grant that role "
            "access, or use a role that has it"
        )
    if oauth2:
        return (
            f"{source} was refused: the broker could not authenticate it; check "
            "PULSAR_LENS_OAUTH2_AUDIENCE and that the broker trusts the issuer's key"
        )
    if not token:
        return (
            f"{source} was refused: the broker could not authenticate that user with it; check both"
        )
    expired = token_expired_at(token)
    if expired is not None:
        when = f"{expired:%Y-%m-%dT%H:%M:%SZ}"
        return f"{source} was refused: it expired at {when}; create a new one"
    return (
        f"{source} was refused: the broker could not authenticate it (signed with another "
        "key, malformed, or for another cluster); replace it"
    )


def exception_reason(exc: BaseException, hint: str = "") -> str:
    """An exception told safely, with what to do about it."""
    # requests' messages carry the URL and the low-level cause, never request headers
    text = clean(f"{type(exc).__name__}: {exc}")[:BODY_EXCERPT]
    return f"{text}; {hint}" if hint else text


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions beneath it: requests and urllib3 keep theirs in `args` (a
    ProtocolError's second) and `reason` (a MaxRetryError's), Python in `__cause__` and
    `__context__`. Read by type and field, never by message."""
    seen: set[int] = set()
    pending = [exc]
    while pending and len(seen) < _MAX_CAUSES:
        item = pending.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        beneath = (*item.args, getattr(item, "reason", None), item.__cause__, item.__context__)
        pending.extend(b for b in beneath if isinstance(b, BaseException))


def _ssl_reasons(exc: BaseException) -> list[str]:
    """OpenSSL's reason codes of the TLS errors beneath `exc` (e.g. WRONG_VERSION_NUMBER)."""
    found = (getattr(c, "reason", None) for c in causes(exc) if isinstance(c, ssl.SSLError))
    return [reason.upper() for reason in found if isinstance(reason, str)]


def connection_reason(exc: BaseException) -> str:
    """Why no answer came, a plain sentence first when the server reset or closed."""
    beneath = list(causes(exc))
    plain = ""
    if any(isinstance(c, http.client.RemoteDisconnected) for c in beneath):  # a reset's kind
        plain = "the server closed the connection without an answer"
    elif any(isinstance(c, ConnectionResetError) for c in beneath):
        plain = "the connection was reset before an answer came"
    return f"{plain} ({exception_reason(exc)})" if plain else exception_reason(exc)


def no_answer(per_read: float) -> str:
    return f"no answer within {per_read:g}s"


def with_note(exc: CollectorError, note: str) -> CollectorError:
    """The same failure, told with `note` (why it was not retried, or how often it was)."""
    if isinstance(exc, AdminApiError):
        hint = f"{exc.hint}; {note}" if exc.hint else note
        return AdminApiError(exc.method, exc.path, exc.status, exc.body, hint)
    if isinstance(exc, AdminApiUnreachable):
        return AdminApiUnreachable(exc.method, exc.path, f"{exc.reason}; {note}")
    return exc


def is_html(resp: requests.Response) -> bool:
    kind = resp.headers.get("Content-Type", "").lower()
    return kind.startswith("text/html") or resp.text.lstrip()[:1] == "<"


def is_authorization(reason: str) -> bool:
    """Whether a 401's reason says the role lacks a permission (not that it is unknown)."""
    return any(m in reason for m in _AUTHORIZATION_MARKERS)


def client_cert_refused(exc: BaseException) -> bool:
    """Whether the server refused the client's certificate (or its absence) with an alert."""
    return any("ALERT" in r and r.endswith(_CLIENT_CERT_ALERTS) for r in _ssl_reasons(exc))


def tls_hint(exc: BaseException) -> str:
    if "WRONG_VERSION_NUMBER" in _ssl_reasons(exc):
        return "that port does not speak TLS (a plain http:// port?)"
    return CLIENT_CERT_HINT if client_cert_refused(exc) else TLS_HINT


def reason_text(resp: requests.Response) -> str:
    """The broker's `reason` field when the body is Pulsar's JSON error, else the raw text."""
    try:
        payload = resp.json()
    except ValueError:
        return resp.text
    if isinstance(payload, dict) and isinstance(payload.get("reason"), str):
        return str(payload["reason"])
    return resp.text
