"""/metrics families: collector health, cluster counts, bounded per-subscription series, the
analyses' facts, the per-snapshot cache and failing analyses; read back through the parser."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.api import AnalysisPlugin, Inputs, MetricsContext, Result, View
from pulsar_lens.core.digest import snapshot_id
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
)
from pulsar_lens.core.passes import PassProgress
from pulsar_lens.core.store import Store
from pulsar_lens.exporter.collector import LensCollector, PollRecorder
from pulsar_lens.exporter.facts import hook_errors_path, read_hook_errors
from pulsar_lens.exporter.families import (
    ClusterFacts,
    PollStats,
    compute_analysis_pass_families,
    compute_cluster_families,
    compute_collector_families,
    compute_plugin_error_families,
    exposition,
    top_subscriptions,
)
from pulsar_lens.exporter.server import MetricsSettings
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, MemoryStore, at, make_inputs, make_snapshot, read_by

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
SUB = "orders-ks"


def samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def names(found: Samples, name: str) -> list[dict[str, str]]:
    return sorted((dict(k[1]) for k in found if k[0] == name), key=lambda d: sorted(d.items()))


def sub(topic: str, name: str, backlog: int | None, **fields: Any) -> SubscriptionRecord:
    return SubscriptionRecord(topic, name, msg_backlog=backlog, **fields)


def facts(records: Sequence[SubscriptionRecord], **counts: int) -> ClusterFacts:
    snap = make_snapshot(subscriptions=records)
    frame = make_inputs([snap], ["subscriptions"]).tables["subscriptions"]
    return ClusterFacts(snapshot_id(snap), snap.collected_at, counts, frame)


def test_collector_families_report_the_last_poll_and_snapshot_age() -> None:
    stats = PollStats(
        polls=7,
        failed_polls=2,
        failed_writes=3,
        last_poll_at=at(30),
        last_duration_s=0.25,
        last_requests=11,
        last_errors=1,
    )
    found = samples(exposition(compute_collector_families(stats, newest_at=at(20), now=at(35))))
    assert value(found, "pulsar_lens_polls_total") == 7
    assert value(found, "pulsar_lens_failed_polls_total") == 2
    assert value(found, "pulsar_lens_failed_writes_total") == 3
    assert value(found, "pulsar_lens_last_poll_timestamp_seconds") == at(30).timestamp()
    assert value(found, "pulsar_lens_poll_duration_seconds") == 0.25
    assert value(found, "pulsar_lens_poll_requests") == 11
    assert value(found, "pulsar_lens_poll_endpoint_errors") == 1
    assert value(found, "pulsar_lens_snapshot_age_seconds") == 15


def test_collector_families_before_any_poll_have_only_the_totals() -> None:
    found = samples(exposition(compute_collector_families(PollStats(), newest_at=None, now=at(0))))
    totals = {"pulsar_lens_polls_total", "pulsar_lens_failed_polls_total"}
    writes_and_overruns = {"pulsar_lens_failed_writes_total", "pulsar_lens_overrun_polls_total"}
    assert {k[0] for k in found} == totals | writes_and_overruns
    assert value(found, "pulsar_lens_polls_total") == 0


def test_collector_families_say_a_poll_overran_its_interval_and_what_it_needs() -> None:
    stats = PollStats(
        polls=3,
        last_poll_at=at(30),
        last_duration_s=47.0,
        last_write_s=13.0,
        interval_s=30.0,
        overran=True,
        overrun_polls=2,
    )
    text = exposition(compute_collector_families(stats, newest_at=at(20), now=at(35)))
    found = samples(text)
    assert value(found, "pulsar_lens_poll_overrun") == 1
    assert value(found, "pulsar_lens_overrun_polls_total") == 2
    assert value(found, "pulsar_lens_poll_interval_seconds") == 30
    assert value(found, "pulsar_lens_poll_write_seconds") == 13
    assert (
        value(found, "pulsar_lens_poll_needed_interval_seconds") == 180
    )  # 2.5 x 60 s, a minute up
    (help_line,) = [
        x for x in text.splitlines() if x.startswith("# HELP pulsar_lens_poll_overrun ")
    ]
    for setting in ("POLL_INTERVAL", "POLL_DEADLINE", "DETAIL_BUDGET"):
        assert f"PULSAR_LENS_{setting}" in help_line


def test_collector_families_a_poll_within_its_interval_is_no_overrun() -> None:
    stats = PollStats(
        polls=1, last_poll_at=at(30), last_duration_s=4.0, interval_s=30.0, overran=False
    )
    found = samples(exposition(compute_collector_families(stats, newest_at=at(20), now=at(35))))
    assert value(found, "pulsar_lens_poll_overrun") == 0
    assert value(found, "pulsar_lens_overrun_polls_total") == 0
    assert value(found, "pulsar_lens_poll_needed_interval_seconds") == 10


def test_analysis_pass_families_report_the_last_pass_and_the_unanalysed_polls() -> None:
    progress = PassProgress(passes=61, finished_at=at(30), seconds=20.5, skipped=2, skipped_total=8)
    text = exposition(compute_analysis_pass_families(progress))
    found = samples(text)
    assert found == {
        ("pulsar_lens_analysis_passes_total", frozenset()): 61,
        ("pulsar_lens_unanalysed_snapshots_total", frozenset()): 8,
        ("pulsar_lens_analysis_pass_seconds", frozenset()): 20.5,
        ("pulsar_lens_last_analysis_pass_timestamp_seconds", frozenset()): at(30).timestamp(),
    }
    (help_line,) = [
        x
        for x in text.splitlines()
        if x.startswith("# HELP pulsar_lens_unanalysed_snapshots_total ")
    ]
    assert "PULSAR_LENS_POLL_INTERVAL" in help_line


def test_analysis_pass_families_before_the_first_pass_have_only_the_totals() -> None:
    found = samples(exposition(compute_analysis_pass_families(PassProgress())))
    assert found == {
        ("pulsar_lens_analysis_passes_total", frozenset()): 0,
        ("pulsar_lens_unanalysed_snapshots_total", frozenset()): 0,
    }
    assert compute_analysis_pass_families(None) == []  # a process that runs no passes


def test_lens_collector_serves_the_recorded_passes_unlabelled_beside_each_cluster() -> None:
    recorder = PollRecorder(["east", "west"])
    recorder.record_passes(
        PassProgress(passes=4, finished_at=at(3), seconds=9.0, skipped=1, skipped_total=3)
    )
    collector = LensCollector(MemoryStore(), recorder=recorder, plugins=[], now=lambda: at(4))
    found = scrape(collector)
    assert value(found, "pulsar_lens_unanalysed_snapshots_total") == 3
    assert value(found, "pulsar_lens_analysis_pass_seconds") == 9
    assert value(found, "pulsar_lens_analysis_passes_total") == 4


def test_top_subscriptions_keeps_the_largest_backlogs_ties_by_name() -> None:
    frame = facts(
        [sub("t/b", "s", 5), sub("t/a", "s", 5), sub("t/c", "s", None), sub("t/d", "s", 9)]
    ).subscriptions
    assert top_subscriptions(frame, 3) == [("t/d", "s"), ("t/a", "s"), ("t/b", "s")]
    assert top_subscriptions(frame, 0) == []
    assert top_subscriptions(frame.iloc[0:0], 5) == []


def test_cluster_families_count_tables_and_bound_subscription_series() -> None:
    cluster = facts(
        [
            sub("t/a", "s1", 10, msg_in_replay=3, draining_hashes_count=4),
            sub("t/b", "s1", 50, msg_in_replay=0),
            sub("t/c", "s1", 1),
        ],
        brokers=1,
        topics=3,
        subscriptions=3,
        consumers=5,
    )
    keep = top_subscriptions(cluster.subscriptions, 2)
    found = samples(exposition(compute_cluster_families(cluster, keep=keep)))
    assert [value(found, f"pulsar_lens_{t}") for t in ("brokers", "topics", "consumers")] == [
        1,
        3,
        5,
    ]
    assert value(found, "pulsar_lens_subscriptions") == 3
    backlog = "pulsar_lens_subscription_backlog_messages"
    assert names(found, backlog) == [
        {"topic": "t/a", "subscription": "s1"},
        {"topic": "t/b", "subscription": "s1"},
    ]
    assert value(found, backlog, topic="t/b", subscription="s1") == 50
    replay = "pulsar_lens_subscription_msg_in_replay"
    assert value(found, replay, topic="t/a", subscription="s1") == 3
    draining = "pulsar_lens_subscription_draining_hashes"
    assert names(found, draining) == [{"topic": "t/a", "subscription": "s1"}]  # b: unknown
    assert value(found, draining, topic="t/a", subscription="s1") == 4


def test_cluster_families_say_in_help_that_subscriptions_are_bounded() -> None:
    cluster = facts([sub("t/a", "s1", 1)])
    text = exposition(compute_cluster_families(cluster, keep=[("t/a", "s1")]))
    assert "# HELP pulsar_lens_subscription_backlog_messages" in text
    assert "largest backlog" in text


def key_shared_result(rows: Sequence[tuple[str, str, float, bool]]) -> Result:
    frame = pd.DataFrame(
        [{"topic": t, "subscription": s, "imbalance": i, "drift": d} for t, s, i, d in rows],
        columns=["topic", "subscription", "imbalance", "drift"],
    )
    return Result(frames={"subscriptions": frame}, summary={})


def stuck_snapshots() -> list[Snapshot]:
    consumers = (
        ConsumerRecord(TOPIC, SUB, "c1", hash_ranges=((1, 30000),), unacked_messages=4),
        ConsumerRecord(TOPIC, SUB, "c2", hash_ranges=((30001, 65535),)),
    )
    subscription = SubscriptionRecord(
        TOPIC, SUB, type="Key_Shared", msg_backlog=6, consumer_count=2, msg_in_replay=2
    )
    return [
        make_snapshot(
            i * 10,
            subscriptions=(subscription,),
            consumers=consumers,
            draining_hashes=(
                DrainingHashRecord(TOPIC, SUB, "c1", 40000, 3, 2 + i),
                DrainingHashRecord(TOPIC, SUB, "c1", 50000, 1, 1 + i),
            ),
        )
        for i in range(3)
    ]


HOOKS: dict[str, AnalysisPlugin] = {
    "key-shared-map": KeySharedMap(),
    "stuck-hashes": StuckHashes(),
    "subscription-status": SubscriptionStatus(),
    "failover-assignment": FailoverAssignment(),
    "bundle-ownership": BundleOwnership(),
}


def compute_analysis_families(
    results: Mapping[str, Result], *, keep: Sequence[tuple[str, str]], max_groups: int
) -> list[Any]:
    """What /metrics gets from these plugins' hooks for their results."""
    context = MetricsContext(subscriptions=tuple(keep), max_groups=max_groups)
    return [f for slug, result in results.items() for f in HOOKS[slug].metrics(result, context)]


