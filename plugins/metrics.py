"""Prometheus metric families from the newest snapshot, plugin results and the loop's own polls.

Pure functions: facts in, `prometheus_client` metric families out. `plugins.exporter` reads
the store, runs the analyses once per new snapshot and serves these families on /metrics.
Per-subscription series are bounded to the subscriptions with the largest backlog, so a
cluster with many subscriptions cannot blow up the scrape. Labels carry only topic,
subscription, group, status, kind and plugin names: never a URL or a credential.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

if TYPE_CHECKING:
    from plugins.api import Result

__all__ = [
    "DEFAULT_MAX_SUBSCRIPTIONS",
    "ClusterFacts",
    "PollStats",
    "SubscriptionKey",
    "compute_analysis_families",
    "compute_cluster_families",
    "compute_collector_families",
    "compute_plugin_error_families",
    "exposition",
    "top_subscriptions",
]

DEFAULT_MAX_SUBSCRIPTIONS = 500
SUB_LABELS = ("topic", "subscription")
SubscriptionKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class PollStats:
    """What the polling loop of this process did so far (all None before its first poll)."""

    polls: int = 0
    failed_polls: int = 0
    last_poll_at: dt.datetime | None = None
    last_duration_s: float | None = None
    last_requests: int | None = None
    last_errors: int | None = None


@dataclass(frozen=True)
class ClusterFacts:
    """The newest stored snapshot: its id, time, row counts and subscriptions table."""

    snapshot_id: str
    collected_at: dt.datetime
    counts: Mapping[str, int]  # brokers, topics, subscriptions, consumers
    subscriptions: pd.DataFrame = field(default_factory=pd.DataFrame)


def _gauge(name: str, documentation: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels) if labels else None)


def _number(value: Any) -> float | None:
    """A finite float, or None for missing cells (None, NaN, pd.NA)."""
    if value is None or value is pd.NA:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def compute_collector_families(
    stats: PollStats, *, newest_at: dt.datetime | None, now: dt.datetime
) -> list[Metric]:
    """The loop's own health: its last poll, its totals and how old the newest snapshot is."""
    polls = CounterMetricFamily(
        "pulsar_lens_polls", "Polls made by this collector since it started."
    )
    polls.add_metric([], stats.polls)
    failed = CounterMetricFamily(
        "pulsar_lens_failed_polls",
        "Polls of this collector in which every admin endpoint failed (nothing was stored).",
    )
    failed.add_metric([], stats.failed_polls)
    families: list[Metric] = [polls, failed]
    last = {
        "pulsar_lens_last_poll_timestamp_seconds": (
            "Unix time of the last poll, stored or not.",
            stats.last_poll_at.timestamp() if stats.last_poll_at else None,
        ),
        "pulsar_lens_poll_duration_seconds": (
            "Seconds the last poll took.",
            stats.last_duration_s,
        ),
        "pulsar_lens_poll_requests": ("HTTP requests the last poll made.", stats.last_requests),
        "pulsar_lens_poll_endpoint_errors": (
            "Admin endpoints that failed in the last poll (a partial snapshot if above 0).",
            stats.last_errors,
        ),
        "pulsar_lens_snapshot_age_seconds": (
            "Seconds between the newest stored snapshot and this scrape.",
            (now - newest_at).total_seconds() if newest_at else None,
        ),
    }
    for name, (doc, value) in last.items():
        if value is not None:
            gauge = _gauge(name, doc)
            gauge.add_metric([], float(value))
            families.append(gauge)
    return families


def top_subscriptions(subscriptions: pd.DataFrame, limit: int) -> list[SubscriptionKey]:
    """The `limit` (topic, subscription) pairs with the largest backlog; ties by name."""
    if subscriptions.empty or limit <= 0:
        return []
    frame = subscriptions[["topic", "subscription", "msg_backlog"]].drop_duplicates(
        ["topic", "subscription"]
    )
    frame = frame.assign(_b=pd.to_numeric(frame["msg_backlog"]).fillna(0))
    frame = frame.sort_values(["_b", "topic", "subscription"], ascending=[False, True, True])
    return [(str(t), str(s)) for t, s in zip(frame["topic"], frame["subscription"], strict=True)][
        :limit
    ]


