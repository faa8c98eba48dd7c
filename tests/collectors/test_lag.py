"""Analyses that fall behind the polls as fields, when they do, and the words that say what to
change (`collectors.lag`)."""

from __future__ import annotations

import datetime as dt

import pytest

from pulsar_lens.collectors.lag import lag_of, needed_interval_for_pass
from pulsar_lens.core.passes import PassProgress

ENDED = dt.datetime(2026, 3, 4, 12, 5, tzinfo=dt.UTC)


def progress(seconds: float, skipped: int = 0, total: int = 0) -> PassProgress:
    return PassProgress(
        passes=61, finished_at=ENDED, seconds=seconds, skipped=skipped, skipped_total=total
    )


@pytest.mark.parametrize(
    ("seconds", "needed"), [(0.4, 10.0), (6.0, 10.0), (20.0, 30.0), (79.0, 120.0), (90.0, 180.0)]
)
def test_needed_interval_for_pass_is_half_as_much_again_rounded_up(
    seconds: float, needed: float
) -> None:
    assert needed_interval_for_pass(seconds) == needed


@pytest.mark.parametrize(
    ("seconds", "skipped", "lags"),
    [(8.0, 0, False), (3.0, 0, False), (8.1, 0, True), (3.0, 1, True), (20.0, 2, True)],
)
def test_lag_only_past_the_interval_or_with_polls_left_out(
    seconds: float, skipped: int, lags: bool
) -> None:
    assert (lag_of(progress(seconds, skipped, skipped), 8.0) is not None) == lags


def test_lag_none_before_any_pass_ended() -> None:
    assert lag_of(PassProgress(), 8.0) is None


def test_lag_says_what_the_pass_took_what_went_unanalysed_and_the_interval_to_set() -> None:
    lag = lag_of(progress(20.0, skipped=2, total=8), 8.0)
    assert lag is not None
    assert lag.text() == (
        "the analyses of the newest poll took 20s, over the 8s interval, so 2 poll(s) written "
        "meanwhile went unanalysed, replaced by a newer one (8 since the collect process "
        "started): poll less often, every 30s or more (--interval or "
        "PULSAR_LENS_POLL_INTERVAL), or run fewer light plugins (the files in "
        "PULSAR_LENS_PLUGIN_DIRS, installed plugin packages)"
    )


def test_lag_of_a_long_pass_that_left_none_out_yet_says_what_comes() -> None:
    lag = lag_of(progress(12.4, skipped=0, total=3), 8.0)
    assert lag is not None
    text = lag.text()
    assert text.startswith("the analyses of the newest poll took 12s, over the 8s interval, so ")
    assert "all but the newest go unanalysed (3 since the collect process started)" in text
    assert "every 20s or more (--interval or PULSAR_LENS_POLL_INTERVAL)" in text


def test_lag_within_the_interval_names_no_interval_it_already_has() -> None:
    lag = lag_of(progress(4.2, skipped=1, total=1), 30.0)
    assert lag is not None
    text = lag.text()
    assert "took 4.2s, within the 30s interval, yet 1 poll(s) written meanwhile" in text
    assert "poll less often (--interval or PULSAR_LENS_POLL_INTERVAL), or run fewer" in text