def run_plugin(plugin: AnalysisPlugin, snapshots: Sequence[Snapshot]) -> Result:
    return run_on_inputs(plugin, make_inputs(snapshots, read_by(plugin))).result


def test_analysis_families_key_shared_and_stuck_hashes_per_subscription() -> None:
    other = SubscriptionRecord("t/x", "s", type="Key_Shared", consumer_count=1)
    snaps = [replace(s, subscriptions=(*s.subscriptions, other)) for s in stuck_snapshots()]
    results = {
        "stuck-hashes": run_plugin(StuckHashes(), snaps),
        "key-shared-map": key_shared_result([(TOPIC, SUB, 1.5, True), ("t/x", "s", 1.0, False)]),
    }
    keep = [(TOPIC, SUB), ("t/x", "s")]
    found = samples(exposition(compute_analysis_families(results, keep=keep, max_groups=10)))
    assert value(found, "pulsar_lens_stuck_hashes", topic=TOPIC, subscription=SUB) == 2
    assert value(found, "pulsar_lens_stuck_hashes", topic="t/x", subscription="s") == 0
    assert value(found, "pulsar_lens_key_shared_imbalance", topic=TOPIC, subscription=SUB) == 1.5
    assert value(found, "pulsar_lens_key_shared_drift", topic=TOPIC, subscription=SUB) == 1
    assert value(found, "pulsar_lens_key_shared_drift", topic="t/x", subscription="s") == 0


