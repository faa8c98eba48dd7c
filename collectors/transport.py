"""The HTTP transport of every collector call: each socket read of an answer ends by its call's
deadline, the status line and headers included.

requests' `timeout` bounds each read, not the answer: a server that sends its head a byte every
few seconds would hold a call for as long as it likes. Within `reads_by(deadline)`, an answer
received through a `DeadlineAdapter` lowers its socket's timeout to what is left before each
read, so the wait ends at the deadline itself, in the calling thread (no watchdog thread, no
socket shut down from elsewhere). The read then fails as a socket timeout does, so urllib3
closes that connection instead of pooling it half read.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import urlsplit

from requests.adapters import HTTPAdapter
from urllib3 import poolmanager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer
    from requests.adapters import _HostParams, _PoolKwargs

T = TypeVar("T")
MAX_KEPT = 4096
"""Entries an `OriginMemo` keeps (a few per origin: a cluster's brokers) before it starts over."""


def origin(url: str) -> str:
    """`scheme://host:port` of a URL (default ports made explicit, host lower-cased)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


class OriginMemo(Generic[T]):
    """What requests works out from the environment and the files for every call, kept per
    origin: the environment's proxies (it walks the whole environment twice), the `.netrc`
    lookup (two file checks) and whether the CA bundle is a folder (one more). Each check
    gives up the interpreter's lock, which eight calling threads then wait to get back; on
    loopback they were some 16 % of a per-topic call's time. What is kept never changes while
    the process runs, unless its environment or those files are changed under it."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, T] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._kept:
                return self._kept[key]
        found = make()
        with self._lock:
            if len(self._kept) >= MAX_KEPT:
                self._kept.clear()
            self._kept[key] = found
        return found


# the deadline of the call this thread is making: requests and urllib3 build the answer in
# the caller's thread and pass nothing of ours down to the connection
_calling = threading.local()


@contextlib.contextmanager
def reads_by(deadline: float) -> Iterator[None]:
    """Answers received in this thread within the block read nothing past `deadline` (a
    `time.monotonic()` value), their bodies included, even when read after the block."""
    outer = getattr(_calling, "deadline", None)
    _calling.deadline = deadline
    try:
        yield
    finally:
        _calling.deadline = outer


class _DeadlineReads(io.RawIOBase):
    """A socket's reads, each given at most the time left before `deadline`."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._io = sock.makefile("rb", buffering=0)  # counted by the socket, closed with us
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call's deadline passed")
        current = self._sock.gettimeout()
        if current is None or current > left:  # lowered only: a shorter per-read wait stays
            self._sock.settimeout(left)
        return self._io.readinto(buffer)

    def fileno(self) -> int:
        return self._io.fileno()

    def close(self) -> None:
        if not self.closed:
            self._io.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """http.client's answer, read through `_DeadlineReads` when its call has a deadline."""

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        deadline: float | None = getattr(_calling, "deadline", None)
        if deadline is not None:
            self.fp.close()
            self.fp = io.BufferedReader(_DeadlineReads(sock, deadline))


class _HTTPConnection(HTTPConnection):
    response_class = _DeadlineResponse


class _HTTPSConnection(HTTPSConnection):
    response_class = _DeadlineResponse


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS: dict[str, type[HTTPConnectionPool]] = {"http": _HTTPPool, "https": _HTTPSPool}


class DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose answers honour `reads_by`; mount it for http:// and https://."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pool_keys: OriginMemo[tuple[_HostParams, _PoolKwargs]] = OriginMemo()

    def build_connection_pool_key_attributes(
        self, request: Any, verify: Any, cert: Any = None
    ) -> tuple[_HostParams, _PoolKwargs]:
        """requests' own, once per origin, TLS settings and client certificate (`OriginMemo`)."""
        if not isinstance(request.url, str):
            return super().build_connection_pool_key_attributes(request, verify, cert)
        key = (origin(request.url), verify, cert if not isinstance(cert, list) else tuple(cert))
        host, pool = self._pool_keys.get(
            key,
            lambda: super(DeadlineAdapter, self).build_connection_pool_key_attributes(
                request, verify, cert
            ),
        )
        return host.copy(), pool.copy()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        # a SOCKS proxy has pools of its own kind, which keep requests' per-read timeout only
        if manager.pool_classes_by_scheme is poolmanager.pool_classes_by_scheme:
            manager.pool_classes_by_scheme = _POOLS
        return manager