def compute_cluster_families(
    facts: ClusterFacts, *, keep: Sequence[SubscriptionKey]
) -> list[Metric]:
    """Counts of the newest snapshot and the per-subscription broker stats of `keep`."""
    families: list[Metric] = []
    for table in ("brokers", "topics", "subscriptions", "consumers"):
        gauge = _gauge(f"pulsar_lens_{table}", f"{table.capitalize()} in the newest snapshot.")
        gauge.add_metric([], float(facts.counts.get(table, 0)))
        families.append(gauge)
    bound = f"only the {len(keep)} or fewer subscriptions with the largest backlog"
    columns = {
        "pulsar_lens_subscription_backlog_messages": (
            "msg_backlog",
            f"Messages in the subscription's backlog (msgBacklog); {bound}.",
        ),
        "pulsar_lens_subscription_msg_in_replay": (
            "msg_in_replay",
            f"Messages waiting in the replay set (msgInReplay); {bound}.",
        ),
        "pulsar_lens_subscription_draining_hashes": (
            "draining_hashes_count",
            f"Key_Shared hashes draining (drainingHashesCount, Pulsar 4.0); {bound}.",
        ),
    }
    rows = _rows_by_key(facts.subscriptions)
    for name, (column, doc) in columns.items():
        gauge = _gauge(name, doc, SUB_LABELS)
        for key in keep:
            value = _number(rows[key].get(column)) if key in rows else None
            if value is not None:
                gauge.add_metric(list(key), value)
        families.append(gauge)
    return families


def _rows_by_key(frame: pd.DataFrame) -> dict[SubscriptionKey, Mapping[str, Any]]:
    if frame.empty:
        return {}
    return {(str(r["topic"]), str(r["subscription"])): r for r in frame.to_dict("records")}


def compute_analysis_families(
    results: Mapping[str, Result], *, keep: Sequence[SubscriptionKey], max_groups: int
) -> list[Metric]:
    """Facts the built-in analyses found, for the subscriptions of `keep` (see each HELP)."""
    kept = set(keep)
    families: list[Metric] = []
    if "key-shared-map" in results:
        families.extend(_key_shared(results["key-shared-map"], kept))
    if "stuck-hashes" in results:
        families.append(_stuck(results["stuck-hashes"], keep, results.get("key-shared-map")))
    if "subscription-status" in results:
        families.extend(_status(results["subscription-status"], kept))
    if "failover-assignment" in results:
        families.extend(_failover(results["failover-assignment"], max_groups))
    if "bundle-ownership" in results:
        families.append(_ownership(results["bundle-ownership"]))
    return families


def _keyed(frame: pd.DataFrame, kept: set[SubscriptionKey]) -> Iterator[dict[str, Any]]:
    for row in frame.to_dict("records"):
        if (str(row["topic"]), str(row["subscription"])) in kept:
            yield row


def _key_shared(result: Result, kept: set[SubscriptionKey]) -> list[Metric]:
    imbalance = _gauge(
        "pulsar_lens_key_shared_imbalance",
        "Largest consumer share of the Key_Shared hash space over the fair share 1/n "
        "(key-shared-map); bounded like the subscription backlog.",
        SUB_LABELS,
    )
    drift = _gauge(
        "pulsar_lens_key_shared_drift",
        "1 when the broker's Key_Shared hash ranges differ from our model of them "
        "(key-shared-map), else 0; bounded like the subscription backlog.",
        SUB_LABELS,
    )
    for row in _keyed(result.frames["subscriptions"], kept):
        labels = [str(row["topic"]), str(row["subscription"])]
        imbalance.add_metric(labels, _number(row["imbalance"]) or 0.0)
        drift.add_metric(labels, 1.0 if bool(row["drift"]) else 0.0)
    return [imbalance, drift]


