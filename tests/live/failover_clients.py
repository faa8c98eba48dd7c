"""Failover consumers with a priority level, through libpulsar's C API.

The Python `pulsar-client` (3.13) has no `priority_level` argument, although the C++ library it
wraps has one; this helper calls the library's public C API (`pulsar/c/*.h`) in the same
shared object the Python client loads, so consumers are real client consumers with a real
`priorityLevel` in their subscribe command.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Sequence

import pulsar

CONSUMER_FAILOVER = 2  # pulsar_consumer_type: Exclusive, Shared, Failover, KeyShared
RESULT_OK = 0

_vp = ctypes.c_void_p
_LOGGER = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p
)


def _quiet(level: int, file: bytes, line: int, message: bytes, ctx: object) -> None:
    """Drop the library's INFO chatter; pytest shows failures from the assertions."""


_QUIET = _LOGGER(_quiet)


def _load() -> ctypes.CDLL:
    site = os.path.dirname(os.path.dirname(pulsar.__file__))
    found = sorted(glob.glob(os.path.join(site, "pulsar_client.libs", "libpulsar*.so*")))
    if not found:
        raise RuntimeError(f"libpulsar not found beside the pulsar package in {site}")
    lib = ctypes.CDLL(found[0])
    signatures: dict[str, tuple[object, list[object]]] = {
        "pulsar_client_configuration_create": (_vp, []),
        "pulsar_client_configuration_free": (None, [_vp]),
        "pulsar_client_configuration_set_operation_timeout_seconds": (None, [_vp, ctypes.c_int]),
        "pulsar_client_configuration_set_logger": (None, [_vp, _LOGGER, _vp]),
        "pulsar_client_create": (_vp, [ctypes.c_char_p, _vp]),
        "pulsar_client_close": (ctypes.c_int, [_vp]),
        "pulsar_client_free": (None, [_vp]),
        "pulsar_consumer_configuration_create": (_vp, []),
        "pulsar_consumer_configuration_free": (None, [_vp]),
        "pulsar_consumer_configuration_set_consumer_type": (None, [_vp, ctypes.c_int]),
        "pulsar_consumer_configuration_set_priority_level": (None, [_vp, ctypes.c_int]),
        "pulsar_consumer_set_consumer_name": (None, [_vp, ctypes.c_char_p]),
        "pulsar_client_subscribe": (
            ctypes.c_int,
            [_vp, ctypes.c_char_p, ctypes.c_char_p, _vp, ctypes.POINTER(_vp)],
        ),
        "pulsar_client_subscribe_multi_topics": (
            ctypes.c_int,
            [
                _vp,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_int,
                ctypes.c_char_p,
                _vp,
                ctypes.POINTER(_vp),
            ],
        ),
        "pulsar_consumer_close": (ctypes.c_int, [_vp]),
        "pulsar_consumer_free": (None, [_vp]),
        "pulsar_result_str": (ctypes.c_char_p, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in signatures.items():
        func = getattr(lib, name)
        func.restype = restype
        func.argtypes = argtypes
    return lib


class FailoverClient:
    """One client connection; `subscribe` returns a consumer handle for `close`."""

    def __init__(self, service_url: str, *, timeout_seconds: int = 30) -> None:
        self._lib = _load()
        conf = self._lib.pulsar_client_configuration_create()
        self._lib.pulsar_client_configuration_set_operation_timeout_seconds(conf, timeout_seconds)
        self._lib.pulsar_client_configuration_set_logger(conf, _QUIET, None)
        self._client = self._lib.pulsar_client_create(service_url.encode(), conf)
        self._lib.pulsar_client_configuration_free(conf)
        self._open: set[int] = set()

    def subscribe(
        self,
        topics: str | Sequence[str],
        subscription: str,
        *,
        name: str,
        priority_level: int = 0,
    ) -> int:
        """A Failover consumer on one topic (partitioned or not) or several topics."""
        lib = self._lib
        conf = lib.pulsar_consumer_configuration_create()
        lib.pulsar_consumer_configuration_set_consumer_type(conf, CONSUMER_FAILOVER)
        lib.pulsar_consumer_set_consumer_name(conf, name.encode("utf-8"))
        lib.pulsar_consumer_configuration_set_priority_level(conf, priority_level)
        consumer = _vp()
        try:
            if isinstance(topics, str):
                result = lib.pulsar_client_subscribe(
                    self._client,
                    topics.encode(),
                    subscription.encode(),
                    conf,
                    ctypes.byref(consumer),
                )
            else:
                names = (ctypes.c_char_p * len(topics))(*(t.encode() for t in topics))
                result = lib.pulsar_client_subscribe_multi_topics(
                    self._client,
                    names,
                    len(topics),
                    subscription.encode(),
                    conf,
                    ctypes.byref(consumer),
                )
        finally:
            lib.pulsar_consumer_configuration_free(conf)
        if result != RESULT_OK:
            text = lib.pulsar_result_str(result).decode()
            raise RuntimeError(f"subscribe {name!r} to {topics!r} failed: {text}")
        handle = int(consumer.value or 0)
        self._open.add(handle)
        return handle

    def close_consumer(self, handle: int) -> None:
        self._open.discard(handle)
        self._lib.pulsar_consumer_close(_vp(handle))
        self._lib.pulsar_consumer_free(_vp(handle))

    def close(self) -> None:
        for handle in list(self._open):
            self.close_consumer(handle)
        self._lib.pulsar_client_close(self._client)
        self._lib.pulsar_client_free(self._client)

    def __enter__(self) -> FailoverClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