def test_analysis_families_leave_out_subscriptions_beyond_the_bound() -> None:
    results = {"key-shared-map": key_shared_result([(TOPIC, SUB, 1.5, True)])}
    found = samples(exposition(compute_analysis_families(results, keep=[], max_groups=10)))
    assert names(found, "pulsar_lens_key_shared_imbalance") == []


def test_analysis_families_status_one_series_per_subscription_and_time_lag() -> None:
    earliest = at(-90)
    snap = make_snapshot(
        0,
        subscriptions=(
            sub(TOPIC, "idle", 5, consumer_count=0, earliest_msg_publish_time_in_backlog=earliest),
            sub(TOPIC, "done", 0, consumer_count=1),
        ),
    )
    results = {"subscription-status": run_plugin(SubscriptionStatus(), [snap])}
    keep = [(TOPIC, "idle"), (TOPIC, "done")]
    found = samples(exposition(compute_analysis_families(results, keep=keep, max_groups=10)))
    status = "pulsar_lens_subscription_status"
    assert names(found, status) == [
        {"topic": TOPIC, "subscription": "done", "status": "OK"},
        {"topic": TOPIC, "subscription": "idle", "status": "STOP"},
    ]
    assert value(found, status, topic=TOPIC, subscription="idle", status="STOP") == 1
    lag = "pulsar_lens_subscription_time_lag_seconds"
    assert value(found, lag, topic=TOPIC, subscription="idle") == 90
    assert value(found, lag, topic=TOPIC, subscription="done") == 0