def _stuck(result: Result, keep: Sequence[SubscriptionKey], key_shared: Result | None) -> Metric:
    gauge = _gauge(
        "pulsar_lens_stuck_hashes",
        "Key_Shared hashes draining without acknowledgement progress while messages wait "
        "(stuck-hashes); bounded like the subscription backlog.",
        SUB_LABELS,
    )
    hashes = result.frames["hashes"]
    counts: dict[SubscriptionKey, int] = {}
    for row in hashes.to_dict("records"):
        if row["state"] == "stuck":
            key = (str(row["topic"]), str(row["subscription"]))
            counts[key] = counts.get(key, 0) + 1
    shown = set(counts)
    if key_shared is not None:
        subs = key_shared.frames["subscriptions"]
        shown |= {
            (str(t), str(s)) for t, s in zip(subs["topic"], subs["subscription"], strict=True)
        }
    for key in keep:
        if key in shown:
            gauge.add_metric(list(key), float(counts.get(key, 0)))
    return gauge


def _status(result: Result, kept: set[SubscriptionKey]) -> list[Metric]:
    status = _gauge(
        "pulsar_lens_subscription_status",
        "1 for the subscription's status (OK, WARN, STALL, STOP, ERROR; subscription-status), "
        "one series per subscription; bounded like the subscription backlog.",
        (*SUB_LABELS, "status"),
    )
    lag = _gauge(
        "pulsar_lens_subscription_time_lag_seconds",
        "Age of the oldest unacknowledged message when the snapshot was taken "
        "(subscription-status); bounded like the subscription backlog.",
        SUB_LABELS,
    )
    for row in _keyed(result.frames["status"], kept):
        labels = [str(row["topic"]), str(row["subscription"])]
        status.add_metric([*labels, str(row["status"])], 1.0)
        seconds = _number(row["time_lag_s"])
        if seconds is not None:
            lag.add_metric(labels, seconds)
    return [status, lag]


def _failover(result: Result, max_groups: int) -> list[Metric]:
    labels = ("group", "subscription")
    bound = f"at most {max_groups} groups, most imbalanced first"
    imbalance = _gauge(
        "pulsar_lens_failover_imbalance",
        "Largest active-partition count of a consumer over the fair count in a Failover "
        f"group (failover-assignment); {bound}.",
        labels,
    )
    flapping = _gauge(
        "pulsar_lens_failover_flapping_partitions",
        "Partitions of a Failover group whose active consumer changed repeatedly in recent "
        f"snapshots (failover-assignment); {bound}.",
        labels,
    )
    groups = result.frames["groups"]
    if len(groups):
        groups = groups.sort_values(["imbalance", "label"], ascending=[False, True])
        for row in groups.head(max_groups).to_dict("records"):
            key = [str(row["label"]), str(row["subscription"])]
            imbalance.add_metric(key, _number(row["imbalance"]) or 0.0)
            flapping.add_metric(key, float(row["flapping"]))
    return [imbalance, flapping]


def _ownership(result: Result) -> Metric:
    gauge = _gauge(
        "pulsar_lens_bundle_ownership_events",
        "Bundle ownership events (moved, unloaded, reacquired, ...) seen over the stored "
        "snapshots the bundle-ownership analysis reads, by kind.",
        ("kind",),
    )
    events: Mapping[str, int] = result.summary.get("events", {})
    for kind, count in sorted(events.items()):
        gauge.add_metric([str(kind)], float(count))
    return gauge


def compute_plugin_error_families(plugins: Iterable[str], failed: Iterable[str]) -> list[Metric]:
    """1 for each analysis that failed on the newest snapshot, 0 for the others."""
    gauge = _gauge(
        "pulsar_lens_plugin_errors",
        "1 when the analysis failed on the newest snapshot (its metrics are missing), else 0.",
        ("plugin",),
    )
    bad = set(failed)
    for name in sorted(set(plugins) | bad):
        gauge.add_metric([name], 1.0 if name in bad else 0.0)
    return [gauge]


class _Fixed(Collector):
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return list(self._families)


def exposition(families: Sequence[Metric]) -> str:
    """The Prometheus text exposition of these families (a fresh registry each call)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    return generate_latest(registry).decode("utf-8")
