"""Secrets that never show themselves, and the one function every outside text goes through.

`Secret` wraps a credential (admin token, URL password, client token): its repr, str and
format are `***`, and creating one registers its value so that `redact()` removes it from any
text, wherever that text came from: an error body that echoes request headers, a log line,
an exception message. A multi-line value is removed whole and line by line, and the Basic
form of a user and password (`base64(user:password)`) is registered with it.

`clean()` is what everything quoted from the network goes through before it is logged,
stored or shown: secrets redacted, then control characters escaped, so that a newline in an
error body cannot forge a log line.

`split_credentials(url)` takes `user:password@` out of a URL: the URL is then safe to print,
and the password is a `Secret`.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

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


def register(value: str) -> None:
    """Make `redact()` remove `value` (whole, each line of it, and its stripped form)."""
    pieces = {value, value.strip()}
    pieces.update(line.strip() for line in value.splitlines())
    with _lock:
        _known.update(p for p in pieces if len(p) >= MIN_PIECE)


def forget(value: str) -> None:
    """Stop redacting `value` (an access token long expired and replaced): keeps the set
    of known secrets from growing with every refresh of a short-lived token."""
    pieces = {value, value.strip()}
    pieces.update(line.strip() for line in value.splitlines())
    with _lock:
        _known.difference_update(pieces)


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
    """`(url without user:password@, user, password)`; the password is registered."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a malformed port
    except ValueError:  # not a URL we can take apart: print it with any userinfo masked
        return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", url), None, None
    if parts.username is None and parts.password is None:
        return url, None, None
    user = unquote(parts.username or "")
    password = Secret(unquote(parts.password or "")) if parts.password is not None else None
    if password is not None:
        register_basic(user, password.reveal())
    host = parts.netloc.rpartition("@")[2]
    bare = SplitResult(parts.scheme, host, parts.path, parts.query, parts.fragment)
    return urlunsplit(bare), user or None, password


def display_url(url: str) -> str:
    """The URL as it may be printed: without credentials."""
    return split_credentials(url)[0]


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
