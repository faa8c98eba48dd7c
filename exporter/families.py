"""Prometheus metric families from the newest snapshot, plugin results and the loop's own polls.

Pure functions: facts in, `prometheus_client` metric families out: the collector's own
health (its polls, and the results passes that analyse them), the newest snapshot's counts
and per-subscription broker stats, and which plugins failed. What the analyses found comes
from each plugin's own `metrics()` hook; `pulsar_lens.exporter.collector` gathers both and
serves them on /metrics.
Per-subscription series are bounded to the subscriptions with the largest backlog, so a
cluster with many subscriptions cannot blow up the scrape. Labels carry only topic,
subscription, group, status, kind, plugin and cluster names: never a URL or a credential.
When one collector polls several clusters, every family of a cluster (its poll health, its
newest snapshot's counts and subscriptions, what the plugins found in it, which of them failed
on it) carries `cluster`, one series set per cluster; with one cluster none does, and the
scrape config names the cluster (deploy/prometheus/prometheus.yml), as a label the exporter
also set would be renamed `exported_cluster`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from pulsar_lens.api_types import kept_records
from pulsar_lens.collectors.lag import PASS_MARGIN
from pulsar_lens.collectors.overrun import needed_interval_for
from pulsar_lens.core.parts import DEFAULT_MAX_SUBSCRIPTIONS
from pulsar_lens.core.passes import PassProgress

__all__ = [
    "CLUSTER_LABEL",
    "DEFAULT_MAX_SUBSCRIPTIONS",
    "ClusterFacts",
    "PollStats",
    "SubscriptionKey",
    "compute_analysis_pass_families",
    "compute_cluster_families",
    "compute_cluster_health_families",
    "compute_collector_families",
    "compute_plugin_error_families",
    "exposition",
    "top_subscriptions",
    "with_cluster_label",
]

SUB_LABELS = ("topic", "subscription")
CLUSTER_LABEL = "cluster"
SubscriptionKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class PollStats:
    """What the polling loop of this process did so far (all None before its first poll)."""

    polls: int = 0
    failed_polls: int = 0
    failed_writes: int = 0
    last_poll_at: dt.datetime | None = None
    last_duration_s: float | None = None
    last_requests: int | None = None
    last_errors: int | None = None
    last_write_s: float | None = None
    interval_s: float | None = None
    overran: bool | None = None  # the last poll and its write took longer than the interval
    overrun_polls: int = 0


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
    return _health_families([([], stats, newest_at)], (), now=now)


DASHBOARD_INFO = "pulsar_lens_dashboard_info"


def compute_dashboard_families(url: str) -> list[Metric]:
    """`pulsar_lens_dashboard_info{url} 1`: where users open the dashboard, for the alerts'
    and Grafana's links to its pages (nothing when it is not configured)."""
    if not url:
        return []
    info = _gauge(
        DASHBOARD_INFO,
        "1, labelled with the dashboard's external URL (PULSAR_LENS_EXTERNAL_URL): the alerts' "
        "and Grafana's links to its pages start with it.",
        ["url"],
    )
    info.add_metric([url], 1.0)
    return [info]


def compute_cluster_health_families(
    stats: Mapping[str, PollStats],
    *,
    newest_at: Mapping[str, dt.datetime | None],
    now: dt.datetime,
) -> list[Metric]:
    """The health families of a collector polling several clusters: the same families, one
    series per cluster, labelled `cluster`."""
    rows = [([name], stats[name], newest_at.get(name)) for name in sorted(stats)]
    return _health_families(rows, (CLUSTER_LABEL,), now=now)


HealthRow = tuple[list[str], PollStats, dt.datetime | None]


def _health_families(
    rows: Sequence[HealthRow], labels: Sequence[str], *, now: dt.datetime
) -> list[Metric]:
    counters = {
        "pulsar_lens_polls": ("Polls made by this collector since it started.", "polls"),
        "pulsar_lens_failed_polls": (
            "Polls of this collector in which every admin endpoint failed (nothing was stored).",
            "failed_polls",
        ),
        "pulsar_lens_failed_writes": (
            "Polls whose snapshot the store could not take (disk full, read-only); the newest "
            "few wait in memory and are written when the store takes writes again.",
            "failed_writes",
        ),
        "pulsar_lens_overrun_polls": (
            f"Polls that with their write took longer than the poll interval. {OVERRUN_ADVICE}",
            "overrun_polls",
        ),
    }
    families: list[Metric] = []
    for name, (doc, attr) in counters.items():
        counter = CounterMetricFamily(name, doc, labels=list(labels) if labels else None)
        for values, stats, _ in rows:
            counter.add_metric(values, getattr(stats, attr))
        families.append(counter)
    gauges = {name: _gauge(name, doc, labels) for name, doc in LAST_POLL_GAUGES.items()}
    for values, stats, newest in rows:
        for name, value in _last_poll_values(stats, newest, now).items():
            if value is not None:
                gauges[name].add_metric(values, value)
    families.extend(g for g in gauges.values() if g.samples)  # none yet: left out
    return families


