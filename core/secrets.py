"""Secrets that never show themselves, and the one function every outside text goes through.

`Secret` wraps a credential (admin token, URL password, client token): its repr, str and
format are `***`, and creating one registers its value so that `redact()` removes it from any
text, wherever that text came from: an error body that echoes request headers, a log line,
an exception message. A multi-line value is removed whole and line by line, and so are its
encoded forms (base64 standard and URL-safe, padded or not; percent-encoded), as a server may
quote it; the Basic form of a user and password (`base64(user:password)`) is registered too.

`clean()` is what everything quoted from the network goes through before it is logged,
stored or shown: secrets redacted, then control characters escaped, so that a newline in an
error body cannot forge a log line.

`split_credentials(url)` takes `user:password@` out of a URL: the password is a `Secret`, and
so is every value of the URL's query (a gateway's `?token=`) and a Spark Connect URL's
`;token=` (and any parameter it sends as a header); `display_url` shows none of them.

`is_credential_var(name, value)` says which environment variables carry a credential: what
a process that runs someone else's code (a plugin worker) must not inherit.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

MASK = "***"
MIN_PIECE = 4  # shorter lines of a multi-line secret are not worth (or safe) replacing
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]|\r|\n|\t")

_known: set[str] = set()
_lock = threading.Lock()


class Secret:
    """A credential that never shows itself in repr, str, format, logs or tracebacks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        register(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:  # pickled into a worker process, it registers itself there
        return (Secret, (self._value,))


def _forms(value: str) -> set[str]:
    """`value` whole, stripped, line by line, and each of its whole forms encoded."""
    pieces = {value, value.strip()}
    pieces.update(line.strip() for line in value.splitlines())
    for whole in {value, value.strip()}:
        raw = whole.encode("utf-8", "surrogateescape")
        for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            text = encoded.decode("ascii")
            pieces.update((text, text.rstrip("=")))
        escapes = (
            quote(whole, safe="", errors="surrogateescape"),
            quote(whole, errors="surrogateescape"),
            quote_plus(whole, safe="", errors="surrogateescape"),
        )
        for escaped in escapes:
            # a server may write the hex digits in either case
            pieces.update((escaped, re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), escaped)))
    return {p for p in pieces if len(p) >= MIN_PIECE}


def register(value: str) -> None:
    """Make `redact()` remove `value`: whole, each line of it, its stripped form and its
    base64 and percent-encoded forms."""
    forms = _forms(value)
    with _lock:
        _known.update(forms)


def forget(value: str) -> None:
    """Stop redacting `value` (an access token long expired and replaced): keeps the set
    of known secrets from growing with every refresh of a short-lived token."""
    forms = _forms(value)
    with _lock:
        _known.difference_update(forms)


def register_basic(user: str, password: str) -> None:
    """Register the credentials of HTTP Basic auth, including the header's base64 form."""
    register(password)
    pair = f"{user}:{password}".encode()
    register(base64.b64encode(pair).decode("ascii"))


def redact(text: str) -> str:
    """`text` without any registered secret, Bearer/Basic credential or URL userinfo."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)  # longest first: whole before pieces
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def header_safe(value: str) -> bool:
    """Whether `value` can be sent in an HTTP header as it is: printable ASCII only (a
    token with a line break, an emoji or a NUL is refused before anything is sent)."""
    return value.isascii() and value.isprintable()


def escape_controls(text: str) -> str:
    """Control characters as visible escapes (`\\n`, `\\x1b`, ...), so text stays one line."""

    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        code = ord(char)
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
        return named.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")

    return _CONTROL.sub(escape, text)


def clean(text: object, *, limit: int | None = None) -> str:
    """Any text from outside, made safe to log, store and show: redacted, then one line.

    `limit` cuts the result to that many characters, after redaction (so a secret that
    straddles the cut is still removed whole).
    """
    safe = escape_controls(redact(str(text)))
    return safe if limit is None or len(safe) <= limit else safe[: limit - 1] + "…"


def split_credentials(url: str) -> tuple[str, str | None, Secret | None]:
    """`(url without user:password@, user, password)`; the password is registered, and so is
    each value of the URL's query (kept in the URL: it is sent, never shown)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a malformed port
    except ValueError:  # not a URL we can take apart: print it with any userinfo masked
        return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", url), None, None
    _register_query(parts.query)
    _register_connect_params(parts)
    if parts.username is None and parts.password is None:
        return url, None, None
    user = unquote(parts.username or "")
    password = Secret(unquote(parts.password or "")) if parts.password is not None else None
    if password is not None:
        register_basic(user, password.reveal())
    host = parts.netloc.rpartition("@")[2]
    bare = SplitResult(parts.scheme, host, parts.path, parts.query, parts.fragment)
    return urlunsplit(bare), user or None, password


