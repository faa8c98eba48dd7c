"""Reading an HTTP answer's body within a deadline and a size cap.

Every answer from the network is read this way (the admin API's, an OAuth2 issuer's): one that
trickles, stalls or never ends cannot hold its caller past the deadline, nor a huge one the
memory. The caller turns each failure into its own error; nothing partial is ever returned.
`decode_json` reads the body as JSON the one way every answer is read.
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
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
    ValueError when the body is not JSON.

    The same value as `decode_json_tolerant`, read faster: msgspec's strict decoder (which
    refuses what is not UTF-8, lone surrogate escapes, NaN and numbers no float holds) reads
    the body, and a count of its colons proves no object held a key twice. A body where
    either fails, or that is not JSON, is read again by `decode_json_tolerant`, whose value
    or error is the answer's."""
    found = _decoded_strictly(body)
    return decode_json_tolerant(body) if found is _UNSURE else found


def decode_json_tolerant(body: bytes) -> Any:
    """`decode_json` by the standard library alone: slower, and the only reader of a body
    that is not strict UTF-8 JSON or holds a key twice (see `Duplicated`)."""
    with collection_paused():
        return json.loads(body.decode("utf-8-sig", "surrogateescape"), object_pairs_hook=_object)


_UNSURE = object()
_BOM = b"\xef\xbb\xbf"  # what "utf-8-sig" drops
_SPLIT_DEPTH = 3  # levels of objects counted item by item, so no encoding is a whole answer


def _decoded_strictly(body: bytes) -> Any:
    """The body's JSON as `decode_json_tolerant` reads it, or _UNSURE."""
    text = body[len(_BOM) :] if body.startswith(_BOM) else body
    try:
        with collection_paused():
            found = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):  # not strict JSON: the tolerant reader says
        return _UNSURE
    return found if _colons(found, 0) == written_colons(text) else _UNSURE


def written_colons(text: bytes) -> int:
    """The colons the body's objects and texts hold, escaped ones counted (at least once).

    A colon is written only after an object's key or inside a text. So the compact encoding
    of what was decoded holds as many as the body did (a `\\u003a` escape becoming one), less
    one or more for each key held twice, whose earlier value the decoder dropped."""
    colons = text.count(b":")
    if b"\\" in text:  # an escape; the count may overstate, which only sends it to the slow path
        colons += text.count(b"\\u003a") + text.count(b"\\u003A")
    return colons


def _colons(value: Any, depth: int) -> int:
    """The colons of `value`'s compact JSON, its outer objects counted key by key."""
    if depth < _SPLIT_DEPTH and type(value) is dict:
        return sum(1 + key.count(":") + _colons(item, depth + 1) for key, item in value.items())
    return msgspec.json.encode(value).count(b":")


_pause_lock = threading.Lock()
_pausing = 0
_resume = False


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off inside the block (on every thread, until
    the last block running ends). Decoding an answer makes millions of objects and none of
    them garbage; without this the collector walks the growing tree again and again, which
    cost as much as the decoding itself."""
    global _pausing, _resume
    with _pause_lock:
        if _pausing == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausing -= 1
            if _pausing == 0 and _resume:
                gc.enable()
