"""Analyses that fall behind the polls, as fields: how long the last results pass took, against
which poll interval, how many polls went unanalysed, and what to set (`AnalysesLag`). The
health notes (the Overview, `/health`) carry it, `/metrics` the same figures; `text()` words
them once.

A results pass analyses the newest snapshot (of each cluster) while the polls go on. Polls
written while it runs wait for the next pass, which takes only the newest of them: the others
are never analysed, and their pages and /metrics show the poll before.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_lens.collectors.overrun import INTERVAL_ENV, rounded_interval, spell_seconds
from pulsar_lens.core.config import GLOBAL_ENV
from pulsar_lens.core.passes import PassProgress

PASS_MARGIN = 1.5
"""The interval a results pass needs over what it took: its length varies from poll to poll
with what runs beside it (the next poll, a Spark job), and a pass that only just fits leaves
the next snapshot waiting whenever it runs long."""
PLUGIN_DIRS_ENV = GLOBAL_ENV["plugin_dirs"]


@dataclass(frozen=True, slots=True)
class AnalysesLag:
    """A results pass that took longer than the poll interval, or while which newer polls
    replaced waiting ones."""

    seconds: float  # wall seconds the last pass took
    interval: float  # seconds between polls, as set (the shortest, polling several clusters)
    skipped: int  # polls left unanalysed while the last pass ran
    skipped_total: int  # polls left unanalysed since the collect process started

    @property
    def over(self) -> bool:
        """True when the last pass took longer than the interval."""
        return self.seconds > self.interval

    @property
    def needed_interval(self) -> float:
        """The interval to set, in seconds: `needed_interval_for_pass(seconds)`."""
        return needed_interval_for_pass(self.seconds)

    def text(self) -> str:
        """The notice: what the analyses took, against what, what went unanalysed, and what to
        change."""
        took = f"the analyses of the newest poll took {spell_seconds(self.seconds)}"
        every = spell_seconds(self.interval)
        since = f"{self.skipped_total} since the collect process started"
        if not self.skipped:
            left_out = (
                f"polls written meanwhile wait and all but the newest go unanalysed ({since})"
            )
        else:
            left_out = (
                f"{self.skipped} poll(s) written meanwhile went unanalysed, replaced by a newer "
                f"one ({since})"
            )
        where = (
            f"over the {every} interval, so" if self.over else f"within the {every} interval, yet"
        )
        return f"{took}, {where} {left_out}: {self.advice()}"

    def advice(self) -> str:
        """What to change, without the figures of the pass."""
        text = f"poll less often (--interval or {INTERVAL_ENV})"
        if self.needed_interval > self.interval:
            needed = spell_seconds(self.needed_interval)
            text = f"poll less often, every {needed} or more (--interval or {INTERVAL_ENV})"
        return (
            f"{text}, or run fewer light plugins (the files in {PLUGIN_DIRS_ENV}, installed "
            "plugin packages)"
        )


def lag_of(progress: PassProgress, interval: float) -> AnalysesLag | None:
    """The lag of the last pass of `progress` against polls every `interval` seconds, or None
    when it fit and left no poll out (or none has ended)."""
    if progress.passes == 0 or (progress.seconds <= interval and not progress.skipped):
        return None
    return AnalysesLag(
        seconds=progress.seconds,
        interval=interval,
        skipped=progress.skipped,
        skipped_total=progress.skipped_total,
    )


def needed_interval_for_pass(seconds: float) -> float:
    """The interval a results pass of `seconds` needs: PASS_MARGIN times it, rounded up like
    a poll's (`rounded_interval`)."""
    return rounded_interval(PASS_MARGIN * seconds)
