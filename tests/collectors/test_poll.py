"""poll() on recorded 4.0.7 and 3.0.7 answers and on synthetic clusters: content, partial
snapshots, request cost and bounded concurrency."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.notes import ACTIONS, REFUSED
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from tests.collectors.recorded import BASE, BROKER, Recording, body, index, load, register

ORDERS = "persistent://public/default/orders"
PAYMENTS = "persistent://public/default/payments"
AUDIT = "persistent://public/second/audit"
BULK = "/admin/v2/broker-stats/topics"


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def run(mock: responses.RequestsMock, **kwargs: Any) -> Snapshot:
    return poll(AdminClient(BASE, backoff=0.0, retries=1), **kwargs)


def poll_requests(scenario: str) -> int:
    """How many requests the recorded poll made (the recorder marks them `by: poll`)."""
    return sum(1 for e in index(scenario) if e["by"] == "poll")


def test_poll_recorded_default_cluster_is_complete(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.default)
    snap = run(mock)
    assert snap.errors == ()
    assert snap.cluster == "standalone"
    # the store says which release answered: the version call of a broker without a report
    assert [(b.broker_id, b.is_leader, b.version) for b in snap.brokers] == [
        (BROKER, True, recording.version)
    ]
    assert snap.requests == poll_requests(recording.default)
    user_topics = {t.topic for t in snap.topics if "/__" not in t.topic}
    assert user_topics == {ORDERS, AUDIT, *(f"{PAYMENTS}-partition-{i}" for i in range(3))}
    subs = {(s.topic, s.subscription): s.type for s in snap.subscriptions if "/__" not in s.topic}
    assert subs == {
        (ORDERS, "ex"): "Exclusive",
        (ORDERS, "sh"): "Shared",
        (ORDERS, "fo"): "Failover",
        (ORDERS, "ks"): "Key_Shared",
        (ORDERS, "idle"): None,
        (AUDIT, "audit"): "Exclusive",
        **{(f"{PAYMENTS}-partition-{i}", "pfo"): "Failover" for i in range(3)},
        **{(f"{PAYMENTS}-partition-{i}", "pks"): "Key_Shared" for i in range(3)},
    }


def test_poll_recorded_version_is_what_the_store_says_answered(
    mock: responses.RequestsMock, recording: Recording, tmp_path: Path
) -> None:
    register(mock, recording.default)
    store = Store(tmp_path)
    store.write(run(mock))
    assert store.read_latest("brokers").column("version").to_pylist() == [recording.version]


def test_poll_recorded_noop_broker_totals_come_from_its_topics(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    # NoopLoadManager keeps no load report (204); the broker's counts come from what it serves
    register(mock, recording.default)
    snap = run(mock)
    (broker,) = snap.brokers
    served = [t for t in snap.topics if t.owner_broker == broker.broker_id]
    assert served and broker.num_topics == len(served)
    assert broker.msg_rate_in == sum(t.msg_rate_in or 0.0 for t in served)
    assert broker.num_consumers == len(snap.consumers)


def test_poll_recorded_partitions_know_their_parent(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.default)
    snap = run(mock)
    parts = sorted(
        (t.partition_index, t.topic) for t in snap.topics if t.partitioned_topic == PAYMENTS
    )
    assert [i for i, _ in parts] == [0, 1, 2]
    assert all(t.partitioned_topic is None for t in snap.topics if t.topic == ORDERS)


def test_poll_recorded_topic_bundles_equal_the_brokers_lookup(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.default)
    snap = run(mock)
    for t in snap.topics:
        path = "/lookup/v2/topic/" + t.topic.replace("://", "/") + "/bundle"
        if any(e["path"] == path for e in index(recording.default)):
            assert t.bundle == body(recording.default, path).strip()
        assert t.owner_broker == BROKER


def test_poll_recorded_bundles_have_owners_and_topic_counts(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.default)
    snap = run(mock)
    default = {b.bundle: b for b in snap.bundles if b.namespace == "public/default"}
    assert len(default) == 4
    for bundle in default.values():
        topics = [
            t for t in snap.topics if t.namespace == "public/default" and t.bundle == bundle.bundle
        ]
        assert bundle.topic_count == len(topics)
        if topics:
            assert bundle.owner_broker == BROKER
    system = [b for b in snap.bundles if b.namespace == "pulsar/system"]
    assert system and all(b.owner_broker is None for b in system)


def test_poll_recorded_key_shared_ranges_and_draining_come_from_topic_stats(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.default)
    snap = run(mock)
    stats = load(recording.default, "/admin/v2/persistent/public/default/orders/stats")
    raw = {c["consumerName"]: c for c in stats["subscriptions"]["ks"]["consumers"]}
    ks = [c for c in snap.consumers if c.topic == ORDERS and c.subscription == "ks"]
    assert {c.consumer_name for c in ks} == {"ks-1", "ks-2"}
    for c in ks:
        said = raw[c.consumer_name]
        if recording.pip_379:  # PIP-379: ranges as arrays, draining hashes
            assert [list(r) for r in c.hash_ranges] == said["keyHashRangeArrays"]
        else:  # 3.0: only the strings, with 31-bit hashes
            assert [f"[{a}, {b}]" for a, b in c.hash_ranges] == said["keyHashRanges"]
            assert c.read_position_when_joining == said["readPositionWhenJoining"]
    draining = [d for d in snap.draining_hashes if d.topic == ORDERS]
    expected = raw["ks-1"].get("drainingHashes", [])
    assert [d.hash for d in draining] == [h["hash"] for h in expected]
    assert bool(draining) == (recording.pip_379)  # 3.0 has no draining hashes
    fo = next(s for s in snap.subscriptions if s.topic == ORDERS and s.subscription == "fo")
    assert fo.active_consumer_name == stats["subscriptions"]["fo"]["activeConsumerName"]


def test_poll_recorded_classic_dispatcher_and_load_report(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.modular)
    snap = run(mock)
    assert snap.errors == ()
    (broker,) = snap.brokers
    assert broker.pulsar_service_url == "pulsar://127.0.0.1:6650"
    assert broker.memory_usage_pct is not None and broker.version == recording.version
    ks = [c for c in snap.consumers if c.topic == ORDERS and c.subscription == "ks"]
    assert all(c.hash_ranges and c.read_position_when_joining for c in ks)
    ranges = sorted(r for c in ks for r in c.hash_ranges)
    if recording.pip_379:
        assert ranges[-1][1] > 65535  # the 4.x classic dispatcher: 31-bit ranges
    else:
        assert (ranges[0][0], ranges[-1][1]) == (0, 65536)  # 3.0 auto split: 0..65536
        assert len(ranges) == len(ks)
    assert snap.requests == poll_requests(recording.modular)  # no version call needed


def test_poll_records_durations_per_endpoint_family(mock: responses.RequestsMock) -> None:
    register(mock, "default")
    snap = run(mock)
    assert {"broker_topic_stats", "owned_namespaces", "bundles", "topic_stats", "total"} <= set(
        snap.durations
    )
    assert all(v >= 0 for v in snap.durations.values())


def test_poll_limited_to_namespaces_skips_tenant_discovery(mock: responses.RequestsMock) -> None:
    register(mock, "default")
    snap = run(mock, namespaces=["public/second"])
    assert {t.namespace for t in snap.topics} == {"public/second"}
    assert {b.namespace for b in snap.bundles} == {"public/second"}
    assert not any("/tenants" in c.request.url for c in mock.calls)


# --- partial snapshots ---------------------------------------------------------------------


def test_poll_bulk_401_is_recorded_and_the_rest_completes(mock: responses.RequestsMock) -> None:
    register(mock, "default", skip=frozenset({BULK}))
    mock.get(BASE + BULK, status=401, body="HTTP 401 Unauthorized")
    snap = run(mock)
    (error,) = snap.errors
    assert error.status == 401 and error.endpoint.endswith(BULK)
    assert "set PULSAR_ADMIN_TOKEN" in error.message
    assert snap.partial
    assert ORDERS in {t.topic for t in snap.topics}  # from the namespace listing
    assert snap.subscriptions == () and snap.consumers == ()
    assert len([b for b in snap.bundles if b.namespace == "public/default"]) == 4


def test_poll_namespace_deleted_mid_poll_is_a_404_entry(mock: responses.RequestsMock) -> None:
    gone = {
        "/admin/v2/namespaces/public/second/bundles",
        "/admin/v2/persistent/public/second",
        "/admin/v2/persistent/public/second/partitioned",
    }
    register(mock, "default", skip=frozenset(gone))
    for path in gone:
        mock.get(BASE + path, status=404, json={"reason": "Namespace does not exist"})
    snap = run(mock)
    assert {e.status for e in snap.errors} == {404}
    assert len(snap.errors) == 3
    audit = next(t for t in snap.topics if t.topic == AUDIT)
    assert audit.bundle == "0x40000000_0x80000000"  # the broker's own nesting stands in
    assert any(s.topic == AUDIT for s in snap.subscriptions)
    assert any(t.topic == ORDERS for t in snap.topics)


def test_poll_listing_short_names_stand_for_their_full_names(
    mock: responses.RequestsMock,
) -> None:
    """A listing that names topics by their short form (the recorded brokers list full
    names): the topic a broker files is one topic, not two, and a new one is kept under its
    full name."""
    listing = "/admin/v2/persistent/public/default"
    register(mock, "default", skip=frozenset({listing}))
    mock.get(
        BASE + listing,
        json=[*load("default", listing, "includeSystemTopic=true"), "orders", "fresh"],
    )
    snap = run(mock)
    assert snap.errors == ()
    names = [t.topic for t in snap.topics]
    assert len(names) == len(set(names))
    assert ORDERS in names and "persistent://public/default/fresh" in names
    assert not [n for n in names if not n.startswith("persistent://")]
    orders = next(t for t in snap.topics if t.topic == ORDERS)
    assert orders.msg_rate_in is not None  # the broker's row, not one made for the listing


def test_poll_timeout_on_ownership_keeps_topic_owners(mock: responses.RequestsMock) -> None:
    owned = f"/admin/v2/brokers/standalone/{BROKER}/ownedNamespaces"
    register(mock, "default", skip=frozenset({owned}))
    mock.get(BASE + owned, body=requests.ReadTimeout("read timed out"))
    snap = run(mock)
    (error,) = snap.errors
    assert error.status is None and "no answer within" in error.message
    assert all(b.owner_broker is None for b in snap.bundles)
    assert all(t.owner_broker == BROKER for t in snap.topics if t.msg_rate_in is not None)


def test_poll_whose_cluster_list_times_out_lists_the_last_polls_cluster_brokers(
    mock: responses.RequestsMock,
) -> None:
    """One failed call must not cost a poll every subscription and consumer: the loop hands
    the cluster its last poll found, whose brokers are listed instead, and the poll says so."""
    register(mock, "default", skip=frozenset({"/admin/v2/clusters"}))
    mock.get(BASE + "/admin/v2/clusters", body=requests.ReadTimeout("read timed out"))
    alone = run(mock)
    assert alone.brokers == () and alone.subscriptions == ()  # nothing to list brokers of
    assert alone.cluster == "unknown"
    snap = run(mock, last_cluster="standalone")
    timed_out, said = snap.errors
    assert timed_out.endpoint.endswith("/admin/v2/clusters") and timed_out.status is None
    assert said.endpoint == "clusters" and "'standalone', the cluster the last poll" in said.message
    assert snap.partial and snap.cluster == "standalone"
    assert [b.broker_id for b in snap.brokers] == [BROKER]
    assert any(s.topic == ORDERS for s in snap.subscriptions)
    assert any(c.topic == ORDERS for c in snap.consumers)


def test_a_collect_source_remembers_the_cluster_its_last_poll_found(
    mock: responses.RequestsMock,
) -> None:
    from pulsar_lens.cli.collect_cmd import admin_source

    register(mock, "default", skip=frozenset({"/admin/v2/clusters"}))
    clusters = mock.get(BASE + "/admin/v2/clusters", json=["standalone"])
    source = admin_source(BASE, None)
    try:
        first = source.poll()
        mock.remove(clusters)
        mock.get(BASE + "/admin/v2/clusters", body=requests.ReadTimeout("read timed out"))
        second = source.poll()
    finally:
        source.close()
    assert first.errors == () and first.cluster == "standalone"
    assert [b.broker_id for b in second.brokers] == [BROKER]
    assert len(second.consumers) == len(first.consumers) > 0
    assert "the cluster the last poll found" in second.errors[-1].message


def test_poll_refuses_a_last_cluster_no_path_can_carry(mock: responses.RequestsMock) -> None:
    register(mock, "default", skip=frozenset({"/admin/v2/clusters"}))
    mock.get(BASE + "/admin/v2/clusters", body=requests.ConnectionError("refused"))
    snap = run(mock, last_cluster="../tenants")
    assert snap.brokers == ()
    assert any("not asked for" in e.message for e in snap.errors)
    assert not [c for c in mock.calls if "/brokers/.." in c.request.url]


def test_poll_malformed_topic_stats_falls_back_to_bulk(mock: responses.RequestsMock) -> None:
    path = "/admin/v2/persistent/public/default/orders/stats"
    register(mock, "default", skip=frozenset({path}))
    mock.get(
        BASE + path, body='{"msgRateIn": 0.0, "subscriptions": {', content_type="application/json"
    )
    snap = run(mock)
    (error,) = snap.errors
    assert error.endpoint.endswith(path) and "unreadable body" in error.message
    ks = [c for c in snap.consumers if c.topic == ORDERS and c.subscription == "ks"]
    assert {c.consumer_name for c in ks} == {"ks-1", "ks-2"}
    assert all(c.hash_ranges == () for c in ks)
    pks = [c for c in snap.consumers if c.subscription == "pks"]
    assert pks and all(c.hash_ranges == ((1, 65535),) for c in pks)


def test_poll_unreachable_admin_api_yields_an_empty_partial_snapshot(
    mock: responses.RequestsMock,
) -> None:
    for path in ("/admin/v2/clusters", "/admin/v2/tenants", "/admin/v2/brokers/leaderBroker"):
        mock.get(BASE + path, body=requests.ConnectionError("refused"))
    snap = run(mock)
    assert snap.partial and len(snap.errors) == 3
    assert snap.topics == () and snap.brokers == ()
    assert all(e.status is None and "could not reach" in e.message for e in snap.errors)


# --- cost and concurrency on a synthetic multi-broker cluster ------------------------------


class FakeCluster:
    """Brokers broker-0..n-1:8080 owning namespaces t/ns0..; every topic has a Shared
    subscription; `key_shared` topics also a Key_Shared one with two consumers."""

    def __init__(self, brokers: int, namespaces: int, topics: int, key_shared: int) -> None:
        self.brokers = [f"broker-{i}:8080" for i in range(brokers)]
        self.namespaces = [f"t/ns{i}" for i in range(namespaces)]
        self.topics = [f"persistent://t/ns{i % namespaces}/topic-{i}" for i in range(topics)]
        self.key_shared = set(self.topics[:key_shared])
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.hosts: list[str] = []

    def owner(self, topic: str) -> str:
        return self.brokers[hash(topic.rsplit("/", 2)[1]) % len(self.brokers)]

    def topic_stats(self, topic: str) -> dict[str, Any]:
        subs: dict[str, Any] = {"s": {"type": "Shared", "consumers": [{"consumerName": "c"}]}}
        if topic in self.key_shared:
            subs["k"] = {
                "type": "Key_Shared",
                "consumers": [
                    {"consumerName": "k1", "keyHashRangeArrays": [[1, 30000]]},
                    {"consumerName": "k2", "keyHashRangeArrays": [[30001, 65535]]},
                ],
            }
        return {"msgRateIn": 1.0, "msgRateOut": 1.0, "publishers": [], "subscriptions": subs}

    def bulk(self, broker: str) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        for topic in self.topics:
            if self.owner(topic) == broker:
                ns = topic.split("://")[1].rsplit("/", 1)[0]
                answer.setdefault(ns, {}).setdefault("0x00000000_0xffffffff", {}).setdefault(
                    "persistent", {}
                )[topic] = self.topic_stats(topic)
        return answer

    def answer(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(0.002)
            return 200, {}, json.dumps(self.route(request))
        finally:
            with self.lock:
                self.in_flight -= 1

    def route(self, request: requests.PreparedRequest) -> Any:
        url = requests.utils.urlparse(request.url)
        host, path = url.netloc, url.path
        self.hosts.append(f"{host}{path}")
        if path == "/admin/v2/clusters":
            return ["c1"]
        if path == "/admin/v2/brokers/c1":
            return self.brokers
        if path == "/admin/v2/brokers/leaderBroker":
            return {"serviceUrl": f"http://{self.brokers[0]}", "brokerId": self.brokers[0]}
        if path == "/admin/v2/tenants":
            return ["t"]
        if path == "/admin/v2/namespaces/t":
            return self.namespaces
        if path == BULK:
            return self.bulk(host)
        if path.endswith("/ownedNamespaces"):
            return {
                f"{ns}/0x00000000_0xffffffff": {"is_active": True}
                for ns in self.namespaces
                if self.owner(f"persistent://{ns}/x") == host
            }
        if path == "/admin/v2/broker-stats/load-report":
            return {"brokerVersionString": "4.0.7"}
        if path == "/admin/v2/broker-stats/metrics":
            return [{"metrics": {"brk_lb_unload_bundle_total": 2}, "dimensions": {}}]
        if path.endswith("/bundles"):
            return {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}
        if path.endswith("/partitioned"):
            return []
        if path.endswith("/stats"):
            return self.topic_stats(
                "persistent://" + path.removeprefix("/admin/v2/persistent/").removesuffix("/stats")
            )
        ns = path.removeprefix("/admin/v2/persistent/")
        return [t for t in self.topics if t.startswith(f"persistent://{ns}/")]


def poll_fake(mock: responses.RequestsMock, cluster: FakeCluster, concurrency: int = 8) -> Snapshot:
    mock.add_callback(
        responses.GET, re.compile(r"http://broker-\d+:8080/.*"), callback=cluster.answer
    )
    return poll(AdminClient("http://broker-0:8080", backoff=0.0), concurrency=concurrency)


def expected_requests(brokers: int, namespaces: int, key_shared: int) -> int:
    discovery = 3 + 1 + 1  # clusters, leader, tenants; brokers/c1; namespaces/t
    # per broker: bulk topic stats, owned bundles, load report, load-manager metrics
    return discovery + 4 * brokers + 3 * namespaces + key_shared


@pytest.mark.parametrize("topics", [50, 2000])
def test_poll_request_count_does_not_grow_with_topics(
    mock: responses.RequestsMock, topics: int
) -> None:
    cluster = FakeCluster(brokers=3, namespaces=4, topics=topics, key_shared=5)
    snap = poll_fake(mock, cluster)
    assert snap.errors == ()
    assert len(snap.topics) == topics
    assert snap.requests == expected_requests(3, 4, 5)


def test_poll_sends_bulk_calls_to_each_brokers_own_url(mock: responses.RequestsMock) -> None:
    cluster = FakeCluster(brokers=3, namespaces=6, topics=60, key_shared=0)
    snap = poll_fake(mock, cluster)
    assert sorted(h for h in cluster.hosts if h.endswith(BULK)) == [
        f"{b}{BULK}" for b in cluster.brokers
    ]
    owners = {t.topic: t.owner_broker for t in snap.topics}
    assert owners == {t: cluster.owner(t) for t in cluster.topics}


def test_poll_fetches_stats_only_for_key_shared_topics_from_their_owner(
    mock: responses.RequestsMock,
) -> None:
    cluster = FakeCluster(brokers=2, namespaces=2, topics=40, key_shared=3)
    snap = poll_fake(mock, cluster)
    stats_calls = sorted(h for h in cluster.hosts if h.endswith("/stats"))
    expected = sorted(
        cluster.owner(t) + "/admin/v2/persistent/" + t.removeprefix("persistent://") + "/stats"
        for t in cluster.key_shared
    )
    assert stats_calls == expected
    ks = [c for c in snap.consumers if c.subscription == "k"]
    assert sorted(c.hash_ranges for c in ks)[0] == ((1, 30000),)


def test_poll_keeps_concurrency_bounded(mock: responses.RequestsMock) -> None:
    cluster = FakeCluster(brokers=4, namespaces=12, topics=100, key_shared=20)
    poll_fake(mock, cluster, concurrency=3)
    assert 1 < cluster.max_in_flight <= 3


def test_poll_survives_odd_shapes_in_the_bulk_answer(mock: responses.RequestsMock) -> None:
    register(mock, "default", skip=frozenset({BULK}))
    odd = {
        "public/default": {
            "0x00000000_0x40000000": {
                "persistent": {
                    "persistent://too/short": {
                        "subscriptions": {"k": {"type": "Key_Shared", "consumers": [{}]}}
                    },
                    ORDERS: "not an object",
                    "persistent://public/default/odd": {
                        "subscriptions": {
                            "s": "bogus",
                            "k": {"type": "Key_Shared", "consumers": ["x", {"consumerName": 5}]},
                        }
                    },
                },
                "weird-domain": [],
            },
            "not-a-bundle": None,
        },
        "other": [],
    }
    mock.get(BASE + BULK, json=odd)
    snap = run(mock)
    odd_subs = {s.subscription: s for s in snap.subscriptions if s.topic.endswith("/odd")}
    assert set(odd_subs) == {"k"}  # "s": "bogus" is no subscription
    assert [c.consumer_name for c in snap.consumers if c.topic.endswith("/odd")] == [""]
    stats_errors = [e for e in snap.errors if e.endpoint not in ACTIONS]
    (error,) = stats_errors  # its stats were not recorded: the fake refuses the call
    assert error.endpoint.endswith("/odd/stats")
    refused = sorted(e.message for e in snap.errors if e.endpoint == REFUSED)
    assert [m.split(" (")[0] for m in refused] == [
        "broker-stats/topics bundle: is null, not an object; left out",
        "broker-stats/topics domain: is a list, not an object; left out",
        "broker-stats/topics namespace: is a list, not an object; left out",
        "consumer: is a string, not an object; left out",
        "subscription: is a string, not an object; left out",
        "topic: has stats that are a string, not an object; left out",
        "topic: is a name the broker would refuse; left out",
    ]
    assert "'persistent://public/default/odd' 's')" in refused[4]
    assert "'persistent://too/short')" in refused[6]
    assert ORDERS in {t.topic for t in snap.topics}


def test_poll_recorded_backlogged_topic_gets_its_earliest_publish_time(
    mock: responses.RequestsMock, recording: Recording
) -> None:
    register(mock, recording.default)
    snap = run(mock)
    answer = load(
        recording.default,
        "/admin/v2/persistent/public/default/orders/stats",
        "getEarliestTimeInBacklog=true",
    )
    for sub in (s for s in snap.subscriptions if s.topic == ORDERS):
        expected_ms = answer["subscriptions"][sub.subscription]["earliestMsgPublishTimeInBacklog"]
        assert expected_ms > 0
        assert sub.earliest_msg_publish_time_in_backlog is not None
        assert int(sub.earliest_msg_publish_time_in_backlog.timestamp() * 1000) == expected_ms