def _register_query(query: str) -> None:
    """A query in a configured URL is a credential (an API gateway's `?token=`): its values
    are registered, the names (`token`) are not, so that the names stay readable."""
    if query:
        register(query)
        for _, value in parse_qsl(query, keep_blank_values=True):
            register(value)


# Spark Connect's own parameters that say nothing secret; every other one (`token`, or a
# header the client sends as it is) is a credential
_CONNECT_PLAIN = frozenset(
    {
        "use_ssl",
        "user_id",
        "user_agent",
        "session_id",
        "grpc_keepalive_enabled",
        "grpc_keepalive_time_ms",
        "grpc_keepalive_timeout_ms",
        "grpc_keepalive_without_calls",
        "grpc_max_message_size",
    }
)


def _connect_params(parts: SplitResult) -> list[tuple[str, str]]:
    """A Spark Connect URL's parameters (`sc://host:port/;token=...;use_ssl=true`), which it
    carries in its path, not in a query."""
    if parts.scheme.lower() != "sc" or ";" not in parts.path:
        return []
    pairs = (item.partition("=") for item in parts.path.split(";")[1:] if item)
    return [(name, value) for name, _, value in pairs]


def _register_connect_params(parts: SplitResult) -> None:
    for name, value in _connect_params(parts):
        if value and name.lower() not in _CONNECT_PLAIN:
            register(value)


def display_url(url: str) -> str:
    """The URL as it may be printed: without credentials, its query's values masked."""
    shown = split_credentials(url)[0]
    try:
        parts = urlsplit(shown)
    except ValueError:
        return shown
    if _connect_params(parts):
        head, *items = parts.path.split(";")
        for i, item in enumerate(items):
            name, sep, _ = item.partition("=")
            if sep and name.lower() not in _CONNECT_PLAIN:
                items[i] = f"{name}={MASK}"
        parts = parts._replace(path=";".join([head, *items]))
        shown = urlunsplit(parts)
    if not parts.query:
        return shown
    names = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
    masked = "&".join(f"{quote(name)}={MASK}" for name in names) or MASK
    return urlunsplit(parts._replace(query=masked, fragment=""))


_CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|OAUTH|AUTH_PARAMS|API_?KEY")
_CREDENTIAL_VARS = frozenset({"PULSAR_LENS_CONFIG", "PULSAR_LENS_TLS_KEY_FILE"})


def is_credential_var(name: str, value: str) -> bool:
    """Whether an environment variable carries a credential or says where one is: a name
    that reads like one (`PULSAR_ADMIN_TOKEN`, `*_TOKEN_FILE`, `PULSAR_LENS_OAUTH2_*`,
    `PULSAR_LENS_OIDC_CLIENT_SECRET`, the settings file, which may hold tokens), a URL with
    `user:password@` or a query, or a value holding a registered secret."""
    upper = name.upper()
    if upper in _CREDENTIAL_VARS or _CREDENTIAL_NAME.search(upper):
        return True
    if "://" in value:
        try:
            parts = urlsplit(value.strip())
        except ValueError:
            return True  # cannot tell what it holds: not worth the risk
        if "@" in parts.netloc or parts.query:
            return True
    return redact(value) != value


def without_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without its credential variables (`is_credential_var`)."""
    return {k: v for k, v in environ.items() if not is_credential_var(k, v)}


class RedactingFilter(logging.Filter):
    """A logging filter that passes every record's message (and traceback) through `clean`
    (the traceback through `redact`, keeping its lines): attach it to each handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = clean(record.getMessage()), None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Attach a `RedactingFilter` to every handler of `logger` (default: the root logger)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
