"""`unload-latency`: what each bundle unload cost the applications, measured by the probes;
the Bundles & unloads page.

Unload events come from the `bundle-ownership` plugin (ownership changes between polls, and
the "reloaded" ones inferred from clients that all reconnected); the probes' rows (the
`probes` table, written by `pulsar_lens.collectors.probe` when probing is on) give each event its
outage, worst publish latency, delayed and lost messages. Outages that no ownership change
explains (an unload and re-acquire between two polls on one broker) are events too. See
`outages.py` for the exact definitions.

Without probes the page lists the events and the clients that reconnected, and says that a
probe would measure the cost.

The page also draws the ownership map and its history: `bundle-ownership`'s frames, carried
in this result as they are (computed there, once), so ownership and what moves cost read
together on one page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    Chart,
    Field,
    GaugeMetricFamily,
    Inputs,
    Metric,
    MetricFamily,
    MetricsContext,
    Note,
    Page,
    Result,
    Table,
    View,
)
from pulsar_lens.core.backoff import LADDER_MS
from pulsar_lens.plugins.builtin.shared.outages import SLOW_MS, probe_outages
from pulsar_lens.plugins.builtin.shared.ownership import (
    BY_LOAD_MANAGER,
    chart_ownership,
    compute_brokers,
)
from pulsar_lens.plugins.builtin.shared.ownership import chart_timeline as chart_owners
from pulsar_lens.plugins.builtin.unload_latency.outages import (
    blind_spot,
    ladder,
    timeline,
    unload_events,
)

if TYPE_CHECKING:
    import altair as alt


class UnloadLatency(AnalysisPlugin):
    name = "unload-latency"
    title = "Unload latency"
    description = (
        "What each bundle unload cost the clients: outage, worst publish latency, delayed and "
        "lost probe messages per event, against the client's reconnect backoff ladder."
    )
    version = "1.0"
    engine = "light"
    inputs = ("probes",)
    requires = ("bundle-ownership",)
    history = 60
    outputs = (
        "events",
        "outages",
        "timeline",
        "ladder",
        "blind_spot",
        "probes",
        "ownership",
        "ownership_timeline",
        "brokers",
    )
    page = Page(
        title="Bundles & unloads",
        icon=":material/hub:",
        url_path="bundles",
        order=40,
        panels=("unload-drill",),
        caption="Which broker owned each bundle, poll by poll; probe publish latency with "
        "every unload overlaid, and what each unload cost the clients.",
        controls=("namespace",),
    )

    class Params(BaseModel):
        namespace: str = Field("", description="Only this namespace (tenant/ns); empty for all")
        slow_ms: float = Field(
            SLOW_MS,
            gt=0,
            le=60_000,
            description="A probe publish slower than this (ms) is part of an outage",
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        probes = _only(data.history("probes"), params.namespace)
        owned = data.result("bundle-ownership").frames
        ownership = _only(owned["events"], params.namespace)
        current = _only(owned["bundles"], params.namespace)
        outages = probe_outages(probes, slow_ms=params.slow_ms)
        events = unload_events(
            ownership, data.snapshots, probes, outages, owned.get("load_manager")
        )
        per_probe = _probe_summary(probes)
        frames = {
            "events": events,
            "outages": outages,
            "timeline": timeline(probes),
            "ladder": ladder(outages),
            "blind_spot": blind_spot(probes, events),
            "probes": per_probe,
            "ownership": current,
            "ownership_timeline": _only(owned["timeline"], params.namespace),
            "brokers": compute_brokers(current),
        }
        measured = events["outage_ms"].dropna()
        summary = {
            "bundles": len(current),
            "brokers": int(current["owner_broker"].nunique()),
            "events": len(events),
            "measured": len(measured),
            "probe_messages": len(probes),
            "lost": int((probes["received"] == 0).sum()) if len(probes) else 0,
            "duplicates": int((probes["received"] - 1).clip(lower=0).sum()) if len(probes) else 0,
            "worst_outage_ms": float(measured.max()) if len(measured) else None,
            "median_outage_ms": float(measured.median()) if len(measured) else None,
            "by_load_manager": int((events["by"] == BY_LOAD_MANAGER).sum()),
        }
        return Result(frames=frames, summary=summary)

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        summary = result.summary
        events = GaugeMetricFamily(
            "pulsar_lens_unload_events",
            "Bundle unloads (ownership changes and probe outages) in the analysed window.",
        )
        events.add_metric([], float(summary.get("events", 0)))
        lost = GaugeMetricFamily(
            "pulsar_lens_probe_messages_lost",
            "Probe messages published and never received in the analysed window.",
        )
        lost.add_metric([], float(summary.get("lost", 0)))
        worst = GaugeMetricFamily(
            "pulsar_lens_unload_worst_outage_seconds",
            "The longest probe outage of an unload in the analysed window.",
        )
        if summary.get("worst_outage_ms") is not None:
            worst.add_metric([], float(summary["worst_outage_ms"]) / 1000)
        return [events, lost, worst]

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        summary, frames = result.summary, result.frames
        views: list[View] = [
            Metric("Bundles", summary["bundles"]),
            Metric("Brokers owning bundles", summary["brokers"]),
            Metric("Unload events", summary["events"]),
            Metric("Made by the load manager", summary.get("by_load_manager", 0)),
            Metric(
                "Worst outage",
                "-"
                if summary["worst_outage_ms"] is None
                else f"{summary['worst_outage_ms']:,.0f} ms",
            ),
            Metric("Probe messages lost", summary["lost"]),
        ]
        if summary["lost"]:
            views.append(
                Note(
                    f"{summary['lost']} probe message(s) were published and never received: "
                    "an unload lost messages.",
                    level="error",
                )
            )
        if not frames["ownership"].empty:
            views.append(Chart(chart_ownership(frames["ownership"]), title="Broker x bundle"))
            views.append(
                Chart(chart_owners(frames["ownership_timeline"]), title="Ownership over time")
            )
        if frames["probes"].empty:
            views.append(
                Note(
                    "No probe ran in this window, so the events below are what the polls saw "
                    "(owners and reconnected clients), not what they cost. Probes measure the "
                    "cost: `pulsar-lens collect --probe NAMESPACE[/BUNDLE]` or "
                    "`pulsar-lens drill unload` (both need PULSAR_LENS_ALLOW_MUTATIONS=1).",
                )
            )
        else:
            views.append(
                Chart(
                    chart_timeline(frames["timeline"], frames["events"]),
                    title="Probe publish latency, with unloads",
                )
            )
        views.append(
            Table(
                frames["events"],
                title="Unload events",
                caption="Newest first. `by`: whether the load manager's own counters show it "
                "made the unload (empty when they could not be read).",
            )
        )
        if not frames["outages"].empty:
            views.append(
                Chart(chart_ladder(frames["outages"]), title="Outages against the backoff ladder")
            )
            views.append(Table(frames["ladder"], title="Outages per retry of the client"))
        if not frames["blind_spot"].empty:
            views.append(
                Table(
                    frames["blind_spot"],
                    title="What a 1-minute average shows",
                    caption="The minute's average publish latency, as a scrape reports it, "
                    "against the worst one the probe saw in that minute.",
                )
            )
        if not frames["probes"].empty:
            views.append(Table(frames["probes"], title="Probes"))
        views.append(Table(frames["brokers"], title="Brokers"))
        views.append(Table(frames["ownership"], title="Bundles"))
        return views

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        namespaces = sorted(set(data.history("probes")["namespace"].dropna()))
        return {"namespace": ["", *namespaces]}


def _only(frame: pd.DataFrame, namespace: str) -> pd.DataFrame:
    if not namespace or "namespace" not in frame:
        return frame
    return frame[frame["namespace"] == namespace].reset_index(drop=True)


def _probe_summary(probes: pd.DataFrame) -> pd.DataFrame:
    columns = [
        "probe",
        "namespace",
        "bundle",
        "topic",
        "sent",
        "received",
        "lost",
        "duplicates",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "first",
        "last",
    ]
    if probes.empty:
        return pd.DataFrame(columns=columns)
    grouped = probes.groupby(["probe", "namespace", "bundle", "topic"])
    out = grouped.agg(
        sent=("seq", "count"),
        received=("received", lambda s: int((s > 0).sum())),
        lost=("received", lambda s: int((s == 0).sum())),
        duplicates=("received", lambda s: int((s - 1).clip(lower=0).sum())),
        p50_ms=("publish_ms", "median"),
        p99_ms=(
            "publish_ms",
            lambda s: float(s.dropna().quantile(0.99)) if s.notna().any() else None,
        ),
        max_ms=("publish_ms", "max"),
        first=("sent_at", "min"),
        last=("sent_at", "max"),
    ).reset_index()
    return out.reindex(columns=columns)


def chart_timeline(points: pd.DataFrame, events: pd.DataFrame) -> alt.LayerChart:
    """p50, p99 and max publish latency per second, log scale, with each unload as a rule
    (measured ones at their cut, the others at the poll that saw them)."""
    import altair as alt  # on use: discovering plugins needs no altair

    long = points.melt(
        id_vars=["at", "namespace", "bundle"],
        value_vars=["p50_ms", "p99_ms", "max_ms"],
        var_name="stat",
        value_name="ms",
    )
    lines = (
        alt.Chart(long)
        .mark_line(point=False)
        .encode(
            x=alt.X("at:T", title="Sent at"),
            y=alt.Y("ms:Q", title="Publish latency (ms)", scale=alt.Scale(type="log")),
            color=alt.Color("stat:N", title=None),
            detail="bundle:N",
            tooltip=[
                "at:T",
                "namespace:N",
                "bundle:N",
                "stat:N",
                alt.Tooltip("ms:Q", format=",.1f"),
            ],
        )
    )
    cut, seen = events["cut_at"], events["at"]
    marks = events.assign(when=cut.where(cut.notna(), seen))
    rules = (
        alt.Chart(marks)
        .mark_rule(color="firebrick", strokeDash=[4, 3])
        .encode(
            x="when:T",
            tooltip=["kind:N", "bundle:N", "from_broker:N", "to_broker:N", "by:N", "outage_ms:Q"],
        )
    )
    return alt.LayerChart(layer=[lines, rules])


def chart_ladder(outages: pd.DataFrame) -> alt.LayerChart:
    """Each outage as a tick on a time axis, with the client's nominal retry times as rules."""
    import altair as alt  # on use: discovering plugins needs no altair

    ticks = (
        alt.Chart(outages)
        .mark_tick(thickness=3, size=30)
        .encode(
            x=alt.X("outage_ms:Q", title="Outage (ms)"),
            tooltip=["bundle:N", "cut_at:T", alt.Tooltip("outage_ms:Q", format=",.0f")],
        )
    )
    ladder_rules = (
        alt.Chart(pd.DataFrame({"retry_ms": list(LADDER_MS)}))
        .mark_rule(color="gray", strokeDash=[2, 2])
        .encode(x="retry_ms:Q", tooltip=[alt.Tooltip("retry_ms:Q", title="client retry at (ms)")])
    )
    return alt.LayerChart(layer=[ladder_rules, ticks])