OVERRUN_ADVICE = (
    "Past the interval polls run back to back and the analyses fall behind: raise "
    "PULSAR_LENS_POLL_INTERVAL to pulsar_lens_poll_needed_interval_seconds, and "
    "PULSAR_LENS_POLL_DEADLINE with it when the poll reached it, or lower "
    "PULSAR_LENS_DETAIL_BUDGET (docs/configuration.md, Sizing for large clusters)."
)
LAST_POLL_GAUGES: Mapping[str, str] = {
    "pulsar_lens_last_poll_timestamp_seconds": "Unix time of the last poll, stored or not.",
    "pulsar_lens_poll_duration_seconds": "Seconds the last poll took (its calls and assembly).",
    "pulsar_lens_poll_write_seconds": "Seconds the last poll's events and storing it took.",
    "pulsar_lens_poll_interval_seconds": "Seconds between polls, as set.",
    "pulsar_lens_poll_overrun": (
        f"1 when the last poll with its write took longer than the interval, else 0. "
        f"{OVERRUN_ADVICE}"
    ),
    "pulsar_lens_poll_needed_interval_seconds": (
        "The interval the last poll needs with its analyses: 2.5 times its poll and write "
        "(the measured share of the analyses; docs/performance.md)."
    ),
    "pulsar_lens_poll_requests": "HTTP requests the last poll made.",
    "pulsar_lens_poll_endpoint_errors": (
        "Admin endpoints that failed in the last poll (a partial snapshot if above 0)."
    ),
    "pulsar_lens_snapshot_age_seconds": (
        "Seconds between the newest stored snapshot and this scrape."
    ),
}


def _last_poll_values(
    stats: PollStats, newest: dt.datetime | None, now: dt.datetime
) -> dict[str, float | None]:
    values = {
        "pulsar_lens_last_poll_timestamp_seconds": (
            stats.last_poll_at.timestamp() if stats.last_poll_at else None
        ),
        "pulsar_lens_poll_duration_seconds": stats.last_duration_s,
        "pulsar_lens_poll_write_seconds": stats.last_write_s,
        "pulsar_lens_poll_interval_seconds": stats.interval_s,
        "pulsar_lens_poll_overrun": None if stats.overran is None else int(stats.overran),
        "pulsar_lens_poll_needed_interval_seconds": (
            None
            if stats.last_duration_s is None
            else needed_interval_for(stats.last_duration_s + (stats.last_write_s or 0.0))
        ),
        "pulsar_lens_poll_requests": stats.last_requests,
        "pulsar_lens_poll_endpoint_errors": stats.last_errors,
        "pulsar_lens_snapshot_age_seconds": (now - newest).total_seconds() if newest else None,
    }
    return {name: None if v is None else float(v) for name, v in values.items()}


LAG_ADVICE = (
    "A pass longer than the poll interval leaves polls unanalysed (only the newest waiting "
    f"one is analysed next): raise PULSAR_LENS_POLL_INTERVAL to {PASS_MARGIN:g} times "
    "pulsar_lens_analysis_pass_seconds or more, or run fewer light plugins "
    "(docs/configuration.md, Sizing for large clusters)."
)


def compute_analysis_pass_families(progress: PassProgress | None) -> list[Metric]:
    """The collect process's results passes, for all its clusters (no `cluster` label): how
    many ended, how many polls they left unanalysed, and the last one's end and seconds.
    Nothing for None (a process that runs none); the gauges once a pass has ended."""
    if progress is None:
        return []
    passes = CounterMetricFamily(
        "pulsar_lens_analysis_passes",
        "Results passes (the light analyses of the newest poll) ended since the collect "
        "process started.",
    )
    passes.add_metric([], progress.passes)
    unanalysed = CounterMetricFamily(
        "pulsar_lens_unanalysed_snapshots",
        f"Stored polls the light analyses never analysed since the collect process started: a "
        f"newer one replaced them while a pass ran. {LAG_ADVICE}",
    )
    unanalysed.add_metric([], progress.skipped_total)
    families: list[Metric] = [passes, unanalysed]
    if progress.finished_at is not None:
        seconds = _gauge(
            "pulsar_lens_analysis_pass_seconds",
            f"Seconds the last results pass took (wall). {LAG_ADVICE}",
        )
        seconds.add_metric([], progress.seconds)
        ended = _gauge(
            "pulsar_lens_last_analysis_pass_timestamp_seconds",
            "Unix time the last results pass ended.",
        )
        ended.add_metric([], progress.finished_at.timestamp())
        families += [seconds, ended]
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
    frame = frame.head(limit)  # only these become Python text (not a million topics' names)
    return [(str(t), str(s)) for t, s in zip(frame["topic"], frame["subscription"], strict=True)]


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
    rows = _rows_by_key(facts.subscriptions, keep)
    for name, (column, doc) in columns.items():
        gauge = _gauge(name, doc, SUB_LABELS)
        for key in keep:
            value = _number(rows[key].get(column)) if key in rows else None
            if value is not None:
                gauge.add_metric(list(key), value)
        families.append(gauge)
    return families


def _rows_by_key(
    frame: pd.DataFrame, keep: Sequence[SubscriptionKey]
) -> dict[SubscriptionKey, Mapping[str, Any]]:
    """The row of each kept (topic, subscription), the last one when listed twice."""
    return {(str(r["topic"]), str(r["subscription"])): r for r in kept_records(frame, set(keep))}


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


def with_cluster_label(by_cluster: Mapping[str, Sequence[Metric]]) -> list[Metric]:
    """The families of several clusters as one set: each family once, its samples those of
    every cluster, each labelled `cluster` with its cluster's name (a family's help text is
    that of the first cluster, by name, that has it). Raises ValueError for a family that
    already has a `cluster` label: its series of two clusters would be one."""
    merged: dict[str, Metric] = {}
    for name in sorted(by_cluster):
        for family in by_cluster[name]:
            into = merged.get(family.name)
            if into is None:
                into = Metric(family.name, family.documentation, family.type, family.unit)
                merged[family.name] = into
            for sample in family.samples:
                if CLUSTER_LABEL in sample.labels:
                    raise ValueError(f"metric {family.name!r} has a {CLUSTER_LABEL!r} label")
                labels = {**sample.labels, CLUSTER_LABEL: name}
                into.samples.append(sample._replace(labels=labels))
    return list(merged.values())


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
