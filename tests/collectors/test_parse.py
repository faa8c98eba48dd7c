"""parse_* on real 4.0.7 and 3.0.7 answers: PIP-379 arrays, the classic dispatcher's and
3.0's range strings, load reports, leaders."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest

from pulsar_lens.collectors.brokers import (
    LoadManagerCounters,
    parse_broker,
    parse_lb_counters,
    parse_leader,
    parse_owned_bundles,
)
from pulsar_lens.collectors.fields import field_warnings, parse_hash_ranges
from pulsar_lens.collectors.namespaces import (
    bundle_for,
    bundles_of_full_names,
    parse_boundaries,
    parse_bundles,
)
from pulsar_lens.collectors.topics import (
    needs_topic_stats,
    parse_broker_topic_stats,
    parse_consumer,
    parse_subscriptions,
    parse_topic,
    parse_topic_name,
)
from tests.collectors.recorded import BROKER, Recording, body, index, load
from tests.crcforge import forge_name

ORDERS = "persistent://public/default/orders"
ORDERS_STATS = "/admin/v2/persistent/public/default/orders/stats"
BULK = "/admin/v2/broker-stats/topics"


def test_parse_topic_name_splits_partitions() -> None:
    name = parse_topic_name("persistent://public/default/payments-partition-2")
    assert (name.tenant, name.namespace, name.local) == (
        "public",
        "public/default",
        "payments-partition-2",
    )
    assert name.partitioned_topic == "persistent://public/default/payments"
    assert name.partition_index == 2
    assert name.admin_path == "/admin/v2/persistent/public/default/payments-partition-2"


def test_parse_topic_name_reads_v1_names_and_quotes_local_names() -> None:
    name = parse_topic_name("non-persistent://t/c1/ns/a b")
    assert name.namespace == "t/c1/ns"
    assert not name.persistent
    assert name.admin_path == "/admin/non-persistent/t/c1/ns/a%20b"


@pytest.mark.parametrize(
    "short", ["orders", "public/default/orders", "PERSISTENT://public/default/orders"]
)
def test_parse_topic_name_completes_names_as_the_broker_does(short: str) -> None:
    assert parse_topic_name(short).topic == "persistent://public/default/orders"


@pytest.mark.parametrize("bad", ["http://x/y/z", "persistent://a/b", "a/b", "persistent://a/b/"])
def test_parse_topic_name_refuses_what_the_broker_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_topic_name(bad)


def test_parse_broker_topic_stats_flattens_namespace_bundle_domain(recording: Recording) -> None:
    found = parse_broker_topic_stats(load(recording.default, BULK), BROKER)
    by_topic = {e.topic: e for e in found}
    assert ORDERS in by_topic
    assert by_topic[ORDERS].broker == BROKER
    assert by_topic[ORDERS].bundle == "0x80000000_0xc0000000"
    assert {f"persistent://public/default/payments-partition-{i}" for i in range(3)} <= set(
        by_topic
    )


def test_broker_stats_topics_lacks_the_key_shared_fields(recording: Recording) -> None:
    """Why per-topic stats are needed: the bulk answer has consumers but no ranges."""
    bulk = {
        e.topic: e.stats for e in parse_broker_topic_stats(load(recording.default, BULK), BROKER)
    }
    ks = bulk[ORDERS]["subscriptions"]["ks"]
    assert [c["consumerName"] for c in ks["consumers"]] == ["ks-1", "ks-2"]
    for consumer in ks["consumers"]:
        assert not {"keyHashRangeArrays", "keyHashRanges", "drainingHashes"} & set(consumer)
    assert "activeConsumerName" not in bulk[ORDERS]["subscriptions"]["fo"]
    assert "keySharedMode" not in ks


def test_needs_topic_stats_only_for_key_shared_and_multi_consumer_failover(
    recording: Recording,
) -> None:
    bulk = {
        e.topic: e.stats for e in parse_broker_topic_stats(load(recording.default, BULK), BROKER)
    }
    assert needs_topic_stats(bulk[ORDERS])
    assert needs_topic_stats(bulk["persistent://public/default/payments-partition-0"])
    assert not needs_topic_stats(bulk["persistent://public/default/__change_events"])
    one_failover = {"subscriptions": {"f": {"type": "Failover", "consumers": [{}]}}}
    shared = {"subscriptions": {"s": {"type": "Shared", "consumers": [{}, {}]}}}
    idle_ks = {"subscriptions": {"k": {"type": "Key_Shared", "consumers": []}}}
    assert not any(needs_topic_stats(s) for s in (one_failover, shared, idle_ks))


def test_parse_subscriptions_reads_4_0_key_shared_ranges_and_draining() -> None:
    stats = load("default", ORDERS_STATS)
    rows = parse_subscriptions(ORDERS, stats)
    subs = {s.subscription: s for s in rows.subscriptions}
    assert {n: s.type for n, s in subs.items()} == {
        "ex": "Exclusive",
        "fo": "Failover",
        "idle": None,
        "ks": "Key_Shared",
        "sh": "Shared",
    }
    assert subs["ks"].key_shared_mode == "AUTO_SPLIT"
    assert subs["ks"].consumer_count == 2
    raw = {c["consumerName"]: c for c in stats["subscriptions"]["ks"]["consumers"]}
    for consumer in (c for c in rows.consumers if c.subscription == "ks"):
        expected = tuple(tuple(r) for r in raw[consumer.consumer_name]["keyHashRangeArrays"])
        assert consumer.hash_ranges == expected
    draining = [d for d in rows.draining_hashes if d.subscription == "ks"]
    assert len(draining) == raw["ks-1"]["drainingHashesCount"] > 0
    assert {d.consumer_name for d in draining} == {"ks-1"}
    assert sum(d.unack_msgs for d in draining) == raw["ks-1"]["drainingHashesUnackedMessages"]
    assert subs["ks"].draining_hashes_count == len(draining)


def test_parse_subscriptions_union_of_key_shared_ranges_covers_the_hash_space(
    recording: Recording,
) -> None:
    rows = parse_subscriptions(ORDERS, load(recording.default, ORDERS_STATS))
    ranges = sorted(r for c in rows.consumers if c.subscription == "ks" for r in c.hash_ranges)
    # consistent hashing: 4.0 reports 1..65535, 3.0 its 31-bit ring from 0 to 2**31 - 2
    low, high = (1, 65535) if recording.pip_379 else (0, 2**31 - 2)
    assert ranges[0][0] == low and ranges[-1][1] == high
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))


def test_parse_subscription_takes_the_brokers_active_consumer(recording: Recording) -> None:
    rows = parse_subscriptions(ORDERS, load(recording.default, ORDERS_STATS))
    subs = {s.subscription: s for s in rows.subscriptions}
    stats = load(recording.default, ORDERS_STATS)["subscriptions"]
    assert subs["fo"].active_consumer_name == stats["fo"]["activeConsumerName"]
    assert subs["ex"].active_consumer_name == "ex-1"
    assert subs["sh"].active_consumer_name is None


def test_parse_subscription_infers_active_consumer_of_a_single_consumer_from_bulk(
    recording: Recording,
) -> None:
    bulk = {
        e.topic: e.stats for e in parse_broker_topic_stats(load(recording.default, BULK), BROKER)
    }
    audit = parse_subscriptions(
        "persistent://public/second/audit", bulk["persistent://public/second/audit"]
    )
    assert audit.subscriptions[0].active_consumer_name == "auditor"
    orders = {s.subscription: s for s in parse_subscriptions(ORDERS, bulk[ORDERS]).subscriptions}
    assert orders["fo"].active_consumer_name is None  # two consumers: only the broker knows


def test_parse_consumer_reads_times_and_counters(recording: Recording) -> None:
    stats = load(recording.default, ORDERS_STATS)
    raw = stats["subscriptions"]["ex"]["consumers"][0]
    consumer = parse_consumer(ORDERS, "ex", raw)
    assert consumer.consumer_name == "ex-1"
    assert consumer.connected_since is not None and consumer.connected_since.tzinfo == dt.UTC
    assert consumer.connected_since.isoformat().startswith(raw["connectedSince"][:19])
    assert consumer.hash_ranges == ()
    assert consumer.available_permits == raw["availablePermits"]
    assert consumer.client_version == raw["clientVersion"]


@pytest.mark.parametrize("scenario", ["classic-modular", "3.0-default", "3.0-autosplit-modular"])
def test_parse_subscriptions_reads_classic_key_hash_range_strings(scenario: str) -> None:
    """4.0.7's classic dispatcher and 3.0 (whose only dispatcher it is) list ranges as
    strings, with where each consumer joined and who joined after the mark-delete position."""
    stats = load(scenario, ORDERS_STATS)
    rows = parse_subscriptions(ORDERS, stats)
    raw = {c["consumerName"]: c for c in stats["subscriptions"]["ks"]["consumers"]}
    assert all("keyHashRangeArrays" not in c for c in raw.values())
    for consumer in (c for c in rows.consumers if c.subscription == "ks"):
        strings = raw[consumer.consumer_name]["keyHashRanges"]
        assert len(consumer.hash_ranges) == len(strings) > 0
        assert f"[{consumer.hash_ranges[0][0]}, {consumer.hash_ranges[0][1]}]" in strings
        assert (
            consumer.read_position_when_joining
            == raw[consumer.consumer_name]["readPositionWhenJoining"]
        )
    ks = next(s for s in rows.subscriptions if s.subscription == "ks")
    assert ks.consumers_after_mark_delete_position is not None
    assert "ks-2" in ks.consumers_after_mark_delete_position
    assert rows.draining_hashes == ()
    assert ks.key_shared_mode == "AUTO_SPLIT"
    if scenario.startswith("3.0-"):  # no PIP-379 fields at all: unknown, not zero
        assert ks.draining_hashes_count is None
        assert all(c.draining_hashes_count is None for c in rows.consumers)


def test_parse_consumer_of_3_0_reads_its_times_and_leaves_missing_fields_unknown() -> None:
    stats = load("3.0-default", ORDERS_STATS)
    raw = dict(stats["subscriptions"]["ks"]["consumers"][0])
    consumer = parse_consumer(ORDERS, "ks", raw)
    assert consumer.connected_since is not None and consumer.connected_since.tzinfo == dt.UTC
    assert consumer.connected_since.isoformat().startswith(raw["connectedSince"][:19])
    assert consumer.hash_ranges[0][0] == 0 and consumer.read_position_when_joining == "4:0"
    del raw["msgRateOut"]
    assert parse_consumer(ORDERS, "ks", raw).msg_rate_out is None  # missing field -> None


def test_parse_hash_ranges_prefers_arrays_and_skips_malformed() -> None:
    assert parse_hash_ranges(
        {"keyHashRangeArrays": [[5, 9], [1, 3]], "keyHashRanges": ["[100, 200]"]}
    ) == ((1, 3), (5, 9))
    assert parse_hash_ranges({"keyHashRangeArrays": [], "keyHashRanges": ["[2960, 5968]"]}) == (
        (2960, 5968),
    )
    assert parse_hash_ranges({"keyHashRanges": ["[1,2]", "junk", 7, "[3, x]"]}) == ((1, 2),)
    assert parse_hash_ranges({"keyHashRangeArrays": [[1], [1, True], "x", [4, 6]]}) == ((4, 6),)
    assert parse_hash_ranges({}) == ()


def test_parse_consumer_ignores_unknown_fields_and_wrong_types() -> None:
    consumer = parse_consumer(
        ORDERS,
        "s",
        {
            "consumerName": "c",
            "futureField": {"x": 1},
            "unackedMessages": "many",
            "availablePermits": True,
        },
    )
    assert consumer.consumer_name == "c"
    assert consumer.unacked_messages is None
    assert consumer.available_permits is None


def test_parse_topic_reads_bulk_and_per_topic_shapes(recording: Recording) -> None:
    name = parse_topic_name(ORDERS)
    bulk = {
        e.topic: e.stats for e in parse_broker_topic_stats(load(recording.default, BULK), BROKER)
    }
    from_bulk = parse_topic(name, bulk[ORDERS], bundle="b", owner=BROKER)
    from_stats = parse_topic(name, load(recording.default, ORDERS_STATS), bundle="b", owner=BROKER)
    assert from_bulk.subscription_count == from_stats.subscription_count == 5
    assert from_bulk.producer_count == from_stats.producer_count == 1
    assert from_bulk.storage_size is not None and from_stats.storage_size is not None
    unloaded = parse_topic(name, None, bundle="b", owner=None)
    assert unloaded.msg_rate_in is None and unloaded.subscription_count is None


def test_bundle_for_agrees_with_the_brokers_recorded_lookups(recording: Recording) -> None:
    boundaries = {
        ns: parse_boundaries(load(recording.default, f"/admin/v2/namespaces/{ns}/bundles"))
        for ns in ("public/default", "public/second")
    }
    lookups = [e for e in index(recording.default) if e["path"].startswith("/lookup/v2/topic/")]
    assert len(lookups) == 5
    for entry in lookups:
        rest = entry["path"].removeprefix("/lookup/v2/topic/").removesuffix("/bundle")
        domain, tenant, ns, local = rest.split("/")
        topic = f"{domain}://{tenant}/{ns}/{local}"
        said = body(recording.default, entry["path"]).strip()
        assert bundle_for(topic, boundaries[f"{tenant}/{ns}"]) == said
        assert bundles_of_full_names([topic], boundaries[f"{tenant}/{ns}"]) == [said]


def test_bundles_of_full_names_are_bundle_for_without_the_parse() -> None:
    boundaries = parse_boundaries(load("default", "/admin/v2/namespaces/public/default/bundles"))
    names = [f"persistent://public/default/t-{i}" for i in range(2000)]
    names += [forge_name("persistent://public/default/edge-", b) for b in boundaries[1:-1]]
    names.append(forge_name("persistent://public/default/edge-", 0))
    # all of a namespace's names in one search place each as one name's search does
    assert bundles_of_full_names(names, boundaries) == [bundle_for(n, boundaries) for n in names]
    # the one hash no bundle holds: the broker fails that topic's lookup; the poll goes on
    unplaceable = forge_name("persistent://public/default/edge-", 0xFFFFFFFF)
    assert bundles_of_full_names([unplaceable, names[0]], boundaries) == [
        None,
        bundle_for(names[0], boundaries),
    ]
    assert bundles_of_full_names([], boundaries) == []


def test_lookup_bundle_answer_is_a_bare_string_not_json(recording: Recording) -> None:
    text = body(recording.default, "/lookup/v2/topic/persistent/public/default/orders/bundle")
    assert text.startswith("0x") and not text.startswith('"')


def test_parse_bundles_reads_boundaries(recording: Recording) -> None:
    bundles = parse_bundles(
        "public/default", load(recording.default, "/admin/v2/namespaces/public/default/bundles")
    )
    assert [b.bundle for b in bundles] == [
        "0x00000000_0x40000000",
        "0x40000000_0x80000000",
        "0x80000000_0xc0000000",
        "0xc0000000_0xffffffff",
    ]
    assert bundles[-1].upper == 0xFFFFFFFF and bundles[0].tenant == "public"


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"boundaries": ["0x00000000"]},
        {"boundaries": ["0x10", "0x05"]},
        {"boundaries": ["zz", "0x1"]},
    ],
)
def test_parse_boundaries_rejects_malformed(payload: object) -> None:
    with pytest.raises(ValueError):
        parse_boundaries(payload)


def test_parse_owned_bundles_includes_heartbeat_and_skips_inactive(recording: Recording) -> None:
    owned = parse_owned_bundles(
        load(recording.default, f"/admin/v2/brokers/standalone/{BROKER}/ownedNamespaces")
    )
    assert "public/default/0x80000000_0xc0000000" in owned
    assert any(key.startswith("pulsar/") for key in owned)  # heartbeat namespaces
    assert parse_owned_bundles({"a/b/0x0_0x1": {"is_active": False}}) == []


def test_parse_leader_reads_the_leader_of_each_release(recording: Recording) -> None:
    leader = load(recording.default, "/admin/v2/brokers/leaderBroker")
    assert "brokerId" in leader  # 3.0.7 says it too
    assert parse_leader(leader) == BROKER
    # a broker that names only its URL (before brokerId was added)
    assert parse_leader({"serviceUrl": "http://broker-0.example:8080"}) == "broker-0.example:8080"
    assert parse_leader(None) is None


def test_parse_broker_reads_a_modular_load_report(recording: Recording) -> None:
    report = load(recording.modular, "/admin/v2/broker-stats/load-report")
    broker = parse_broker(BROKER, web_url="http://x", leader=BROKER, load_report=report)
    assert broker.is_leader
    assert broker.version == recording.version
    assert broker.web_service_url == f"http://{BROKER}"
    assert broker.pulsar_service_url == "pulsar://127.0.0.1:6650"
    assert broker.memory_usage_pct == pytest.approx(
        report["memory"]["usage"] / report["memory"]["limit"] * 100
    )
    assert broker.num_topics == report["numTopics"]


def test_parse_broker_without_load_report_uses_the_version_call(recording: Recording) -> None:
    version = body(recording.default, "/admin/v2/brokers/version").strip()
    broker = parse_broker(
        BROKER, web_url=f"http://{BROKER}", leader=None, load_report=None, version=version
    )
    assert broker.version == recording.version
    assert broker.cpu_usage_pct is None and not broker.is_leader


def test_fields_no_column_can_hold_become_null_and_are_reported() -> None:
    from pulsar_lens.collectors.fields import as_epoch_ms, as_float, as_int, field_warnings, reading

    payload = {"big": 2**70, "huge": 9.3e18, "inf": float("inf"), "rate": 1e308, "ok": 5}
    payload |= {"far": 10**15, "neg": -(2**63), "nan": float("nan")}
    with field_warnings() as found, reading("t"):
        assert as_int(payload, "big") is None and as_int(payload, "huge") is None
        assert as_int(payload, "neg") == -(2**63) and as_int(payload, "ok") == 5
        assert as_float(payload, "inf") is None and as_float(payload, "rate") is None
        assert as_float(payload, "nan") is None and as_float(payload, "ok") == 5.0
        assert as_epoch_ms(payload, "far") is None
    assert found == [
        f"t: big={2**70} does not fit a 64-bit integer; stored as null",
        "t: huge=9.3e+18 does not fit a 64-bit integer; stored as null",
        "t: inf=inf is not a finite number below 1e+18; stored as null",
        "t: rate=1e+308 is not a finite number below 1e+18; stored as null",
        "t: nan=nan is not a finite number below 1e+18; stored as null",
        "t: far=1000000000000000 is past the year 9999 as epoch milliseconds; stored as null",
    ]


# ---- the load manager's counters (GET /admin/v2/broker-stats/metrics) ----------------------

# Shaped as 4.0.7 answers: the modular leader after its shedder unloaded one bundle, and an
# extensible broker with its decision breakdown (the live test reads real ones).
MODULAR_AFTER_A_SHED = [
    {
        "metrics": {"brk_lb_unload_broker_total": 1, "brk_lb_unload_bundle_total": 1},
        "dimensions": {"cluster": "local", "metric": "bundleUnloading"},
    },
    {"metrics": {"jvm_heap_used": 1.5e8}, "dimensions": {"metric": "jvm"}},
]
EXTENSIBLE = [
    {
        "metrics": {"brk_lb_unload_broker_breakdown_total": 1},
        "dimensions": {
            "broker": "127.0.0.1",
            "metric": "bundleUnloading",
            "reason": "HitCount",
            "result": "Skip",
        },
    },
    {
        "metrics": {"brk_lb_unload_broker_total": 0, "brk_lb_unload_bundle_total": 3},
        "dimensions": {"broker": "127.0.0.1", "metric": "bundleUnloading"},
    },
    {
        "metrics": {"brk_lb_bundles_split_total": 2},
        "dimensions": {"broker": "127.0.0.1", "metric": "bundlesSplit"},
    },
]


def unloading(count: int, result: str, reason: str) -> dict[str, Any]:
    dimensions = {"broker": "127.0.0.1", "metric": "bundleUnloading"}
    return {
        "metrics": {"brk_lb_unload_broker_breakdown_total": count},
        "dimensions": dimensions | {"result": result, "reason": reason},
    }


def splitting(count: int, result: str, reason: str) -> dict[str, Any]:
    return {
        "metrics": {"brk_lb_bundles_split_breakdown_total": count},
        "dimensions": {"metric": "bundlesSplit", "result": result, "reason": reason},
    }


# what a Pulsar 4.0.7 leader with the extensible load manager listed after one admin unload
# and two shedding rounds that unloaded nothing (its other entries left out)
EXTENSIBLE_AFTER_AN_ADMIN_UNLOAD = [
    {
        "metrics": {"brk_lb_unload_broker_total": 1, "brk_lb_unload_bundle_total": 1},
        "dimensions": {"broker": "127.0.0.1", "metric": "bundleUnloading"},
    },
    unloading(1, "Skip", "HitCount"),
    unloading(1, "Skip", "NoLoadData"),
    unloading(1, "Success", "Admin"),
    unloading(0, "Success", "Overloaded"),
    unloading(0, "Failure", "Unknown"),
]


def test_the_extensible_load_managers_count_leaves_out_the_unloads_the_admin_api_asked_for() -> (
    None
):
    assert parse_lb_counters(EXTENSIBLE_AFTER_AN_ADMIN_UNLOAD) == LoadManagerCounters(0, 0)
    shed_too = [
        {"metrics": {"brk_lb_unload_bundle_total": 5}, "dimensions": {}},
        unloading(2, "Success", "Admin"),
        unloading(2, "Success", "Overloaded"),
        unloading(1, "Success", "Underloaded"),
        unloading(7, "Skip", "Admin"),  # not a Success: never counted in the total
    ]
    assert parse_lb_counters(shed_too) == LoadManagerCounters(3, 0)
    with field_warnings() as found:
        more_asked = [shed_too[0], unloading(6, "Success", "Admin")]
        assert parse_lb_counters(more_asked) == LoadManagerCounters(None, 0)
        bad = [shed_too[0], unloading(-1, "Success", "Admin")]
        assert parse_lb_counters(bad) == LoadManagerCounters(None, 0)
    assert any("admin API" in w for w in found) and any("no count" in w for w in found)


def test_the_extensible_load_managers_split_count_leaves_out_the_admin_apis_splits() -> None:
    splits = [
        {"metrics": {"brk_lb_bundles_split_total": 4}, "dimensions": {"metric": "bundlesSplit"}},
        splitting(3, "Success", "Admin"),
        splitting(1, "Success", "Topics"),
        splitting(9, "Skip", "Balanced"),
    ]
    assert parse_lb_counters(splits) == LoadManagerCounters(0, 1)
    with field_warnings() as found:
        assert (
            parse_lb_counters([splits[0], splitting(5, "Success", "Admin")]).bundles_split is None
        )
    assert any("splits asked for" in w for w in found)


def test_lb_counters_of_the_modular_and_extensible_load_managers() -> None:
    assert parse_lb_counters(MODULAR_AFTER_A_SHED) == LoadManagerCounters(1, 0)
    assert parse_lb_counters(EXTENSIBLE) == LoadManagerCounters(3, 2)
    # the modular load manager lists its counters only once it has counted
    assert parse_lb_counters([MODULAR_AFTER_A_SHED[1]]) == LoadManagerCounters(0, 0)
    # releases before 3.0 named them *_count
    old = [{"metrics": {"brk_lb_unload_bundle_count": 4}, "dimensions": {}}]
    assert parse_lb_counters(old) == LoadManagerCounters(4, 0)


def test_lb_counters_of_a_bad_answer_are_unknown_or_left_out() -> None:
    with field_warnings() as found:
        assert parse_lb_counters({"not": "a list"}) == LoadManagerCounters(None, None)
        bad = [{"metrics": {"brk_lb_unload_bundle_total": -3}}, "junk", {"metrics": None}]
        assert parse_lb_counters(bad) == LoadManagerCounters(None, 0)
    assert any("not a list" in w for w in found) and any("no count" in w for w in found)


def test_parse_broker_carries_the_lb_counters() -> None:
    broker = parse_broker(
        BROKER, web_url="http://x", leader=BROKER, lb=parse_lb_counters(EXTENSIBLE)
    )
    assert (broker.lb_bundles_unloaded, broker.lb_bundles_split) == (3, 2)
    assert parse_broker(BROKER, web_url="http://x", leader=None).lb_bundles_unloaded is None
