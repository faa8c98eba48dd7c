"""How the collect process's results passes keep up with its polls: when the last one ended,
how long it took and how many polls it left unanalysed. The results worker counts them
(`plugins.precompute`), the health file keeps them (`collectors.health`) and /metrics serves
them (`exporter`): one value, so the three cannot disagree on a field.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PassProgress:
    """The results passes of one collect process so far (all clusters: one pass analyses the
    newest snapshot of each); `finished_at` is UTC, None before the first pass ended."""

    passes: int = 0  # passes ended, finished or failed, since the process started
    finished_at: dt.datetime | None = None  # when the last one ended
    seconds: float = 0.0  # wall seconds the last one took
    skipped: int = 0  # snapshots a newer one of their cluster replaced while it ran
    skipped_total: int = 0  # the same, since the process started
