"""Clusters, brokers, the leader, load reports and bundle ownership (O(brokers) calls)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.fields import (
    FLOAT_LIMIT,
    as_dict,
    as_float,
    as_int,
    as_list,
    as_str,
    as_text,
    warn,
)
from pulsar_lens.collectors.notes import shown
from pulsar_lens.core.errors import AdminApiError
from pulsar_lens.core.model import BrokerRecord
from pulsar_lens.core.names import broker_id_segment, checked_broker_id, entity_segment

GLOBAL_CLUSTER = "global"  # a pseudo-cluster of old geo-replication setups, never polled


def _expect_list(payload: Any, path: str) -> list[str]:
    if not isinstance(payload, list):
        raise AdminApiError("GET", path, None, repr(payload), "expected a JSON list")
    return [as_text(item) for item in payload if isinstance(item, str)]


def broker_web_url(broker_id: str, base_url: str) -> str:
    """The web service URL of broker "host:port": the admin URL's scheme, that host and port
    (over https, that host and the admin URL's port).

    When the broker is the one the admin URL names, the admin URL itself is used (it may
    carry a path prefix, e.g. behind a proxy). NameRefused for an id that is not host:port
    (it would put its own path or query into the URL).
    """
    checked_broker_id(broker_id)
    base = urlsplit(base_url)
    if base.netloc == broker_id:
        return base_url.rstrip("/")
    if base.scheme == "https":
        # A broker lists itself by its plain-HTTP web port. Over TLS, the broker's TLS port is
        # the one the admin URL uses (a cluster's brokers share webServicePortTls); on the
        # admin URL's own host, the admin URL itself.
        host = broker_id.rsplit(":", 1)[0]
        if host.strip("[]").lower() == (base.hostname or "").lower():
            return base_url.rstrip("/")
        return f"https://{host}:{base.port or 443}"
    return f"{base.scheme}://{broker_id}"


def collect_clusters(client: AdminClient, *, timeout: float) -> list[str]:
    """GET /admin/v2/clusters"""
    path = "/admin/v2/clusters"
    names = _expect_list(client.get_json(path, timeout=timeout), path)
    return [n for n in names if n != GLOBAL_CLUSTER]


def collect_broker_ids(client: AdminClient, cluster: str, *, timeout: float) -> list[str]:
    """GET /admin/v2/brokers/{cluster} -> ["host:webPort", ...]; NameRefused (before any
    request) for a cluster name Pulsar would refuse."""
    path = f"/admin/v2/brokers/{entity_segment('cluster', cluster)}"
    return sorted(_expect_list(client.get_json(path, timeout=timeout), path))


def collect_leader(client: AdminClient, *, timeout: float) -> str | None:
    """GET /admin/v2/brokers/leaderBroker -> the leader's broker id.

    An answer naming no leader (null, {}, no usable serviceUrl or brokerId) is refused: a
    broker that knows none answers 404, so such an answer is broken, not "no leader"."""
    path = "/admin/v2/brokers/leaderBroker"
    payload = client.get_json(path, timeout=timeout)
    leader = parse_leader(payload)
    if leader is None:
        hint = "expected an object naming the leader (brokerId or serviceUrl)"
        raise AdminApiError("GET", path, None, repr(payload), hint)
    return leader


def parse_leader(payload: Any) -> str | None:
    """4.0 answers {"serviceUrl": "http://h:8080", "brokerId": "h:8080"}; 3.0 lacks brokerId."""
    payload = as_dict(payload)
    broker_id = as_str(payload, "brokerId")
    if broker_id:
        return broker_id
    url = as_str(payload, "serviceUrl")
    try:
        return urlsplit(url).netloc or None if url else None
    except ValueError:  # e.g. "http://[::1": not a URL, so no leader is known
        return None


NO_LOAD_REPORT = "UnsupportedOperationException"
"""What a broker whose load manager keeps no report in this form answers load-report with, in
a 500 body: the extensible load manager (ExtensibleLoadManagerWrapper.generateLoadReport
throws it; its brokers' load data lives in a system topic, not behind this call)."""


def collect_load_report(client: AdminClient, web_url: str, *, timeout: float) -> Any:
    """GET /admin/v2/broker-stats/load-report on one broker; None when it keeps no report:
    it answers 204 (NoopLoadManager) or 500 with `NO_LOAD_REPORT` (the extensible load
    manager, on every call). The poll then reads the broker's counts from its topics and its
    version from its own call, and lists no error for a broker working as designed."""
    try:
        return client.get_json(
            "/admin/v2/broker-stats/load-report", base_url=web_url, timeout=timeout
        )
    except AdminApiError as exc:
        if exc.status == 500 and NO_LOAD_REPORT in exc.body:
            return None
        raise


def collect_lb_metrics(client: AdminClient, web_url: str, *, timeout: float) -> Any:
    """GET /admin/v2/broker-stats/metrics on one broker: its dimension metrics, a list of
    {"dimensions": {...}, "metrics": {...}} (a few kB; topics are not listed one by one)."""
    return client.get_json("/admin/v2/broker-stats/metrics", base_url=web_url, timeout=timeout)


@dataclass(frozen=True, slots=True)
class LoadManagerCounters:
    """What a broker's load manager counted since that broker started (see `parse_lb_counters`)."""

    bundles_unloaded: int | None = None
    bundles_split: int | None = None


# The counters' names in the dimension metrics: 4.0 ends them in _total (both load managers;
# Prometheus shows them as pulsar_lb_*), releases before 3.0 in _count.
LB_UNLOADED = ("brk_lb_unload_bundle_total", "brk_lb_unload_bundle_count")
LB_SPLIT = ("brk_lb_bundles_split_total", "brk_lb_bundles_split_count")
# The extensible load manager's unloads and splits by result and reason: its totals count
# every successful one, those the admin API asked for too (reason "Admin").
UNLOADS_ASKED = "brk_lb_unload_broker_breakdown_total"
SPLITS_ASKED = "brk_lb_bundles_split_breakdown_total"
ASKED = {"result": "Success", "reason": "Admin"}


def parse_lb_counters(payload: Any) -> LoadManagerCounters:
    """The load manager's own counters from a broker's dimension metrics.

    `bundles_unloaded` counts the bundles its shedder chose to unload; the leader runs the
    shedder, so only the leader's count moves. The modular load manager does not count an
    unload asked through the admin API; the extensible one counts it in its total and again
    under the reason "Admin" (on the broker that carried it out; only the leader lists its
    unload counts), which is taken off here. `bundles_split` counts its automatic splits, the
    same way: the modular leader counts those that succeeded and no admin split; the
    extensible load manager's split total, listed by the broker that split the bundle, holds
    the admin API's splits too (Pulsar 4.0.7, all of it proven on its brokers:
    tests/live/test_unload_drill_live.py, tests/live/test_split_counter_live.py). A counter
    the answer does not list is 0 (the modular leader lists its unloads from its first
    shedding round and its splits from its first check once automatic splits are on, at 0
    until it made one; the extensible one its unloads after the leader's first shedding round
    and its splits after a split); one listed with a value that is no count, or a payload that
    is not a list of metrics, is unknown.
    """
    if not isinstance(payload, list):
        warn(f"broker-stats/metrics answered {type(payload).__name__}, not a list; ignored")
        return LoadManagerCounters()
    found: dict[str, int | None] = {}
    for entry in payload:
        metrics = as_dict(as_dict(entry).get("metrics"))
        names = [*LB_UNLOADED, *LB_SPLIT]
        if all(as_dict(as_dict(entry).get("dimensions")).get(k) == v for k, v in ASKED.items()):
            names += [UNLOADS_ASKED, SPLITS_ASKED]
        for name in names:
            if name in metrics and found.get(name) is None:
                value = as_int(metrics, name)
                if value is not None and value >= 0:
                    found[name] = value
                else:
                    warn(f"{name} = {shown(metrics[name])} is no count; stored as null")
                    found[name] = None

    def first(names: tuple[str, ...]) -> int | None:
        return next((found[n] for n in names if n in found), 0)

    def its_own(totals: tuple[str, ...], asked_name: str, what: str) -> int | None:
        total, asked = first(totals), first((asked_name,))
        if total is None or asked is None:
            return None
        if asked > total:
            warn(f"{asked} {what} asked for through the admin API, of {total}; stored as null")
            return None
        return total - asked

    return LoadManagerCounters(
        bundles_unloaded=its_own(LB_UNLOADED, UNLOADS_ASKED, "unloads"),
        bundles_split=its_own(LB_SPLIT, SPLITS_ASKED, "splits"),
    )


def collect_version(client: AdminClient, web_url: str, *, timeout: float) -> str | None:
    """GET /admin/v2/brokers/version on one broker (a bare version string)."""
    text = client.get_text("/admin/v2/brokers/version", base_url=web_url, timeout=timeout)
    return text.strip().strip('"') or None


def collect_owned_bundles(
    client: AdminClient, cluster: str, broker_id: str, web_url: str, *, timeout: float
) -> Any:
    """GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces, sent to that broker.

    Answer: {"tenant/ns/0x00000000_0x40000000": {"broker_assignment": ..., "is_active":
    true, ...}, ...}; heartbeat namespaces are included. NameRefused (before any request)
    for a cluster name or broker id no path may carry.
    """
    segments = f"{entity_segment('cluster', cluster)}/{broker_id_segment(broker_id)}"
    path = f"/admin/v2/brokers/{segments}/ownedNamespaces"
    payload = client.get_json(path, base_url=web_url, timeout=timeout)
    if not isinstance(payload, dict):
        raise AdminApiError("GET", path, None, repr(payload), "expected a JSON object")
    return payload


def parse_owned_bundles(payload: Mapping[str, Any]) -> list[str]:
    """The bundle keys ("tenant/ns/0x..._0x...") a broker owns and serves (is_active)."""
    return sorted(
        key
        for key, status in as_dict(payload).items()
        if as_dict(status).get("is_active", True) is not False
    )


def _pct(resource: Any) -> float | None:
    """usage / limit in percent; None without a positive limit or for a quotient no float
    holds (a usage of 1e17 over a limit of 1e-300)."""
    usage, limit = as_float(as_dict(resource), "usage"), as_float(as_dict(resource), "limit")
    if usage is None or limit is None or limit <= 0:
        return None
    pct = usage / limit * 100.0
    if not abs(pct) < FLOAT_LIMIT:
        warn(f"usage {shown(usage)} of limit {shown(limit)} is no percentage; stored as null")
        return None
    return pct


def parse_broker(
    broker_id: str,
    *,
    web_url: str | None,
    leader: str | None,
    load_report: Any = None,
    version: str | None = None,
    lb: LoadManagerCounters | None = None,
) -> BrokerRecord:
    """A BrokerRecord from the broker id and, when the load manager keeps one, its report
    (`LocalBrokerData`: cpu/memory {usage, limit}, msgRateIn/Out, numTopics, ...) and its
    counters (`lb`, None when they could not be read)."""
    report = as_dict(load_report)
    return BrokerRecord(
        broker_id=broker_id,
        web_service_url=as_str(report, "webServiceUrl") or web_url,
        pulsar_service_url=as_str(report, "pulsarServiceUrl"),
        version=as_str(report, "brokerVersionString") or version,
        is_leader=leader == broker_id,
        cpu_usage_pct=_pct(report.get("cpu")),
        memory_usage_pct=_pct(report.get("memory")),
        msg_rate_in=as_float(report, "msgRateIn"),
        msg_rate_out=as_float(report, "msgRateOut"),
        num_topics=as_int(report, "numTopics"),
        num_bundles=as_int(report, "numBundles") or _count(report.get("bundles")),
        num_consumers=as_int(report, "numConsumers"),
        num_producers=as_int(report, "numProducers"),
        lb_bundles_unloaded=lb.bundles_unloaded if lb else None,
        lb_bundles_split=lb.bundles_split if lb else None,
    )


def _count(items: Any) -> int | None:
    return len(as_list(items)) if isinstance(items, list) else None