def failover_snapshot(seconds: float, active: Sequence[str]) -> Snapshot:
    topics = [f"{TOPIC}-partition-{i}" for i in range(len(active))]
    return make_snapshot(
        seconds,
        subscriptions=tuple(
            SubscriptionRecord(t, "fo", type="Failover", consumer_count=2, active_consumer_name=a)
            for t, a in zip(topics, active, strict=True)
        ),
        consumers=tuple(ConsumerRecord(t, "fo", n) for t in topics for n in ("a", "b")),
    )


def test_analysis_families_failover_imbalance_and_flapping() -> None:
    snaps = [
        failover_snapshot(0, ["a", "a", "b"]),
        failover_snapshot(10, ["b", "a", "b"]),
        failover_snapshot(20, ["a", "a", "a"]),
    ]
    result = run_plugin(FailoverAssignment(), snaps)
    (group,) = result.frames["groups"].to_dict("records")
    found = samples(
        exposition(
            compute_analysis_families({"failover-assignment": result}, keep=[], max_groups=10)
        )
    )
    labels = {"group": group["label"], "subscription": "fo"}
    assert value(found, "pulsar_lens_failover_imbalance", **labels) == pytest.approx(2.0)
    assert value(found, "pulsar_lens_failover_overload", **labels) == pytest.approx(1.5)
    assert value(found, "pulsar_lens_failover_flapping_partitions", **labels) == 1


def bundle_snapshot(seconds: float, owner: str | None) -> Snapshot:
    bundle = BundleRecord("public/default", "public", "0x00000000_0xffffffff", 0, 0xFFFFFFFF)
    return make_snapshot(seconds, bundles=(replace(bundle, owner_broker=owner),))


def test_analysis_families_bundle_ownership_events_by_kind() -> None:
    owners = ["b1:8080", "b2:8080", None, "b2:8080", "b1:8080"]
    snaps = [bundle_snapshot(i * 10, owner) for i, owner in enumerate(owners)]
    result = run_plugin(BundleOwnership(), snaps)
    found = samples(
        exposition(compute_analysis_families({"bundle-ownership": result}, keep=[], max_groups=1))
    )
    events = "pulsar_lens_bundle_ownership_events"
    assert value(found, events, kind="moved") == 2
    assert value(found, events, kind="unloaded") == 1
    assert value(found, events, kind="reacquired") == 1


