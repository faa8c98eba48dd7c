"""`bundle-ownership`: which broker owns each namespace bundle, now and over recent snapshots.

Events come from comparing consecutive snapshots of the `bundles` table, per bundle:

* **moved** - owned by broker A, then by broker B;
* **unloaded** - owned, then owned by nobody (the bundle is not loaded anywhere);
* **reacquired** - owned by nobody after an unload, then by the broker that owned it before
  (on a single broker an unload always ends this way);
* **acquired** - owned by nobody, then by a broker that was not the previous owner;
* **reloaded** - same owner in both snapshots, but every consumer of the bundle's topics has
  a newer `connectedSince` than in the last snapshot that listed it: an unload and re-acquire
  that completed between two polls, inferred from the clients' reconnections;
* **split** - a bundle disappeared and bundles that exactly tile its range appeared;
* **disappeared** / **appeared** - a bundle left or joined the listing otherwise.

Events the collector stored (the `events` table, kinds starting with `bundle`) are listed too
when no derived event covers the same bundle and snapshot.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

from plugins.api import (
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

UNOWNED = "(unowned)"
CONSUMER_KEY = ["topic", "subscription", "consumer_name"]
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
EVENT_COLUMNS = ["at", "kind", "namespace", "bundle", "before", "after", "detail", "source"]
BROKER_COLUMNS = ["owner_broker", "bundles", "topics", "msg_rate_in", "msg_rate_out"]


class BundleOwnership(AnalysisPlugin):
    name = "bundle-ownership"
    title = "Bundle ownership"
    description = (
        "Broker x bundle ownership now and over time, topics and rates per bundle, and the "
        "moves, unloads, re-acquisitions and splits seen between snapshots."
    )
    version = "1.0"
    engine = "light"
    inputs = ("bundles", "topics", "consumers", "events")
    history = 60
    outputs = ("bundles", "brokers", "topics", "timeline", "events")
    page = Page(
        title="Bundles & unloads",
        icon=":material/hub:",
        url_path="bundles",
        order=40,
        caption="Which broker owned each bundle, poll by poll, with every move, unload and "
        "split the polls saw.",
        controls=("namespace",),
    )

    class Params(BaseModel):
        namespace: str = Field("", description="Only this namespace (tenant/ns); empty for all")

    def analyze(self, data: Inputs, params: Params) -> Result:
        bundles = _only(data.history("bundles"), params.namespace)
        latest_id = data.latest_snapshot_id()
        events = compute_events(
            bundles,
            data.history("topics"),
            data.history("consumers"),
            data.snapshots,
        )
        events = with_stored_events(events, _only(data.history("events"), params.namespace))
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
        }
        summary = {
            "bundles": len(current),
            "brokers": int(current["owner_broker"].nunique()),
            "unowned": int(current["owner_broker"].isna().sum()),
            "events": {k: int(v) for k, v in events["kind"].value_counts().sort_index().items()},
        }
        return Result(frames=frames, summary=summary)

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

    def render(self, result: Result) -> list[View]:
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
        views.append(Table(frames["brokers"], title="Brokers"))
        views.append(Table(frames["bundles"], title="Bundles"))
        views.append(Table(frames["topics"], title="Topics by bundle"))
        return views

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        namespaces = sorted(set(data.latest("bundles")["namespace"].dropna()))
        return {"namespace": ["", *namespaces]}


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


def compute_brokers(current: pd.DataFrame) -> pd.DataFrame:
    """Bundles, topics and rates per owning broker (unowned bundles under "(unowned)")."""
    owners = current.assign(owner_broker=current["owner_broker"].fillna(UNOWNED))
    out = owners.groupby("owner_broker", as_index=False).agg(
        bundles=("bundle", "count"),
        topics=("topic_count", "sum"),
        msg_rate_in=("msg_rate_in", "sum"),
        msg_rate_out=("msg_rate_out", "sum"),
    )
    return out.reindex(columns=BROKER_COLUMNS)


def compute_timeline(bundles: pd.DataFrame) -> pd.DataFrame:
    """One row per bundle per snapshot: who owned it then."""
    out = bundles[["collected_at", "namespace", "bundle", "owner_broker", "topic_count"]].copy()
    out["owner"] = out["owner_broker"].fillna(UNOWNED)
    return out.drop(columns="owner_broker").reset_index(drop=True)


def _owner(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _snapshots_of(frame: pd.DataFrame, ids: Sequence[str]) -> dict[str, pd.DataFrame]:
    return {sid: part for sid, part in frame.groupby("snapshot_id", sort=False) if sid in ids}


def compute_events(
    bundles: pd.DataFrame,
    topics: pd.DataFrame,
    consumers: pd.DataFrame,
    snapshots: pd.DataFrame,
) -> pd.DataFrame:
    """Ownership events between consecutive snapshots, newest first."""
    ids = [str(s) for s in snapshots["snapshot_id"]] if len(snapshots) else []
    by_snapshot = _snapshots_of(bundles, ids)
    topics_by, consumers_by = _snapshots_of(topics, ids), _snapshots_of(consumers, ids)
    last_owner: dict[tuple[str, str], str] = {}
    seen = pd.DataFrame(columns=[*CONSUMER_KEY, "connected_since"])
    rows: list[dict[str, Any]] = []
    previous: pd.DataFrame | None = None
    for sid, at in zip(ids, snapshots["collected_at"], strict=True):
        current = by_snapshot.get(sid)
        if current is None:
            continue
        now = consumers_by.get(sid)
        if previous is not None:
            reconnected = reconnected_bundles(topics_by.get(sid), seen, now)
            rows.extend(_owner_events(previous, current, at, last_owner, reconnected))
            rows.extend(_listing_events(previous, current, at))
        for row in current.itertuples(index=False):
            owner = _owner(row.owner_broker)
            if owner is not None:
                last_owner[(row.namespace, row.bundle)] = owner
        seen = _remember(seen, now)
        previous = current
    frame = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    return frame.sort_values("at", ascending=False, kind="stable").reset_index(drop=True)


def _owner_events(
    previous: pd.DataFrame,
    current: pd.DataFrame,
    at: Any,
    last_owner: Mapping[tuple[str, str], str],
    reconnected: Mapping[tuple[str, str], int],
) -> Iterator[dict[str, Any]]:
    before = {(r.namespace, r.bundle): _owner(r.owner_broker) for r in previous.itertuples()}
    for row in current.itertuples(index=False):
        key = (row.namespace, row.bundle)
        if key not in before:
            continue
        old, new = before[key], _owner(row.owner_broker)
        kind, detail = _transition(old, new, last_owner.get(key), reconnected.get(key, 0))
        if kind:
            yield _event(at, kind, key, old, new, detail)


def _transition(
    old: str | None, new: str | None, last: str | None, reconnected: int
) -> tuple[str | None, str]:
    if old and new and old != new:
        return "moved", f"from {old} to {new}"
    if old and not new:
        return "unloaded", f"{old} no longer owns it"
    if not old and new:
        if new == last:
            return "reacquired", f"{new} owns it again after an unload"
        return "acquired", f"{new} took it" + (f" (last owner {last})" if last else "")
    if old and new == old and reconnected:
        return "reloaded", (
            f"all {reconnected} consumer(s) of its topics reconnected while {old} kept it: "
            "unloaded and re-acquired between polls"
        )
    return None, ""


def _event(
    at: Any, kind: str, key: tuple[str, str], before: Any, after: Any, detail: str
) -> dict[str, Any]:
    return {
        "at": at,
        "kind": kind,
        "namespace": key[0],
        "bundle": key[1],
        "before": before,
        "after": after,
        "detail": detail,
        "source": "snapshots",
    }


def _tiles(parent: Any, children: Sequence[Any]) -> bool:
    """Whether the children ranges exactly tile the parent's range."""
    ordered = sorted(children, key=lambda c: c.lower)
    if len(ordered) < 2 or ordered[0].lower != parent.lower or ordered[-1].upper != parent.upper:
        return False
    return all(a.upper == b.lower for a, b in itertools.pairwise(ordered))


