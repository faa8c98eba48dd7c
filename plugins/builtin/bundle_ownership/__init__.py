"""`bundle-ownership`: which broker owns each namespace bundle, now and over recent snapshots.

Events come from comparing consecutive snapshots of the `bundles` table, per bundle:

* **moved** - owned by broker A, then by broker B;
* **unloaded** - owned, then owned by nobody (the bundle is not loaded anywhere);
* **reacquired** - owned by nobody after an unload, then by the broker that owned it before
  (on a single broker an unload always ends this way);
* **acquired** - owned by nobody, then by a broker that was not the previous owner;
* **reloaded** - same owner in both snapshots, but every client of the bundle's topics
  reconnected in between: each consumer has a newer `connectedSince` than in the last
  snapshot that listed it, and each topic's publishers all connected after the previous poll
  (`oldest_publisher_since`): an unload and re-acquire that completed between two polls,
  inferred from the clients' reconnections;
* **split** - a bundle disappeared and bundles that exactly tile its range appeared;
* **disappeared** / **appeared** - a bundle left or joined the listing otherwise.

Each event says `by` whom, when the brokers' load-manager counters tell: "load manager" (its
shedder counted the unload or split), "not the load manager" (every counter was read and none
grew: an admin unload, a restart, ...), or nothing (not read). `load_manager` lists the
counts per poll window, with those no event accounts for (`unseen`). See `load_manager.py`.

Events the collector stored (the `events` table, kinds starting with `bundle`) are listed too
when no derived event covers the same bundle and snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from pulsar_lens.api import (
    STEPS_API_VERSION,
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
    Result,
    Table,
    View,
)
from pulsar_lens.plugins.builtin.bundle_ownership import steps
from pulsar_lens.plugins.builtin.bundle_ownership.events import (
    compute_events,
    with_stored_events,
)
from pulsar_lens.plugins.builtin.bundle_ownership.load_manager import (
    attribute,
    counted_polls,
    load_manager_views,
    load_manager_windows,
)
from pulsar_lens.plugins.builtin.bundle_ownership.renewals import CONSUMER_COLUMNS
from pulsar_lens.plugins.builtin.shared.ownership import (
    UNOWNED,
    chart_ownership,
    chart_timeline,
    compute_brokers,
)

BUNDLE_COLUMNS = [
    "namespace",
    "bundle",
    "owner_broker",
    "topic_count",
    "msg_rate_in",
    "msg_rate_out",
    "lower",
    "upper",
    "events",
]
TOPIC_COLUMNS = [
    "namespace",
    "bundle",
    "topic",
    "owner_broker",
    "msg_rate_in",
    "msg_rate_out",
    "subscription_count",
]


class BundleOwnership(AnalysisPlugin):
    name = "bundle-ownership"
    title = "Bundle ownership"
    description = (
        "Broker x bundle ownership now and over time, topics and rates per bundle, and the "
        "moves, unloads, re-acquisitions and splits seen between snapshots."
    )
    api_version = STEPS_API_VERSION
    version = "1.3"
    engine = "light"
    inputs = ("bundles", "topics", "brokers")
    history_of = {"topics": 1}  # the newest poll's: every poll's are read by the steps
    step_inputs = ("bundles", "topics", "consumers", "events")  # events: its stored bundle ones
    step_outputs = steps.STEP_OUTPUTS
    columns_of = {
        "events": steps.STORED_EVENT_COLUMNS,
        "consumers": CONSUMER_COLUMNS,  # not the hash ranges: the costliest column
        "topics": (  # 9 of the 20 columns of every topic
            "topic",
            "namespace",
            "bundle",
            "owner_broker",
            "msg_rate_in",
            "msg_rate_out",
            "producer_count",
            "subscription_count",
            "oldest_publisher_since",
        ),
    }
    history = 60
    outputs = ("bundles", "brokers", "topics", "timeline", "events", "load_manager")
    # drawn on the Bundles & unloads page of `unload-latency`, which builds on this result

    class Params(BaseModel):
        namespace: str = Field("", description="Only this namespace (tenant/ns); empty for all")

    def step(self, data: Inputs, params: Params) -> Result:
        frames = steps.step(
            data.history("bundles"),
            data.history("topics"),
            data.history("consumers"),
            data.latest("events"),
            data.snapshots,
        )
        return Result(frames=frames)

    def analyze(self, data: Inputs, params: Params) -> Result:
        reloaded = steps.reloaded_by_poll({name: data.steps(name) for name in self.step_outputs})
        return ownership(data, params, reloaded, data.steps("stored_events"))

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        gauge = GaugeMetricFamily(
            "pulsar_lens_bundle_ownership_events",
            "Bundle ownership events (moved, unloaded, reacquired, ...) seen over the stored "
            "snapshots the bundle-ownership analysis reads, by kind.",
            labels=["kind"],
        )
        events: Mapping[str, int] = result.summary.get("events", {})
        for kind, count in sorted(events.items()):
            gauge.add_metric([str(kind)], float(count))
        return [gauge]

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        summary, frames = result.summary, result.frames
        views: list[View] = [
            Metric("Bundles", summary["bundles"]),
            Metric("Brokers owning bundles", summary["brokers"]),
            Metric("Unowned bundles", summary["unowned"]),
            Metric("Events", sum(summary["events"].values())),
        ]
        if frames["bundles"].empty:
            return [*views, Note("No bundles in the stored snapshots.")]
        views.append(Chart(chart_ownership(frames["bundles"]), title="Broker x bundle"))
        views.append(Chart(chart_timeline(frames["timeline"]), title="Ownership over time"))
        views.append(Table(frames["events"], title="Events", caption="Newest first"))
        views.extend(load_manager_views(frames["load_manager"], summary))
        views.append(Table(frames["brokers"], title="Brokers"))
        views.append(Table(frames["bundles"], title="Bundles"))
        views.append(Table(frames["topics"], title="Topics by bundle"))
        return views

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        namespaces = sorted(set(data.latest("bundles")["namespace"].dropna()))
        return {"namespace": ["", *namespaces]}


def ownership(
    data: Inputs,
    params: BundleOwnership.Params,
    reloaded: Mapping[str, Mapping[tuple[str, str], int]],
    stored: pd.DataFrame,
) -> Result:
    """The analysis, given the bundles each poll found reloaded (`steps.reloaded_by_poll`)
    and the window's `events` rows, of which those of bundle kinds are listed too."""
    bundles = _only(data.history("bundles"), params.namespace)
    latest_id = data.latest_snapshot_id()
    events = compute_events(bundles, data.snapshots, reloaded)
    events = with_stored_events(events, _only(stored, params.namespace))
    broker_rows = data.history("brokers")
    events, counts = attribute(
        events,
        load_manager_windows(broker_rows, data.snapshots),
        counted_polls(broker_rows, data.snapshots),
        data.snapshots["collected_at"],
    )
    current = bundles[bundles["snapshot_id"] == latest_id]
    topics = _only(data.latest("topics"), params.namespace)
    frames = {
        "bundles": compute_bundles(current, events),
        "brokers": compute_brokers(current),
        "topics": topics.reindex(columns=TOPIC_COLUMNS)
        .sort_values(["namespace", "bundle", "topic"])
        .reset_index(drop=True),
        "timeline": compute_timeline(bundles),
        "events": events,
        "load_manager": counts.sort_values("at", ascending=False).reset_index(drop=True),
    }
    summary = {
        "bundles": len(current),
        "brokers": int(current["owner_broker"].nunique()),
        "unowned": int(current["owner_broker"].isna().sum()),
        "events": {k: int(v) for k, v in events["kind"].value_counts().sort_index().items()},
        "load_manager_unloads": int(counts["unloaded"].sum()),
        "load_manager_splits": int(counts["split"].sum()),
        "load_manager_unseen": int(counts["unseen"].sum()),
    }
    return Result(frames=frames, summary=summary)


def _only(frame: pd.DataFrame, namespace: str) -> pd.DataFrame:
    if not namespace or "namespace" not in frame:
        return frame
    return frame[frame["namespace"] == namespace]


def compute_bundles(current: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The newest ownership map with the number of events per bundle in the window."""
    counts = events.groupby(["namespace", "bundle"]).size().rename("events").reset_index()
    out = current.drop(columns=["events"], errors="ignore").merge(
        counts, on=["namespace", "bundle"], how="left"
    )
    out["events"] = out["events"].fillna(0).astype("int64")
    return (
        out.reindex(columns=BUNDLE_COLUMNS)
        .sort_values(["namespace", "lower"])
        .reset_index(drop=True)
    )


def compute_timeline(bundles: pd.DataFrame) -> pd.DataFrame:
    """One row per bundle per snapshot: who owned it then."""
    out = bundles[["collected_at", "namespace", "bundle", "owner_broker", "topic_count"]].copy()
    out["owner"] = out["owner_broker"].fillna(UNOWNED)
    return out.drop(columns="owner_broker").reset_index(drop=True)