def test_plugin_error_families_flag_only_the_failed() -> None:
    found = samples(exposition(compute_plugin_error_families(["a", "b"], ["b", "c"])))
    assert value(found, "pulsar_lens_plugin_errors", plugin="a") == 0
    assert value(found, "pulsar_lens_plugin_errors", plugin="b") == 1
    assert value(found, "pulsar_lens_plugin_errors", plugin="c") == 1


class Broken(AnalysisPlugin):
    name = "broken"
    title = "Broken"
    description = "Always fails."
    version = "1.0"
    inputs = ("subscriptions",)
    outputs = ("x",)

    def analyze(self, data: Inputs, params: Any) -> Result:
        raise RuntimeError("boom")

    def render(self, result: Result) -> list[View]:
        return []


def cluster_snapshot(seconds: float, backlog: int) -> Snapshot:
    return make_snapshot(
        seconds,
        brokers=(BrokerRecord("127.0.0.1:8080"),),
        topics=(TopicRecord(TOPIC, "public", "public/default"),),
        subscriptions=(sub(TOPIC, SUB, backlog, type="Shared", consumer_count=1),),
        consumers=(ConsumerRecord(TOPIC, SUB, "c1"),),
    )


def scrape(collector: LensCollector) -> Samples:
    return samples(exposition(list(collector.collect())))


def test_lens_collector_computes_once_per_new_snapshot() -> None:
    store = MemoryStore([cluster_snapshot(0, 3)])
    collector = LensCollector(store, plugins=[SubscriptionStatus()], now=lambda: at(4))
    first = scrape(collector)
    reads = len(store.reads)
    again = scrape(collector)
    assert collector.computations == 1 and len(store.reads) == reads
    assert first == again
    assert value(first, "pulsar_lens_snapshot_age_seconds") == 4
    assert value(first, "pulsar_lens_consumers") == 1
    store.items.append(cluster_snapshot(10, 8))
    newer = scrape(collector)
    assert collector.computations == 2
    backlog = "pulsar_lens_subscription_backlog_messages"
    assert value(newer, backlog, topic=TOPIC, subscription=SUB) == 8


def test_lens_collector_a_failing_analysis_sets_plugin_errors_only() -> None:
    store = MemoryStore([cluster_snapshot(0, 3)])
    collector = LensCollector(store, plugins=[Broken(), SubscriptionStatus()], now=lambda: at(1))
    found = scrape(collector)
    assert value(found, "pulsar_lens_plugin_errors", plugin="broken") == 1
    assert value(found, "pulsar_lens_plugin_errors", plugin="subscription-status") == 0
    status = "pulsar_lens_subscription_status"
    assert value(found, status, topic=TOPIC, subscription=SUB, status="OK") == 1


class Labeller(AnalysisPlugin):
    """A plugin whose hook labels its series with `cluster` itself."""

    name = "labeller"
    title = "Labeller"
    description = "Exports one series labelled cluster."
    version = "1.0"
    inputs = ("subscriptions",)
    outputs = ("x",)

    def analyze(self, data: Inputs, params: Any) -> Result:
        return Result(frames={"x": pd.DataFrame()})

    def render(self, result: Result) -> list[View]:
        return []

    def metrics(self, result: Result, context: MetricsContext) -> list[Any]:
        gauge = GaugeMetricFamily("pulsar_lens_labelled", "A labelled series.", labels=["cluster"])
        gauge.add_metric(["mine"], 1.0)
        return [gauge]


