"""Notices of the collect process's own health: a store that refuses writes, a poll that took
longer than its interval, and analyses that fall behind the polls (a results pass longer than
the interval, or polls left unanalysed). They come from the health file the collect process
writes (`pulsar_lens.collectors.health`), not from the store, so they show even when no
snapshot could be stored, and only while that file is fresh (a stopped collector is the
stale-poll banner's)."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from pulsar_lens.collectors.health import (
    HealthReport,
    LoopHealth,
    analyses_lag,
    overrun_notice,
    overrun_of_loop,
    write_notice,
)
from pulsar_lens.collectors.lag import AnalysesLag
from pulsar_lens.collectors.overrun import spell_seconds
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard import data


def current_loop(
    report: HealthReport | None, cluster: str | None, *, now: dt.datetime
) -> LoopHealth | None:
    """The loop polling `cluster` (the only one's when None), if its report is still fresh."""
    loop = report.loop_of(cluster) if report is not None else None
    if report is None or loop is None:
        return None
    age = (now - report.written_at).total_seconds()
    return loop if age <= loop.late_after() else None


def current_lag(report: HealthReport | None, loop: LoopHealth | None) -> AnalysesLag | None:
    """The analyses' lag behind the polls, while `loop` (the `current_loop`) says the report
    is fresh."""
    return None if report is None or loop is None else analyses_lag(report)


def compute_notices(
    loop: LoopHealth | None, lag: AnalysesLag | None = None
) -> list[tuple[str, str]]:
    """(level, sentence) of each notice that applies: "error" or "warning"."""
    if loop is None:
        return []
    found = [
        ("error", write_notice(loop)),
        ("warning", overrun_notice(loop)),
        ("warning", lag.text() if lag is not None else None),
    ]
    return [(level, _sentence(text)) for level, text in found if text]


def compute_short_notices(
    loop: LoopHealth | None, lag: AnalysesLag | None = None
) -> list[tuple[str, str]]:
    """The sidebar's one-line forms of `compute_notices`."""
    if loop is None:
        return []
    found = []
    if write_notice(loop) and loop.failing_since is not None:
        since = loop.failing_since.astimezone(dt.UTC).strftime("%H:%M")
        found.append(("error", f"Store refuses writes: {loop.failed_writes} since {since} UTC."))
    overrun = overrun_of_loop(loop)
    if overrun is not None:
        took, every = spell_seconds(overrun.spent), spell_seconds(overrun.interval)
        needed = spell_seconds(overrun.needed_interval)
        found.append(
            (
                "warning",
                f"Last poll took {took}, over the {every} interval: poll every {needed} or more.",
            )
        )
    if lag is not None:
        found.append(("warning", _short_lag(lag)))
    return found


def _short_lag(lag: AnalysesLag) -> str:
    took, every = spell_seconds(lag.seconds), spell_seconds(lag.interval)
    text = f"Analyses took {took} against the {every} interval"
    if lag.skipped:
        text += f", {lag.skipped} poll(s) unanalysed"
    if lag.needed_interval > lag.interval:
        text += f": poll every {spell_seconds(lag.needed_interval)} or more"
    return text + "."


def chosen_health(root: str) -> tuple[LoopHealth | None, AnalysesLag | None]:
    """The chosen cluster's loop and the analyses' lag, while the health file is fresh."""
    cluster = data.chosen_cluster(root)
    report = data.collector_health(root)
    loop = current_loop(report, cluster, now=dt.datetime.now(dt.UTC))
    return loop, current_lag(report, loop)


def draw_notices(notices: list[tuple[str, str]]) -> None:
    for level, text in notices:
        # the reason is the system's text and may hold a path: shown as text, not Markdown
        (st.error if level == "error" else st.warning)(escape_markdown(text))


def health_banner(root: str, *, every: float) -> None:
    """The notices, redrawn every `every` seconds: a store that stops taking writes brings
    no new snapshot, so nothing else would rerun the page."""

    @st.fragment(run_every=every)
    def _banner() -> None:
        draw_notices(compute_notices(*chosen_health(root)))

    _banner()


def health_panel(root: str) -> None:
    """The `collector-health` panel of a plugin page: the notices, once per run of the page."""
    draw_notices(compute_notices(*chosen_health(root)))


def sidebar_notices(root: str) -> None:
    """The short forms, for the sidebar's status (inside its own refreshing fragment)."""
    draw_notices(compute_short_notices(*chosen_health(root)))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."
