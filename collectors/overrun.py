"""A poll that took longer than its interval, as fields: how long it took and stored, the
limits it ran under, and what to set (`Overrun`). The heartbeat, the health notes (the
Overview, `/health`) and `/metrics` carry the same fields; `text()` words them once.

What to set comes from the measured cost of a poll (docs/performance.md, `make scale`): the
analyses of a snapshot take 0.7 to 1.5 times its poll and write, so a poll with its
analyses needs about `NEEDED_FACTOR` times what its poll and write took.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from pulsar_lens.core.values import format_duration

NEEDED_FACTOR = 2.5
"""The interval a poll needs over what its poll and write took: poll + write + analyses was
1.7 to 2.5 times poll + write at 100,000 and 300,000 topics."""
DEADLINE_SLACK = 0.95  # a poll that took this share of its deadline or more was cut by it
INTERVAL_ENV = "PULSAR_LENS_POLL_INTERVAL"
DEADLINE_ENV = "PULSAR_LENS_POLL_DEADLINE"
DETAIL_BUDGET_ENV = "PULSAR_LENS_DETAIL_BUDGET"


@dataclass(frozen=True, slots=True)
class Overrun:
    """A poll whose calls, assembly and write took longer than its interval."""

    took: float  # seconds of the poll: its calls and the snapshot's assembly
    wrote: float  # seconds storing the snapshot took (0 when it was not stored)
    interval: float  # seconds between polls, as set
    deadline: float | None = None  # the poll's deadline in seconds, when known
    detail_budget: int | None = None  # per-topic calls a poll, when known

    @property
    def spent(self) -> float:
        """Seconds the loop spent on the poll: its calls, assembly and write."""
        return self.took + self.wrote

    @property
    def hit_deadline(self) -> bool:
        """True when the poll ran into its deadline: calls were cut, the snapshot partial."""
        return self.deadline is not None and self.took >= DEADLINE_SLACK * self.deadline

    @property
    def needed_interval(self) -> float:
        """The interval to set, in seconds: `needed_interval_for(spent)`."""
        return needed_interval_for(self.spent)

    @property
    def settings(self) -> tuple[str, ...]:
        """The variables to change, the first one first."""
        names = [INTERVAL_ENV]
        if self.hit_deadline:
            names.append(DEADLINE_ENV)
        return (*names, DETAIL_BUDGET_ENV)

    def text(self) -> str:
        """The notice: what the poll took, over what, and what to change."""
        stored = f" and storing it {spell_seconds(self.wrote)}" if self.wrote else ""
        return (
            f"the last poll took {spell_seconds(self.took)}{stored}, over the "
            f"{spell_seconds(self.interval)} interval, so polls run back to back and the "
            f"analyses fall behind: {self.advice()}"
        )

    def advice(self) -> str:
        """What to change, without the figures of the poll."""
        needed = spell_seconds(self.needed_interval)
        text = f"poll less often, every {needed} or more (--interval or {INTERVAL_ENV})"
        if self.hit_deadline and self.deadline is not None:
            text += (
                f"; the poll reached its {spell_seconds(self.deadline)} deadline and its "
                f"last calls were cut: raise {DEADLINE_ENV} with it"
            )
        budget = f", now {self.detail_budget}" if self.detail_budget is not None else ""
        return (
            f"{text}; or make each poll cheaper: fewer per-topic calls ({DETAIL_BUDGET_ENV}"
            f"{budget}) or fewer namespaces (--namespace)"
        )


def overrun_of(
    took: float,
    wrote: float | None,
    interval: float,
    *,
    deadline: float | None = None,
    detail_budget: int | None = None,
) -> Overrun | None:
    """The overrun of a poll that took `took` seconds and `wrote` storing it, or None when
    both fit in `interval`."""
    spent = took + (wrote or 0.0)
    if spent <= interval:
        return None
    return Overrun(
        took=took,
        wrote=wrote or 0.0,
        interval=interval,
        deadline=deadline,
        detail_budget=detail_budget,
    )


def needed_interval_for(spent: float) -> float:
    """The interval a poll whose calls, assembly and write took `spent` seconds needs with its
    analyses, rounded up: to 10 s below 2 minutes, to a minute from there."""
    return rounded_interval(NEEDED_FACTOR * spent)


def rounded_interval(seconds: float) -> float:
    """`seconds` rounded up to an interval one would set: to 10 s below 2 minutes, to a
    minute from there."""
    step = 10 if seconds < 120 else 60
    return float(max(step, math.ceil(seconds / step) * step))


def spell_seconds(value: float) -> str:
    """`1.4s` below ten seconds (a poll of 1.4 s is over a 1 s interval), else `2m5s`."""
    if value < 10 and value != round(value):
        return f"{value:.1f}s"
    return format_duration(dt.timedelta(seconds=round(value)))