def test_lens_collector_of_several_clusters_labels_each_clusters_families(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    store.write(replace(cluster_snapshot(0, 3), cluster="east"))
    store.write(replace(cluster_snapshot(1, 8), cluster="west"))
    recorder = PollRecorder(["east", "west"])
    plugins = [SubscriptionStatus(), Labeller()]
    collector = LensCollector(store, recorder=recorder, plugins=plugins, now=lambda: at(5))
    found = scrape(collector)
    backlog = "pulsar_lens_subscription_backlog_messages"
    assert value(found, backlog, topic=TOPIC, subscription=SUB, cluster="east") == 3
    assert value(found, backlog, topic=TOPIC, subscription=SUB, cluster="west") == 8
    for cluster in ("east", "west"):
        assert value(found, "pulsar_lens_topics", cluster=cluster) == 1
        status = "pulsar_lens_subscription_status"
        assert value(found, status, topic=TOPIC, subscription=SUB, status="OK", cluster=cluster)
        errors = "pulsar_lens_plugin_errors"
        assert value(found, errors, plugin="subscription-status", cluster=cluster) == 0
        assert value(found, errors, plugin="labeller", cluster=cluster) == 1  # it set `cluster`
    assert names(found, "pulsar_lens_labelled") == []
    assert collector.computations == 2  # one per cluster; the next scrape builds nothing
    assert scrape(collector) == found and collector.computations == 2
    # with one cluster the scrape config names it: a plugin may use the label then
    single = LensCollector(store, plugins=[Labeller()], now=lambda: at(5))
    assert value(scrape(single), "pulsar_lens_labelled", cluster="mine") == 1


class Picky(Labeller):
    """A plugin whose hook fails on a cluster whose largest backlog is above 5."""

    name = "picky"

    def analyze(self, data: Inputs, params: Any) -> Result:
        backlog = int(data.latest("subscriptions")["msg_backlog"].max())
        return Result(frames={"x": pd.DataFrame()}, summary={"backlog": backlog})

    def metrics(self, result: Result, context: MetricsContext) -> list[Any]:
        if result.summary["backlog"] > 5:
            raise ValueError(f"a backlog of {result.summary['backlog']}")
        return []


def test_the_failed_hooks_of_each_cluster_are_kept_apart(tmp_path: Path) -> None:
    store = Store(tmp_path)
    east = store.write(replace(cluster_snapshot(0, 3), cluster="east"))
    west = store.write(replace(cluster_snapshot(1, 8), cluster="west"))
    recorder = PollRecorder(["east", "west"])
    collector = LensCollector(store, recorder=recorder, plugins=[Picky()], now=lambda: at(5))
    found = scrape(collector)
    errors = "pulsar_lens_plugin_errors"
    assert value(found, errors, plugin="picky", cluster="east") == 0
    assert value(found, errors, plugin="picky", cluster="west") == 1
    # the page of each cluster says what its own build said (the last build wrote west's)
    assert read_hook_errors(tmp_path, "east") == {
        "snapshot_id": east,
        "at": at(5).isoformat(),
        "failed": {},
    }
    west_said = read_hook_errors(tmp_path, "west")
    assert west_said["snapshot_id"] == west
    assert "a backlog of 8" in west_said["failed"]["picky"]
    assert read_hook_errors(tmp_path, "north") == {}  # no build of its own, none of the store
    # one cluster: the store's entry, which a chosen cluster without its own falls back to
    single = LensCollector(Store(tmp_path / "one"), plugins=[Picky()], now=lambda: at(5))
    Store(tmp_path / "one").write(cluster_snapshot(0, 9))
    scrape(single)
    assert "picky" in read_hook_errors(tmp_path / "one")["failed"]
    assert read_hook_errors(tmp_path / "one", "any") == read_hook_errors(tmp_path / "one")


def test_a_poll_counted_during_a_scrape_comes_with_the_snapshot_it_stored(
    tmp_path: Path,
) -> None:
    """A scrape reads the tally of polls once: a cluster whose poll is stored and counted
    while a scrape is under way has, in each scrape, its count with the age of the snapshot
    that poll stored, or neither."""
    store = Store(tmp_path)

    class Landing(PollRecorder):
        """East's first poll is stored and counted when the tally is read a second time."""

        reads = 0

        def by_cluster(self) -> dict[str, PollStats]:
            self.reads += 1
            if self.reads == 2:
                store.write(replace(cluster_snapshot(0, 3), cluster="east"))
                self.record(
                    at=at(0), duration=1.0, requests=3, errors=0, failed=False, cluster="east"
                )
            return super().by_cluster()

    recorder = Landing(["east", "west"])
    collector = LensCollector(store, recorder=recorder, plugins=[], now=lambda: at(5))
    for _ in range(2):
        found = scrape(collector)
        polls = value(found, "pulsar_lens_polls_total", cluster="east")
        aged = ("pulsar_lens_snapshot_age_seconds", frozenset({("cluster", "east")})) in found
        assert aged == (polls == 1), (polls, aged)
    assert value(found, "pulsar_lens_snapshot_age_seconds", cluster="east") == 5.0


def test_a_hooks_file_of_one_entry_is_the_stores(tmp_path: Path) -> None:
    path = hook_errors_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"snapshot_id": "s", "at": "t", "failed": {"p": "why"}}', encoding="utf-8")
    assert read_hook_errors(tmp_path)["failed"] == {"p": "why"}
    assert read_hook_errors(tmp_path, "east")["failed"] == {"p": "why"}
    path.write_text("[1, 2]", encoding="utf-8")
    assert read_hook_errors(tmp_path) == {}


