"""`unload-history` (Spark): every outage the probes saw across the whole stored history, and
where and when they fell.

An **outage** is exactly `shared.outages.probe_outages`'s: per probe run and topic, a
maximal run of consecutive messages (by `seq`) published slower than `slow_ms` or never
acknowledged; it is cut at the last good acknowledgement before the run (else the run's first
send) and back at the run's earliest acknowledgement (else the next, good, message's);
`outage_ms = back_at - cut_at`, unmeasured (no `back_at`) when nothing after the run was
acknowledged. Probe rows are read by time, from the first stored
poll on, up to now (they are written on the probe's own clock, not with a poll).

An **owner move** is a change of a bundle's owner between two consecutive polls that list it
(unowned counts as an owner, None). Each outage gets the **broker** that owned its bundle at
the newest poll at or before the cut ("(unknown)" when no poll lists the bundle before it, or
lists it unowned), and the move whose two polls enclose the cut (`since <= cut_at < at`),
when there is one (`moved`).

Frames: `outages` (every one, oldest first); `by_bundle` (every probed bundle: messages,
duplicate deliveries, moves, outages, median / p99 / max outage, delayed and lost messages);
`by_broker` (the same per broker at the cut); `by_hour` (per UTC hour of the cut: outages,
median and max, lost); `worst` (the `top` longest measured outages); `trend` (per UTC day:
outages and median, with the least-squares slope of the daily median in the summary).
Medians and p99 are linear percentiles of the measured outages (those with a `back_at`).

The plan (`plan`) finds the runs with window functions and aggregates in Spark; `reference`
is the same rule on pandas, reusing `probe_outages` itself, and the tests prove both give the
same frames.
"""

from __future__ import annotations

from typing import Any

from pulsar_lens.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    BaseModel,
    Field,
    Page,
    Result,
    SparkInputs,
    View,
)
from pulsar_lens.plugins.builtin.shared.outages import SLOW_MS
from pulsar_lens.plugins.builtin.unload_history.frames import TOP, finish
from pulsar_lens.plugins.builtin.unload_history.plan import empty_parts, spark_parts


class UnloadHistory(AnalysisPlugin):
    name = "unload-history"
    title = "Unload history"
    description = (
        "Every probe outage in the whole stored history: per bundle, per owning broker, per "
        "hour and per day, the worst ones, and whether the median outage is growing."
    )
    version = "0.1"
    engine = "spark"
    inputs = ("probes", "bundles")
    history = HISTORY_ALL
    outputs = ("outages", "by_bundle", "by_broker", "by_hour", "worst", "trend")
    page = Page(
        title="Unload history",
        icon=":material/timeline:",
        caption="What every unload cost the probes over the stored history, from a Spark job.",
        url_path="unload-history",
        order=50,
    )

    class Params(BaseModel):
        slow_ms: float = Field(
            SLOW_MS,
            gt=0,
            le=60_000,
            description="A probe publish slower than this (ms) is part of an outage",
        )
        top: int = Field(TOP, ge=1, le=500, description="Outages in the worst list")

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        if data.snapshots.empty:
            return finish(empty_parts(), top=params.top)
        parts = spark_parts(data.history("probes"), data.history("bundles"), slow_ms=params.slow_ms)
        return finish(parts, top=params.top)

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.unload_history.views import render_views  # altair: on use

        return render_views(result)
