"""What one poll's calls came to: the failures, the names refused, the calls the deadline
cut, and the time each endpoint family took; the snapshot's `errors` and `durations`.

A cluster can list thousands of bad names or brokers: past `SHOWN_PER_FAMILY` items of one
kind, the rest are counted and said once, so one poll never writes thousands of lines.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from pulsar_lens.core.errors import AdminApiError, AdminApiUnreachable, CollectorError
from pulsar_lens.core.model import EndpointError
from pulsar_lens.core.names import NameRefused

log = logging.getLogger(__name__)
T = TypeVar("T")
SHOWN_PER_FAMILY = 20
"""Refused names of one family told one by one; more are counted in one summary."""


class Recorder:
    """Runs admin calls, turning failures into EndpointErrors and timing each family.

    `deadline` (time.monotonic()) is the poll's: a call not started by then is not made, only
    counted (`finish` says how many, once)."""

    def __init__(self, deadline: float | None = None) -> None:
        self._lock = threading.Lock()
        self.deadline = deadline
        self.errors: list[EndpointError] = []
        self.durations: dict[str, float] = {}
        self.refused: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()

    def call(self, family: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            with self._lock:
                self.skipped[family] += 1
            return None
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        except NameRefused as exc:
            self.refuse(family, str(exc))
            return None
        except CollectorError as exc:
            self._fail(family, exc)
            return None
        finally:
            with self._lock:
                spent = time.monotonic() - started
                self.durations[family] = self.durations.get(family, 0.0) + spent

    def _fail(self, family: str, exc: CollectorError) -> None:
        if isinstance(exc, (AdminApiError, AdminApiUnreachable)):
            # the call in `endpoint`, its status in `status`, what went wrong in `message`
            error = EndpointError(exc.endpoint, exc.status, exc.detail)
        else:
            error = EndpointError(family, None, str(exc))
        log.warning("poll: %s", exc)
        with self._lock:
            self.errors.append(error)

    def note(self, family: str, message: str) -> None:
        """Record something the poll chose to leave out (not a failure of the cluster)."""
        log.info("poll: %s", message)
        with self._lock:
            self.errors.append(EndpointError(family, None, message))

    def refuse(self, family: str, why: str) -> None:
        """A name from an answer that no request was made for (`why` names it)."""
        with self._lock:
            self.refused[family] += 1
            if self.refused[family] > SHOWN_PER_FAMILY:
                return
        self.note(family, f"{why}; not asked for")

    def finish(self, deadline_seconds: float) -> None:
        """Say once per family how many more names were refused, and once how many calls the
        poll's deadline (`deadline_seconds` long) cut."""
        for family, count in sorted(self.refused.items()):
            if count > SHOWN_PER_FAMILY:
                self.note(
                    family,
                    f"{count - SHOWN_PER_FAMILY} more {family} name(s) refused as the "
                    f"{SHOWN_PER_FAMILY} above were ({count} in all); not asked for",
                )
        if self.skipped:
            families = ", ".join(f"{n} {family}" for family, n in sorted(self.skipped.items()))
            self.note(
                "deadline",
                f"{sum(self.skipped.values())} call(s) not made: the poll's deadline "
                f"({deadline_seconds:g}s, PULSAR_LENS_POLL_DEADLINE) passed first ({families})",
            )
