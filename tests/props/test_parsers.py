"""Every parser the collector uses, fed damaged admin answers: no crash, well-formed rows.

A parser either turns an answer into records that build their Arrow tables and digest (what
the store writes), or refuses it with a clear error (an `AdminApiError` naming the call, a
`ModelError` or `TopicNameError` naming the value) that `poll()` records among the snapshot's
errors. The answers start as recorded ones and are mutated (`tests/props/strategies.py`).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.collectors.brokers import (
    parse_broker,
    parse_lb_counters,
    parse_leader,
    parse_owned_bundles,
)
from pulsar_lens.collectors.fields import (
    as_epoch_ms,
    as_float,
    as_int,
    as_iso_time,
    field_warnings,
    parse_hash_ranges,
)
from pulsar_lens.collectors.namespaces import (
    collect_bundles,
    collect_partition_count,
    parse_bundle_key,
    parse_bundles,
)
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.topics import (
    collect_topic_stats,
    parse_broker_topic_stats,
    parse_subscriptions,
    parse_topic,
)
from pulsar_lens.core.bundles import topic_bundle
from pulsar_lens.core.digest import snapshot_id
from pulsar_lens.core.errors import AdminApiError, ModelError
from pulsar_lens.core.limits import MAX_PARTITIONS
from pulsar_lens.core.model import POLLED_TABLES, Snapshot, records_to_table
from pulsar_lens.core.topicname import TopicNameError, parse_topic_name
from tests.props.strategies import (
    BULK_STATS,
    BUNDLES,
    LEADERS,
    LOAD_REPORTS,
    OWNED,
    SCENARIOS,
    TOPIC_STATS,
    FakeAdmin,
    bad_values,
    damaged_admin,
    damaged_polls,
    mutated,
    props,
    stats_shapes,
    weird_names,
)

AT = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)
INT32_MAX = 2**31 - 1
TOPIC = "persistent://public/default/orders"
PARTITIONED = "/admin/v2/persistent/public/default/partitioned"
PARTS = "/admin/v2/persistent/public/default/p/partitions"
LEADER = "/admin/v2/brokers/leaderBroker"
BROKERS = "/admin/v2/brokers/standalone"
CLUSTERS = "/admin/v2/clusters"


def assert_well_formed(snapshot: Snapshot) -> None:
    """What the store needs of a snapshot: every table builds, the digest is defined."""
    snapshot_id(snapshot)  # canonical JSON: refuses NaN, infinities, naive datetimes
    for name in POLLED_TABLES:
        table = records_to_table(
            name, snapshot.records(name), snapshot_id="x", collected_at=AT, cluster="c"
        )
        table.validate(full=True)
        for column in table.column_names:  # text must encode as UTF-8, as Parquet stores it
            for value in table[column].to_pylist():
                if isinstance(value, str):
                    value.encode("utf-8")
    for consumer in snapshot.consumers:
        for start, end in consumer.hash_ranges:
            assert 0 <= start <= end <= INT32_MAX, consumer.hash_ranges
    for error in snapshot.errors:
        assert error.endpoint and error.message


def snapshot_of(**tables: Any) -> Snapshot:
    return Snapshot(cluster="c", collected_at=AT, **tables)


# ---- the whole poll -----------------------------------------------------------------------------


@props(300)
@given(damaged_polls())
@example(("classic-modular", False, {PARTITIONED: [""]})).via("a blank partitioned topic name")
@example(("default", False, {PARTITIONED: ["persistent://"]})).via("a name with no namespace")
@example(("default", True, {LEADER: {"serviceUrl": "http://[::1"}})).via("a URL urlsplit refuses")
@example(("default", False, {BROKERS: ["\ud800:8080"]})).via("a broker id that is not text")
@example(("default", False, {CLUSTERS: ["\udfff"]})).via("a cluster name that is not text")
@example(
    (
        "default",
        False,
        {PARTITIONED: ["persistent://public/default/p"], PARTS: {"partitions": 10**9}},
    )
).via("a billion partitions to list")
@example(("default", False, {"/admin/v2/persistent/public/default": ["NaN"]})).via(
    "a listing's short name, which no part files"
)
def test_poll_of_damaged_answers_stores_well_formed_rows(
    damaged: tuple[str, bool, dict[str, Any]],
) -> None:
    """The real poll() over a recording with some answers damaged never raises, and what it
    returns is storable; a refused answer is an error of the snapshot, naming the call in its
    endpoint and saying what was wrong in its message."""
    client = damaged_admin(*damaged)
    snapshot = poll(client, concurrency=1, timeout=1.0)  # type: ignore[arg-type]
    assert_well_formed(snapshot)
    for error in snapshot.errors:
        if error.endpoint.startswith("GET "):  # the call is named once, in `endpoint`
            assert error.endpoint.split(" ", 1)[1].startswith("/"), error.endpoint
            assert error.message and not error.message.startswith(error.endpoint), error


def test_poll_of_undamaged_answers_is_complete() -> None:
    """The baseline of the test above: the recordings themselves poll without errors."""
    for scenario in SCENARIOS:
        snapshot = poll(FakeAdmin.recorded(scenario), concurrency=1)  # type: ignore[arg-type]
        assert [e for e in snapshot.errors if e.endpoint != "field"] == []
        assert snapshot.topics and snapshot.consumers
        assert_well_formed(snapshot)


# ---- per-topic stats: topics, subscriptions, consumers, hash ranges, draining hashes -----------


@props(250)
@given(stats_shapes(TOPIC_STATS), st.sampled_from(["orders", "payments-partition-1", "x"]))
@example({"publishers": [{"connectedSince": "0001-01-01T00:00:00+01:00"}]}, "orders").via(
    "an offset pushed a publisher's time before year 1 (OverflowError)"
)
@example(
    {"subscriptions": {"s": {"consumers": [{"connectedSince": "9999-12-31T23:59:59-01:00"}]}}},
    "orders",
).via("an offset pushed a consumer's time past year 9999 (OverflowError)")
@example(
    {"subscriptions": {"s": {"consumers": [{"keyHashRangeArrays": [[2**40, 1], [-5, 3]]}]}}},
    "orders",
).via("ranges no int32 column holds (ArrowInvalid)")
@example(
    {"subscriptions": {"s": {"consumers": [{"keyHashRanges": ["[0, 99999999999]"]}]}}}, "x"
).via("3.0 range text beyond int32 (ArrowInvalid)")
@example(
    {"subscriptions": {"\ud800": {"type": "\udfff", "consumers": [{"consumerName": "\ud800"}]}}},
    "orders",
).via("lone surrogates in names (UnicodeEncodeError on the table build)")
def test_topic_stats_parse_to_well_formed_rows(stats: Any, local: str) -> None:
    name = parse_topic_name(local)
    if not isinstance(stats, dict):  # what collect_topic_stats refuses, naming the call
        client = FakeAdmin({(f"{name.admin_path}/stats", ""): stats})
        with pytest.raises(AdminApiError, match=f"{name.admin_path}/stats.*JSON object"):
            collect_topic_stats(client, name.topic, web_url=None, timeout=1.0)  # type: ignore[arg-type]
        return
    with field_warnings():
        topic = parse_topic(name, stats, bundle="0x00000000_0x40000000", owner="b:8080")
        rows = parse_subscriptions(name.topic, stats)
    assert_well_formed(
        snapshot_of(
            topics=(topic,),
            subscriptions=rows.subscriptions,
            consumers=rows.consumers,
            draining_hashes=rows.draining_hashes,
        )
    )


@props(100)
@given(st.sampled_from(BULK_STATS).flatmap(mutated), weird_names)
def test_bulk_topic_stats_parse_or_leave_out(payload: Any, broker: str) -> None:
    """broker-stats/topics: every entry kept names a topic and carries an object of stats."""
    for entry in parse_broker_topic_stats(payload, broker):
        assert "://" in entry.topic and isinstance(entry.stats, dict)


# ---- brokers: leader, load reports, ownership --------------------------------------------------


@props(200)
@given(
    st.sampled_from(LOAD_REPORTS).flatmap(mutated) | bad_values,
    st.sampled_from(LEADERS).flatmap(mutated) | bad_values,
    st.sampled_from(OWNED).flatmap(mutated),
)
@example({}, {"serviceUrl": "http://[::1"}, {}).via("serviceUrl urlsplit refuses (ValueError)")
@example({}, {"brokerId": "\ud800"}, {}).via("a leader id that is not text")
@example(
    {"cpu": {"usage": 1e17, "limit": 1e-300}, "memory": {"usage": 1.0, "limit": -0.0}}, {}, {}
).via("usage / limit overflows to inf (no canonical JSON)")
@example({"webServiceUrl": "\udc80", "brokerVersionString": "\x00\ud800"}, {}, {}).via(
    "lone surrogates in the load report's text"
)
def test_broker_parsers_give_well_formed_rows(report: Any, leader: Any, owned: Any) -> None:
    with field_warnings():
        leader_id = parse_leader(leader)
        keys = parse_owned_bundles(owned)
        broker = parse_broker("127.0.0.1:8080", web_url=None, leader=leader_id, load_report=report)
    assert leader_id is None or isinstance(leader_id, str)
    assert all(isinstance(k, str) for k in keys)
    for pct in (broker.cpu_usage_pct, broker.memory_usage_pct):
        assert pct is None or math.isfinite(pct)
    assert_well_formed(snapshot_of(brokers=(broker,)))


LB_METRICS = [
    {
        "metrics": {"brk_lb_unload_broker_total": 1, "brk_lb_unload_bundle_total": 1},
        "dimensions": {"cluster": "local", "metric": "bundleUnloading"},
    },
    {"metrics": {"brk_lb_bundles_split_total": 2}, "dimensions": {"metric": "bundlesSplit"}},
    {
        "metrics": {"brk_lb_unload_broker_breakdown_total": 1},
        "dimensions": {"metric": "bundleUnloading", "result": "Success", "reason": "Admin"},
    },
]


@props(150)
@given(mutated(LB_METRICS) | bad_values)
@example([{"metrics": {"brk_lb_unload_bundle_total": 2**70}}]).via("no int64")
@example([{"metrics": {"brk_lb_unload_bundle_total": True}}]).via("a bool is no count")
@example([{"metrics": {"brk_lb_unload_bundle_total": float("nan")}}]).via("NaN")
def test_lb_counters_are_counts_or_unknown(payload: Any) -> None:
    with field_warnings():
        counters = parse_lb_counters(payload)
        broker = parse_broker("127.0.0.1:8080", web_url=None, leader=None, lb=counters)
    for value in (counters.bundles_unloaded, counters.bundles_split):
        assert value is None or (isinstance(value, int) and 0 <= value < 2**63)
    assert_well_formed(snapshot_of(brokers=(broker,)))


# ---- namespaces: bundles, partitions -----------------------------------------------------------


@props(150)
@given(st.sampled_from(BUNDLES).flatmap(mutated) | bad_values)
def test_bundles_answer_is_boundaries_or_a_clear_error(payload: Any) -> None:
    path = "/admin/v2/namespaces/public/default/bundles"
    client = FakeAdmin({(path, ""): payload})
    try:
        accepted = collect_bundles(client, "public/default", timeout=1.0)  # type: ignore[arg-type]
    except AdminApiError as exc:
        assert path in str(exc)
        assert any(word in str(exc) for word in ("boundaries", "numBundles", "bundle"))
        return
    records = parse_bundles("public/default", accepted)
    assert records[0].lower == 0 and records[-1].upper == 0xFFFFFFFF
    assert_well_formed(snapshot_of(bundles=records))


@props(100)
@given(bad_values | st.integers(min_value=0))
@example({"partitions": 10**9}).via("a partition count the broker never allows")
def test_partition_count_is_bounded_or_a_clear_error(payload: Any) -> None:
    path = "/admin/v2/persistent/public/default/p/partitions"
    client = FakeAdmin({(path, ""): payload})
    try:
        count = collect_partition_count(client, path[: -len("/partitions")], timeout=1.0)  # type: ignore[arg-type]
    except AdminApiError as exc:
        assert path in str(exc) and "partitions" in str(exc)
        return
    assert 0 <= count <= MAX_PARTITIONS


@props(100)
@given(weird_names | st.text(max_size=40))
def test_bundle_keys_parse_or_are_none(key: str) -> None:
    parsed = parse_bundle_key(key)
    if parsed is not None:
        namespace, bundle, lower, upper = parsed
        assert namespace and bundle and 0 <= lower < upper <= 0xFFFFFFFF


# ---- topic names -------------------------------------------------------------------------------

topic_texts = st.one_of(
    weird_names,
    st.text(max_size=30),
    st.builds(
        lambda dom, parts, suffix: f"{dom}{'/'.join(parts)}{suffix}",
        st.sampled_from(["", "persistent://", "PERSISTENT://", "non-persistent://", "http://"]),
        st.lists(st.sampled_from(["public", "default", "", " ", "a b", "ü", "x.y"]), max_size=5),
        st.sampled_from(["", "-partition-0", "-partition--1", "-partition-" + "9" * 12]),
    ),
)


@props(200)
@given(topic_texts)
@example("x-partition-" + "1" * 5000).via("Integer.parseInt of 5000 digits (ValueError, no name)")
@example("t/ns/\ud800").via("a lone surrogate")
def test_topic_names_parse_or_raise_topic_name_error(text: str) -> None:
    try:
        name = parse_topic_name(text)
    except TopicNameError as exc:
        assert str(exc)
        return
    assert parse_topic_name(name.topic) == name  # the full name reads back as itself
    name.admin_path.encode("ascii")
    try:
        topic_bundle((0, 0x40000000, 0xFFFFFFFF), text)
    except ModelError as exc:
        assert "0xffffffff" in str(exc)


# ---- single fields -------------------------------------------------------------------------


ranges_items = st.lists(st.integers() | bad_values, max_size=3)


@props(150)
@given(
    st.lists(ranges_items | bad_values, max_size=4),
    st.lists(
        st.builds(lambda a, b: f"[{a}, {b}]", st.integers(), st.integers()) | bad_values,
        max_size=4,
    ),
)
def test_hash_ranges_fit_the_column(arrays: Any, texts: Any) -> None:
    ranges = parse_hash_ranges({"keyHashRangeArrays": arrays, "keyHashRanges": texts})
    assert list(ranges) == sorted(ranges)
    for start, end in ranges:
        assert 0 <= start <= end <= INT32_MAX


@props(150)
@given(bad_values | st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()))
@example("0001-01-01T00:00:00+23:59").via("before year 1 in UTC")
@example("9999-12-31T23:59:59.999999-23:59").via("after year 9999 in UTC")
def test_time_fields_are_utc_or_none(value: Any) -> None:
    with field_warnings():
        read = [as_iso_time({"k": value}, "k"), as_epoch_ms({"k": value}, "k")]
        numbers = [as_int({"k": value}, "k"), as_float({"k": value}, "k")]
    for when in read:
        assert when is None or when.utcoffset() == dt.timedelta(0)
    assert numbers[0] is None or -(2**63) <= numbers[0] < 2**63
    assert numbers[1] is None or math.isfinite(numbers[1])
