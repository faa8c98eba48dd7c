"""A poll over its interval as fields, and the interval it needs (`collectors.overrun`)."""

from __future__ import annotations

import pytest

from pulsar_lens.collectors.heartbeat import overrun_words
from pulsar_lens.collectors.overrun import needed_interval_for, overrun_of


@pytest.mark.parametrize(
    ("spent", "needed"),
    [(0.4, 10.0), (8.42, 30.0), (47.0, 120.0), (59.8, 180.0), (96.0, 240.0), (700.0, 1800.0)],
)
def test_needed_interval_is_two_and_a_half_times_the_poll_rounded_up(
    spent: float, needed: float
) -> None:
    assert needed_interval_for(spent) == needed


def test_overrun_counts_the_write_with_the_poll() -> None:
    assert overrun_of(20.0, None, 30.0) is None
    assert overrun_of(20.0, 9.0, 30.0) is None
    overrun = overrun_of(20.0, 11.0, 30.0, deadline=120.0, detail_budget=500)
    assert overrun is not None
    assert overrun.spent == 31.0
    assert overrun.settings == ("PULSAR_LENS_POLL_INTERVAL", "PULSAR_LENS_DETAIL_BUDGET")


def test_overrun_at_the_deadline_names_it_among_the_settings() -> None:
    overrun = overrun_of(119.0, 20.0, 30.0, deadline=120.0)
    assert overrun is not None and overrun.hit_deadline
    assert overrun.settings == (
        "PULSAR_LENS_POLL_INTERVAL",
        "PULSAR_LENS_POLL_DEADLINE",
        "PULSAR_LENS_DETAIL_BUDGET",
    )
    words = overrun_words(overrun)
    assert "(raise PULSAR_LENS_POLL_INTERVAL and PULSAR_LENS_POLL_DEADLINE" in words
