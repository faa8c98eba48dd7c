"""sticky-ranges: gaps, overlaps, reader groups, sampled keys and the consistent-hashing planner."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pandas as pd
import pytest
import responses

from pulsar_lens.api import Chart, Inputs, Metric, Note, Table
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.assignments import Consumer
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.keyshared.ranges import owner_array
from pulsar_lens.core.model import (
    BrokerRecord,
    ConsumerRecord,
    HashRange,
    KeySampleRecord,
    Snapshot,
    SubscriptionRecord,
    records_to_table,
)
from pulsar_lens.core.selectors import StickySelector
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges, plan_ranges
from pulsar_lens.plugins.runner import RunOutput, run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, at, make_inputs, make_snapshot
from tests.collectors import recorded
from tests.markdown import shown

PLUGIN = StickyRanges()
LABEL = f"{TOPIC} | st"


def consumer(name: str, ranges: Sequence[HashRange], *, sub: str = "st") -> ConsumerRecord:
    return ConsumerRecord(TOPIC, sub, name, hash_ranges=tuple(ranges), connected_since=at(0))


def sticky(*consumers: ConsumerRecord, sub: str = "st") -> SubscriptionRecord:
    return SubscriptionRecord(
        TOPIC, sub, type="Key_Shared", key_shared_mode="STICKY", consumer_count=len(consumers)
    )


LOW = consumer("low", [(0, 9999), (40000, 49999)])
HIGH = consumer("high", [(50000, 65535), (10000, 20000)])
GAPPED = make_snapshot(0, subscriptions=(sticky(LOW, HIGH),), consumers=(LOW, HIGH))


def with_samples(inputs: Inputs, keys: Sequence[str], topic: str = TOPIC) -> Inputs:
    snapshot_id = str(inputs.snapshots["snapshot_id"].iloc[-1])
    table = records_to_table(
        "key_samples",
        [KeySampleRecord(topic, k, sticky_key_hash(k.encode(), selector="sticky")) for k in keys],
        snapshot_id=snapshot_id,
        collected_at=at(0),
        cluster="standalone",
    )
    return Inputs(
        tables={**inputs.tables, "key_samples": table.to_pandas()}, snapshots=inputs.snapshots
    )


def analyze(snapshots: Sequence[Snapshot], keys: Sequence[str] = (), **params: Any) -> RunOutput:
    inputs = make_inputs(snapshots, PLUGIN.inputs)
    if keys:
        inputs = with_samples(inputs, keys)
    return run_on_inputs(PLUGIN, inputs, params)


def test_sticky_ranges_gap_is_the_uncovered_run() -> None:
    output = analyze([GAPPED])
    gaps = output.result.frames["gaps"]
    assert gaps[["start", "end", "size", "routable_hashes"]].values.tolist() == [
        [20001, 39999, 19999, 19999]
    ]
    group = output.result.frames["groups"].iloc[0]
    assert (group["kind"], group["gap_hashes"], group["covered_hashes"]) == ("sticky", 19999, 45536)
    assert output.result.frames["overlaps"].empty
    assert any(isinstance(v, Note) and v.level == "warning" for v in output.views)


def test_sticky_ranges_hash_zero_alone_does_not_stall() -> None:
    only = consumer("all-but-zero", [(1, 65535)])
    snap = make_snapshot(0, subscriptions=(sticky(only),), consumers=(only,))
    output = analyze([snap])
    gaps = output.result.frames["gaps"]
    assert gaps[["start", "end", "routable_hashes"]].values.tolist() == [[0, 0, 0]]
    assert output.result.summary["gap_hashes"] == 0


def test_sticky_ranges_overlap_names_both_consumers() -> None:
    stale = consumer("stale", [(9000, 10500)])
    snap = make_snapshot(0, subscriptions=(sticky(LOW, HIGH, stale),), consumers=(LOW, HIGH, stale))
    overlaps = analyze([snap]).result.frames["overlaps"]
    assert overlaps[["start", "end", "covered_by"]].values.tolist() == [[9000, 10500, 2]]
    assert list(overlaps["consumers"]) == ["low, high, stale"]


def test_sticky_ranges_readers_with_ranges_form_a_group_per_topic() -> None:
    readers = [
        consumer("r1", [(0, 40000)], sub="reader-a"),
        consumer("r2", [(30000, 65535)], sub="reader-b"),
    ]
    subs = [SubscriptionRecord(TOPIC, c.subscription, type="Exclusive") for c in readers]
    output = analyze([make_snapshot(0, subscriptions=subs, consumers=readers)])
    group = output.result.frames["groups"].iloc[0]
    assert (group["label"], group["kind"], group["gap_hashes"]) == (
        f"{TOPIC} | readers",
        "readers",
        0,
    )
    overlaps = output.result.frames["overlaps"]
    assert overlaps[["start", "end", "consumers"]].values.tolist() == [
        [30000, 40000, "reader-a/r1, reader-b/r2"]
    ]


def test_sticky_ranges_auto_split_subscriptions_are_not_sticky_groups() -> None:
    ks = ConsumerRecord(TOPIC, "ks", "c", hash_ranges=((1, 65535),))
    sub = SubscriptionRecord(TOPIC, "ks", type="Key_Shared", key_shared_mode="AUTO_SPLIT")
    output = analyze([make_snapshot(0, subscriptions=(sub,), consumers=(ks,))])
    assert output.result.frames["groups"].empty


def test_sticky_ranges_counts_sampled_keys_in_gaps() -> None:
    keys = [f"key-{i}" for i in range(500)]
    output = analyze([GAPPED], keys)
    hashes = [sticky_key_hash(k.encode(), selector="sticky") for k in keys]
    in_gap = sum(20001 <= h <= 39999 for h in hashes)
    group = output.result.frames["groups"].iloc[0]
    assert (group["sampled_keys"], group["sampled_keys_in_gaps"]) == (500, in_gap)
    assert output.result.frames["gaps"]["sampled_keys"].tolist() == [in_gap]
    consumers = output.result.frames["consumers"].set_index("consumer_name")
    assert abs(consumers["sampled_share"].sum() + in_gap / 500 - 1) < 1e-12


def test_sticky_ranges_plan_tiles_the_whole_space_and_the_broker_model_accepts_it() -> None:
    plan = plan_ranges(4, 50, prefix="node")
    flat = sorted(r for ranges in plan for r in ranges)
    assert flat[0][0] == 0 and flat[-1][1] == 65535
    assert all(a[1] + 1 == b[0] for a, b in pairwise(flat))
    selector = StickySelector()
    for i, ranges in enumerate(plan):
        selector.add(Consumer(f"node-{i}", ranges))  # raises on any conflict
    assert all(selector.select(h) is not None for h in range(0, 65536, 97))


def test_sticky_ranges_plan_balance_and_node_ranges() -> None:
    output = analyze([GAPPED], nodes=3, points=100, node_index=1)
    balance = output.result.frames["plan_balance"]
    assert balance["hashes"].sum() == 65535
    plan = output.result.summary["plan"]
    shares = balance["uniform_share"]
    assert plan["uniform_imbalance"] == shares.max() * 3
    assert abs(plan["uniform_stddev"] - shares.std(ddof=0)) < 1e-12
    assert plan["sampled_imbalance"] is None
    node = output.result.frames["plan"]
    mine = node[node["node_index"] == 1]
    assert plan["node_ranges"] == mine[["start", "end"]].values.tolist()
    assert plan["node"] == "node-1"


def test_sticky_ranges_plan_scored_on_sampled_keys() -> None:
    keys = [f"user-{i % 40}" for i in range(400)]  # 40 distinct keys: lumpy
    output = analyze([GAPPED], keys, nodes=5, points=20)
    plan = output.result.summary["plan"]
    balance = output.result.frames["plan_balance"]
    assert plan["samples"] == 400 and abs(balance["sampled_share"].sum() - 1) < 1e-12
    assert plan["sampled_imbalance"] == balance["sampled_share"].max() * 5


def test_sticky_ranges_sample_topic_filter() -> None:
    output = analyze([GAPPED], ["a", "b"], sample_topic="persistent://public/default/other")
    assert output.result.summary["plan"]["samples"] == 0


def test_sticky_ranges_param_choices() -> None:
    inputs = with_samples(make_inputs([GAPPED], PLUGIN.inputs), ["a"])
    choices = PLUGIN.param_choices(inputs)
    assert choices == {"subscription": ["", LABEL], "sample_topic": ["", TOPIC]}


def test_sticky_ranges_render_views() -> None:
    views = analyze([GAPPED]).views
    assert {Metric, Table, Chart, Note} <= {type(v) for v in views}
    charts = [v for v in views if isinstance(v, Chart)]
    coverage = charts[0].chart.to_dict()
    (data,) = coverage["datasets"].values()
    assert {row["lane"] for row in data} == {"low", "high", "(gap)"}


def test_sticky_ranges_empty_inputs() -> None:
    output = analyze([])
    assert output.result.frames["groups"].empty
    assert len(output.result.frames["plan"]) > 0  # the planner needs no snapshot
    assert isinstance(output.result.frames["gaps"], pd.DataFrame)


def test_sticky_ranges_owner_array_disjoint_and_overlapping() -> None:
    disjoint = owner_array([[(0, 2), (10, 11)], [(3, 4)]])
    assert disjoint[:13].tolist() == [0, 0, 0, 1, 1, -1, -1, -1, -1, -1, 0, 0, -1]
    assert disjoint[-1] == -1
    overlapping = owner_array([[(0, 5)], [(3, 8)]])  # the later owner wins
    assert overlapping[:10].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, -1]


# ---- which broker line's rules apply --------------------------------------------------------


def on(snapshot: Snapshot, version: str) -> Snapshot:
    return dataclasses.replace(snapshot, brokers=(BrokerRecord("b:8080", version=version),))


@pytest.mark.parametrize(("scenario", "version"), [("default", "4.0.7"), ("3.0-default", "3.0.7")])
def test_sticky_ranges_on_a_recorded_poll_says_which_rules_it_applied(
    scenario: str, version: str
) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        recorded.register(mock, scenario)
        polled = poll(AdminClient(recorded.BASE, retries=0))
    output = analyze([polled])
    line = version.rsplit(".", 1)[0]
    assert (output.result.summary["pulsar"], output.result.summary["broker_versions"]) == (
        line,
        [version],
    )
    notes = [shown(v.markdown) for v in output.views if isinstance(v, Note)]
    assert any(f"Pulsar {line} model (brokers: {version})" in n for n in notes)


def test_sticky_ranges_on_3_0_a_gap_between_one_consumers_ranges_is_its_own() -> None:
    split = consumer("split", [(0, 9999), (20000, 39999)])
    rest = consumer("rest", [(40000, 65535)])
    snap = make_snapshot(0, subscriptions=(sticky(split, rest),), consumers=(split, rest))
    for version, taken, stalled in (("3.0.7", "split", 0), ("4.0.7", None, 10000)):
        output = analyze([on(snap, version)])
        gaps = output.result.frames["gaps"]
        assert gaps[["start", "end"]].values.tolist() == [[10000, 19999]], version
        assert gaps["taken_by"].iloc[0] == taken, version
        assert output.result.summary["gap_hashes"] == stalled, version
    # on 3.0 the gap between two consumers' ranges still stalls
    assert analyze([on(GAPPED, "3.0.7")]).result.summary["gap_hashes"] == 19999


def test_sticky_ranges_on_3_0_hashes_sampled_keys_as_3_0_does() -> None:
    keys = [f"k{i}" for i in range(200)]
    inputs = with_samples(make_inputs([on(GAPPED, "3.0.7")], PLUGIN.inputs), keys)
    output = run_on_inputs(PLUGIN, inputs, {})
    in_gap = sum(
        20001 <= sticky_key_hash(k.encode(), selector="sticky", pulsar="3.0") <= 39999 for k in keys
    )
    assert output.result.frames["gaps"]["sampled_keys"].tolist() == [in_gap]


def test_sticky_ranges_counts_hash_0_as_routable_on_3_0_only() -> None:
    # 4.0 turns hash 0 into 1; 3.0 routes h31 % 65536 as it is, so a lone [0, 0] gap stalls
    a, b = consumer("a", [(1, 30000)]), consumer("b", [(30001, 65535)])
    snap = make_snapshot(0, subscriptions=(sticky(a, b),), consumers=(a, b))
    for version, stalled, space in (("3.0.7", 1, 65536), ("4.0.7", 0, 65535)):
        output = analyze([on(snap, version)])
        gaps = output.result.frames["gaps"]
        assert gaps[["start", "end", "routable_hashes"]].values.tolist() == [[0, 0, stalled]]
        group = output.result.frames["groups"].iloc[0]
        assert (group["gap_hashes"], group["covered_hashes"]) == (stalled, space - stalled)
        shares = output.result.frames["consumers"]["share"]
        assert abs(shares.sum() - (space - stalled) / space) < 1e-12, version
        assert output.result.summary["gap_hashes"] == stalled, version
        stalled_metric = [
            v for v in output.views if isinstance(v, Metric) and v.label == "Stalled hashes"
        ]
        assert ("0..65535" if stalled else "1..65535") in str(stalled_metric[0].help)