def _listing_events(
    previous: pd.DataFrame, current: pd.DataFrame, at: Any
) -> Iterator[dict[str, Any]]:
    before = set(zip(previous["namespace"], previous["bundle"], strict=True))
    after = set(zip(current["namespace"], current["bundle"], strict=True))
    # a namespace seen for the first time (or no more) is not a bundle change
    common = set(previous["namespace"]) & set(current["namespace"])
    changed = sorted({ns for ns, _ in before ^ after} & common)
    for namespace in changed:
        now = current[current["namespace"] == namespace]
        then = previous[previous["namespace"] == namespace]
        gone = [r for r in then.itertuples() if r.bundle not in set(now["bundle"])]
        new = [r for r in now.itertuples() if r.bundle not in set(then["bundle"])]
        explained: set[str] = set()
        for parent in gone:
            children = [c for c in new if parent.lower <= c.lower and c.upper <= parent.upper]
            key = (str(namespace), parent.bundle)
            if _tiles(parent, children):
                names = ", ".join(c.bundle for c in sorted(children, key=lambda c: c.lower))
                explained |= {c.bundle for c in children}
                yield _event(at, "split", key, parent.bundle, names, f"split into {names}")
            else:
                yield _event(at, "disappeared", key, _owner(parent.owner_broker), None, "")
        for child in new:
            if child.bundle not in explained:
                key = (str(namespace), child.bundle)
                yield _event(at, "appeared", key, None, _owner(child.owner_broker), "")


