"""Waiting for a server a test started: its health URL answering, or its process dying first."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def answers_ok(url: str, *, timeout: float = 2.0) -> bool:
    """Whether GET `url` answers 200 now."""
    try:
        with _DIRECT.open(url, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def wait_until_ok(
    url: str,
    *,
    timeout: float,
    exit_code: Callable[[], int | None],
    output: Callable[[], str],
    what: str,
    interval: float = 0.3,
) -> None:
    """Return once GET `url` answers 200. Fail with the tail of `output()` as soon as
    `exit_code()` (a `Popen.poll`) says `what` exited, or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = exit_code()
        if code is not None:
            raise AssertionError(
                f"{what} exited with {code} before {url} answered:\n{output()[-3000:]}"
            )
        if answers_ok(url):
            return
        time.sleep(interval)
    raise AssertionError(
        f"{what}: {url} did not answer 200 within {timeout:.0f}s:\n{output()[-3000:]}"
    )
