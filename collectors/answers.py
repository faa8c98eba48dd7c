"""Reading an HTTP answer's body within a deadline and a size cap.

Every answer from the network is read this way (the admin API's, an OAuth2 issuer's): one that
trickles, stalls or never ends cannot hold its caller past the deadline, nor a huge one the
memory. The caller turns each failure into its own error; nothing partial is ever returned.
`decode_json` reads the body as JSON the one way every answer is read.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import requests
import urllib3.exceptions

from pulsar_lens.core.errors import BODY_EXCERPT
from pulsar_lens.core.secrets import clean

CHUNK = 256 * 1024


class AnswerLate(Exception):
    """The answer was still arriving when the deadline passed."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes read when the deadline passed")
        self.size = size


class AnswerStalled(Exception):
    """Nothing more came for `per_read` seconds."""

    def __init__(self, size: int) -> None:
        super().__init__(f"nothing more came after {size} bytes")
        self.size = size


class AnswerTooLarge(Exception):
    """The answer passed the size cap; the rest was not read."""


class AnswerBroken(Exception):
    """The connection broke while the body arrived (reset, or closed before its
    Content-Length): no answer at all, as a connection error is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_body(resp: requests.Response, *, deadline: float, per_read: float, cap: int) -> bytes:
    """The whole body of a streamed answer (`stream=True`), read before `deadline` (a
    `time.monotonic()` value) with no single read waiting over `per_read` seconds, and at
    most `cap` bytes. The answer is closed when any of that fails."""
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AnswerLate(size)
            # asked again each time: once the body is read the connection goes back to the
            # pool, where another call may take it or close it
            sock = socket_of(resp)
            if sock is not None:  # no single read may outlast the deadline either
                with contextlib.suppress(OSError):  # closed already: the read below says so
                    sock.settimeout(min(per_read, left))
            try:
                chunk = resp.raw.read1(CHUNK, decode_content=True)
            except urllib3.exceptions.ReadTimeoutError:
                if time.monotonic() >= deadline:
                    raise AnswerLate(size) from None
                raise AnswerStalled(size) from None
            except (urllib3.exceptions.ProtocolError, OSError) as exc:
                raise AnswerBroken(broken_reason(exc, size)) from None
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > cap:
                raise AnswerTooLarge()
            chunks.append(chunk)
    except BaseException:
        resp.close()
        raise


def socket_of(resp: requests.Response) -> socket.socket | None:
    """The socket an answer streams from, when there is one (not in recorded fakes)."""
    sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def broken_reason(exc: BaseException, size: int) -> str:
    cause = (
        exc.args[1]
        if isinstance(exc, urllib3.exceptions.ProtocolError) and len(exc.args) > 1
        else exc
    )
    if isinstance(cause, http.client.IncompleteRead):  # urllib3's is one too
        got = cause.partial if isinstance(cause.partial, int) else len(cause.partial)
        more = cause.expected if isinstance(cause.expected, int) else 0
        return (
            f"the answer was truncated: {got} of the {got + more} bytes its Content-Length "
            "announced came, then the connection closed"
        )
    if isinstance(cause, ConnectionResetError):
        return f"the connection was reset after the headers, {size} bytes into the answer"
    name = type(cause).__name__
    return clean(f"the connection broke {size} bytes into the answer ({name}: {cause})")[
        :BODY_EXCERPT
    ]


class Duplicated(dict[str, Any]):
    """A JSON object that held some keys more than once: the last value of each is kept (as
    `json.loads` keeps it), and `duplicates` names them so a parser can say so."""

    duplicates: tuple[str, ...] = ()


def _object(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    twice = Duplicated(found)
    twice.duplicates = tuple(key for key, n in Counter(k for k, _ in pairs).items() if n > 1)
    return twice


def decode_json(body: bytes) -> Any:
    """An answer's JSON, read as UTF-8 (RFC 8259; Pulsar writes nothing else). Bytes that are
    not UTF-8 become lone surrogates (`surrogateescape`), which no name check passes, instead
    of U+FFFD or another guessed charset turning one name into another existing one.
    ValueError when the body is not JSON."""
    return json.loads(body.decode("utf-8-sig", "surrogateescape"), object_pairs_hook=_object)