def test_lens_collector_on_an_empty_store_reports_the_loop_only() -> None:
    recorder = PollRecorder()
    recorder.record(at=at(0), duration=0.5, requests=1, errors=1, failed=True)
    collector = LensCollector(MemoryStore(), recorder=recorder, plugins=[], now=lambda: at(1))
    found = scrape(collector)
    assert value(found, "pulsar_lens_failed_polls_total") == 1
    assert "pulsar_lens_snapshot_age_seconds" not in {k[0] for k in found}
    assert "pulsar_lens_analysis_passes_total" not in {k[0] for k in found}  # none recorded


def test_lens_collector_runs_the_builtin_analyses_by_default() -> None:
    store = MemoryStore([cluster_snapshot(0, 3), cluster_snapshot(10, 3)])
    found = scrape(LensCollector(store, now=lambda: at(11)))
    plugins = {d["plugin"] for d in names(found, "pulsar_lens_plugin_errors")}
    assert plugins == {
        "key-shared-map",
        "stuck-hashes",
        "subscription-status",
        "failover-assignment",
        "bundle-ownership",
        "unload-latency",
    }
    assert {
        p: value(found, "pulsar_lens_plugin_errors", plugin=p) for p in plugins
    } == dict.fromkeys(plugins, 0)  # MemoryStore reads timed tables by time, as the store does


def settings(env: Mapping[str, str], **kwargs: Any) -> MetricsSettings:
    return MetricsSettings.from_env(env, **kwargs)


def test_metrics_settings_from_env_and_the_command_line() -> None:
    assert settings({}) == MetricsSettings(port=0, address="127.0.0.1", max_subscriptions=500)
    env = {
        "PULSAR_LENS_METRICS_PORT": "9999",
        "PULSAR_LENS_METRICS_ADDRESS": "0.0.0.0",
        "PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS": "20",
    }
    assert settings(env) == MetricsSettings(port=9999, address="0.0.0.0", max_subscriptions=20)
    assert settings(env, port=0).port == 0


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("PULSAR_LENS_METRICS_PORT", "http"),
        ("PULSAR_LENS_METRICS_PORT", "70000"),
        ("PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS", "0"),
        ("PULSAR_LENS_EXTERNAL_URL", "lens.example.com"),
        ("PULSAR_LENS_EXTERNAL_URL", "ftp://lens.example.com"),
        ("PULSAR_LENS_EXTERNAL_URL", "https://lens.example.com/?page=1"),
        ("PULSAR_LENS_EXTERNAL_URL", "https://lens.example.com/#top"),
        ("PULSAR_LENS_EXTERNAL_URL", "https://user:secret@lens.example.com"),
        ("PULSAR_LENS_EXTERNAL_URL", "https://lens.example.com/a b"),
        ("PULSAR_LENS_EXTERNAL_URL", "https://lens.example.com:http"),
    ],
)
def test_metrics_settings_reject_malformed_values(name: str, text: str) -> None:
    with pytest.raises(SettingsError, match=name):
        settings({name: text})