def _remember(seen: pd.DataFrame, consumers: pd.DataFrame | None) -> pd.DataFrame:
    """The newest connectedSince seen so far for every consumer."""
    if consumers is None or consumers.empty:
        return seen
    latest = consumers[[*CONSUMER_KEY, "connected_since"]].dropna(subset=["connected_since"])
    if seen.empty:
        return latest.drop_duplicates(CONSUMER_KEY, keep="last")
    both = pd.concat([seen, latest], ignore_index=True)
    return both.drop_duplicates(CONSUMER_KEY, keep="last")


def reconnected_bundles(
    topics: pd.DataFrame | None, seen: pd.DataFrame, after: pd.DataFrame | None
) -> dict[tuple[str, str], int]:
    """Bundles whose every consumer seen before has a newer connectedSince now.

    A consumer is compared with the last snapshot that listed it, so a snapshot taken while
    the clients were reconnecting (and listed none) does not hide the reload.
    """
    if topics is None or after is None or seen.empty or after.empty:
        return {}
    both = seen.merge(
        after[[*CONSUMER_KEY, "connected_since"]], on=CONSUMER_KEY, suffixes=("_before", "_after")
    )
    both = both.dropna(subset=["connected_since_before", "connected_since_after"])
    both = both.merge(topics[["topic", "namespace", "bundle"]], on="topic", how="inner")
    if both.empty:
        return {}
    both["renewed"] = both["connected_since_after"] > both["connected_since_before"]
    per_bundle = both.groupby(["namespace", "bundle"])["renewed"].agg(["all", "count"])
    renewed = per_bundle[per_bundle["all"]]
    return {(str(ns), str(b)): int(n) for (ns, b), n in renewed["count"].items()}


def with_stored_events(derived: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
    """Add the collector's bundle events that no derived event already covers."""
    if stored.empty or "kind" not in stored:
        return derived
    mine = stored[stored["kind"].astype(str).str.startswith("bundle")]
    if mine.empty:
        return derived
    bundle = mine["subject"].astype(str).str.rsplit("/", n=1).str[-1]
    extra = pd.DataFrame(
        {
            "at": mine["collected_at"],
            "kind": mine["kind"],
            "namespace": mine["namespace"],
            "bundle": bundle,
            "before": mine["before"],
            "after": mine["after"],
            "detail": "",
            "source": "collector",
        }
    )
    seen = set(zip(derived["at"], derived["namespace"], derived["bundle"], strict=True))
    keep = [
        (a, n, b) not in seen
        for a, n, b in zip(extra["at"], extra["namespace"], extra["bundle"], strict=True)
    ]
    merged = pd.concat([derived, extra[keep]], ignore_index=True) if any(keep) else derived
    return merged.sort_values("at", ascending=False, kind="stable").reset_index(drop=True)


def chart_ownership(bundles: pd.DataFrame) -> alt.Chart:
    """Broker x bundle: one cell per bundle under its owner, coloured by topic count."""
    cells = bundles.assign(
        owner=bundles["owner_broker"].fillna(UNOWNED),
        label=bundles["namespace"] + "/" + bundles["bundle"],
    )
    chart: alt.Chart = (
        alt.Chart(cells)
        .mark_rect()
        .encode(
            x=alt.X("owner:N", title="Broker"),
            y=alt.Y("label:N", title="Bundle", sort=None),
            color=alt.Color("topic_count:Q", title="Topics"),
            tooltip=["label:N", "owner:N", "topic_count:Q", "msg_rate_in:Q", "msg_rate_out:Q"],
        )
    )
    return chart


def chart_timeline(timeline: pd.DataFrame) -> alt.Chart:
    """Owner of each bundle at each snapshot."""
    lanes = timeline.assign(label=timeline["namespace"] + "/" + timeline["bundle"])
    chart: alt.Chart = (
        alt.Chart(lanes)
        .mark_tick(thickness=6, size=14)
        .encode(
            x=alt.X("collected_at:T", title="Collected at"),
            y=alt.Y("label:N", title="Bundle"),
            color=alt.Color("owner:N", title="Owner"),
            tooltip=["label:N", "owner:N", "collected_at:T", "topic_count:Q"],
        )
    )
    return chart