def test_metrics_external_url_is_served_as_the_dashboard_info(tmp_path: Path) -> None:
    """PULSAR_LENS_EXTERNAL_URL, its trailing slash dropped, is `pulsar_lens_dashboard_info{url}`
    (what the alerts' and Grafana's links start with); unset, the series is not served."""
    env = {"PULSAR_LENS_EXTERNAL_URL": " https://lens.example.com/pulsar/ "}
    assert settings(env).external_url == "https://lens.example.com/pulsar"
    assert settings({}).external_url == ""
    store = Store(tmp_path)
    linked = LensCollector(store, plugins=[], dashboard_url=settings(env).external_url)
    found = scrape(linked)
    assert value(found, "pulsar_lens_dashboard_info", url="https://lens.example.com/pulsar") == 1
    assert "pulsar_lens_dashboard_info" not in {
        name for name, _ in scrape(LensCollector(store, plugins=[]))
    }


def test_poll_recorder_counts_polls_and_keeps_the_last() -> None:
    recorder = PollRecorder()
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    recorder.record(at=when, duration=1.0, requests=3, errors=0, failed=False)
    recorder.record(at=when, duration=2.0, requests=1, errors=4, failed=True)
    recorder.record(at=when, duration=1.5, requests=3, errors=0, failed=False, not_stored=True)
    assert recorder.stats() == PollStats(
        polls=3,
        failed_polls=1,
        failed_writes=1,
        last_poll_at=when,
        last_duration_s=1.5,
        last_requests=3,
        last_errors=0,
    )


def test_lens_collector_a_plugin_that_failed_to_load_reads_1_on_the_first_scrape(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector discovers the plugins at its first computation: the load failures
    found then must be in that very first answer, not only from the second snapshot on."""
    (tmp_path / "unloadable.py").write_text("raise RuntimeError('cannot import')\n")
    store = MemoryStore([cluster_snapshot(0, 3)])
    collector = LensCollector(store, plugin_dirs=[tmp_path], now=lambda: at(1))
    found = scrape(collector)
    assert collector.computations == 1
    assert value(found, "pulsar_lens_plugin_errors", plugin=str(tmp_path / "unloadable.py")) == 1
    assert value(found, "pulsar_lens_plugin_errors", plugin="subscription-status") == 0


def test_kept_rows_are_the_kept_pairs_rows_in_order_and_nothing_else() -> None:
    frame = pd.DataFrame(
        {
            "topic": ["t1", "t2", "t1", None, "tø 🚀", "t3"],
            "subscription": ["s", "s", "s", "s", "s", None],
            "value": [1.0, 2.0, 3.0, 4.0, float("nan"), 6.0],
        }
    ).astype({"topic": "string[pyarrow]"})
    context = MetricsContext(
        subscriptions=(("t1", "s"), ("None", "s"), ("tø 🚀", "s"), ("t3", "None"))
    )
    old = [  # what every metrics() hook did: convert every row, then keep some
        r for r in frame.to_dict("records") if context.keeps(r["topic"], r["subscription"])
    ]
    kept = context.kept_rows(frame)
    # both t1 rows, in order; a missing topic (pd.NA) is None in a row, so "None" to keeps;
    # a missing subscription of a str column is NaN, "nan"
    assert [(r["topic"], r["value"]) for r in kept] == [
        ("t1", 1.0),
        ("t1", 3.0),
        (None, 4.0),
        ("tø 🚀", kept[3]["value"]),
    ]
    assert len(kept) == len(old)
    for mine, theirs in zip(kept, old, strict=True):
        assert mine.keys() == theirs.keys()
        assert all(mine[k] is theirs[k] or mine[k] == theirs[k] or pd.isna(mine[k]) for k in mine)
    assert MetricsContext().kept_rows(frame) == [] == context.kept_rows(frame.iloc[:0])
