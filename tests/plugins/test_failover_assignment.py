"""failover-assignment: observed vs modulo vs PIP-392, groups across topics, flapping."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pytest
import responses

from pulsar_lens.api import Chart, Metric, Note, Table
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.failover import FailoverConsumer, compute_topics
from pulsar_lens.core.model import ConsumerRecord, Snapshot, SubscriptionRecord
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment, consumer_names
from pulsar_lens.plugins.runner import RunOutput, run_on_inputs
from pulsar_lens.plugins.testing import make_inputs, make_snapshot
from tests.collectors import recorded
from tests.markdown import shown
from tests.plugins.failover_frames import assignment

PLUGIN = FailoverAssignment()
NS = "persistent://public/default"
WORKERS = ("w1", "w2", "w3", "w4", "w5")
SINGLES = {f"{NS}/single-{i}": 1 for i in range(10)}  # ten 1-partition topics


def partitions_of(topics: Mapping[str, int]) -> list[str]:
    return [f"{t}-partition-{i}" if n else t for t, n in topics.items() for i in range(max(n, 1))]


def poll_of(
    active: Mapping[str, str | None],
    *,
    seconds: float = 0.0,
    sub: str = "fo",
    names: Sequence[str] = WORKERS,
) -> Snapshot:
    subs = [
        SubscriptionRecord(
            t, sub, type="Failover", active_consumer_name=a, consumer_count=len(names)
        )
        for t, a in active.items()
    ]
    consumers = [ConsumerRecord(t, sub, n) for t in active for n in names]
    return make_snapshot(seconds, subscriptions=subs, consumers=consumers)


def rule(topics: Mapping[str, int], *, consistent: bool, names: Sequence[str] = WORKERS) -> dict:
    chosen = compute_topics(
        topics, [FailoverConsumer(n) for n in names], consistent_hashing=consistent
    )
    return {t: c.name for t, c in chosen.items()}


def analyze(snapshots: Sequence[Snapshot], **params: Any) -> RunOutput:
    return run_on_inputs(PLUGIN, make_inputs(snapshots, PLUGIN.inputs), params)


def only_group(output: RunOutput) -> dict[str, Any]:
    groups = output.result.frames["groups"]
    assert len(groups) == 1, groups
    return dict(groups.iloc[0])


def test_failover_modulo_skew_of_single_partition_topics() -> None:
    observed = rule(SINGLES, consistent=False)
    assert set(observed.values()) == {"w1"}  # partition 0 of each topic -> first by name
    output = analyze([poll_of(observed)])
    group = only_group(output)
    assert (group["mode"], group["topics"], group["partitions"]) == ("modulo", 10, 10)
    assert (group["imbalance"], group["overload"], group["unexplained"]) == (5.0, 5.0, 0)
    ring = rule(SINGLES, consistent=True)
    facts = output.result.summary["selection"]
    assert assignment(output.result, "alternative") == ring
    assert facts["partitions_moving"] == sum(name != "w1" for name in ring.values())
    consumers = output.result.frames["consumers"].set_index("consumer_name")
    assert consumers.loc["w1", "partitions"] == 10
    assert consumers["partitions_alternative"].to_dict() == {
        n: sum(v == n for v in ring.values()) for n in WORKERS
    }


def test_failover_overload_of_fewer_partitions_than_consumers_is_one() -> None:
    """One topic with three consumers for failover: one is active, as well as any rule can do.
    The imbalance reads 3 (1 over the fair 1/3); the overload 1 (1 over ceil(1/3))."""
    names = ("w1", "w2", "w3")
    group = only_group(analyze([poll_of({f"{NS}/audit": "w1"}, names=names)]))
    assert (group["partitions"], group["consumers"]) == (1, 3)
    assert (group["imbalance"], group["overload"]) == (3.0, 1.0)
    topics = {f"{NS}/pay": 4}
    two_of_four = dict(zip(partitions_of(topics), ("w1", "w1", "w2", "w3"), strict=True))
    group = only_group(analyze([poll_of(two_of_four, names=names)]))
    assert (group["imbalance"], group["overload"]) == (1.5, 1.0)  # ceil(4/3) = 2: the best


def test_failover_consistent_mode_offers_modulo_as_the_alternative() -> None:
    observed = rule(SINGLES, consistent=True)
    group = only_group(analyze([poll_of(observed)]))
    assert (group["mode"], group["alternative"]) == ("consistent", "modulo")
    assert group["imbalance_alternative"] == 5.0


def test_failover_recorded_partitioned_and_plain_topics_are_explained() -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        recorded.register(mock, "default")
        snapshot = poll(AdminClient(recorded.BASE, retries=0))
    output = analyze([snapshot])
    groups = output.result.frames["groups"].set_index("subscription")
    assert set(groups.index) == {"fo", "pfo"}
    assert groups["unexplained"].sum() == 0
    assert groups.loc["pfo", "partitions"] == 3 and groups.loc["fo", "partitions"] == 1
    parts = output.result.frames["partitions"].set_index("topic")
    assert parts.loc[f"{NS}/payments-partition-1", "observed"] == "pfo-2"
    assert parts.loc[f"{NS}/payments-partition-0", "modulo"] == "pfo-1"
    assert parts.loc[f"{NS}/orders", "partition_index"] == -1


def test_failover_unexplained_partitions_raise_the_priority_note() -> None:
    observed = dict.fromkeys(partitions_of(SINGLES), "w3")  # a level-0 group of one, say
    output = analyze([poll_of(observed)])
    group = only_group(output)
    assert (group["mode"], group["unexplained"]) == (
        "unexplained",
        10 - sum(v == "w3" for v in rule(SINGLES, consistent=False).values()),
    )
    notes = [v for v in output.views if isinstance(v, Note) and v.level == "warning"]
    assert notes and "priority" in notes[0].markdown


def test_failover_groups_join_topics_sharing_consumers_and_split_other_apps() -> None:
    app_a = dict.fromkeys([f"{NS}/a-{i}" for i in range(3)], "w1")
    app_b = dict.fromkeys([f"{NS}/b-{i}" for i in range(2)], "x1")
    first = poll_of(app_a)
    second = poll_of(app_b, names=("x1", "x2"))
    merged = make_snapshot(
        0,
        subscriptions=first.subscriptions + second.subscriptions,
        consumers=first.consumers + second.consumers,
    )
    groups = analyze([merged]).result.frames["groups"]
    assert sorted(groups["topics"]) == [2, 3]
    assert set(groups["label"]) == {
        f"fo @ 3 topics ({NS}/a-0, ...)",
        f"fo @ 2 topics ({NS}/b-0, ...)",
    }


def test_failover_flapping_counts_active_consumer_changes() -> None:
    topic = f"{NS}/flappy-partition-0"
    sequence = ["w1", "w2", "w1", None, "w1", "w2"]
    snaps = [poll_of({topic: a}, seconds=10.0 * i) for i, a in enumerate(sequence)]
    output = analyze(snaps, flap_changes=3)
    row = output.result.frames["partitions"].iloc[0]
    # a snapshot without an active consumer is skipped: w1 w2 w1 - w1 w2 is three changes
    assert (row["changes"], row["flapping"], row["seen"]) == (3, True, "w1, w2")
    assert len(output.result.frames["timeline"]) == 6
    assert any(
        isinstance(v, Chart) and v.title == "Active consumer over time" for v in output.views
    )
    assert not analyze(snaps, flap_changes=4).result.frames["partitions"]["flapping"].iloc[0]


def test_failover_matrix_marks_active_and_standby() -> None:
    topic = f"{NS}/solo-partition-0"
    matrix = analyze([poll_of({topic: "w1"})]).result.frames["matrix"]
    roles = dict(zip(matrix["consumer_name"], matrix["role"], strict=True))
    assert roles == {
        "w1": "active",
        "w2": "standby",
        "w3": "standby",
        "w4": "standby",
        "w5": "standby",
    }


def test_failover_param_choices_and_render() -> None:
    snapshot = poll_of(rule(SINGLES, consistent=False))
    choices = PLUGIN.param_choices(make_inputs([snapshot], PLUGIN.inputs))
    assert choices == {"subscription": ["", f"fo @ 10 topics ({NS}/single-0, ...)"]}
    views = analyze([snapshot]).views
    assert {Metric, Table, Chart} <= {type(v) for v in views}
    for view in views:
        if isinstance(view, Chart):
            assert view.chart.to_dict()


def test_failover_empty_inputs() -> None:
    output = analyze([])
    assert all(frame.empty for frame in output.result.frames.values())
    assert any(isinstance(v, Note) for v in output.views)


def test_failover_unknown_group_says_so() -> None:
    output = analyze([poll_of(rule(SINGLES, consistent=False))], subscription="other @ x")
    assert "selection" not in output.result.summary
    notes = [v for v in output.views if isinstance(v, Note) and v.level == "warning"]
    assert notes and "other @ x" in shown(notes[-1].markdown)


def test_failover_consumer_names_of_no_consumers_is_empty() -> None:
    assert consumer_names(pd.DataFrame()) == {}
    listed = pd.DataFrame(
        {
            "topic": ["t", "t", "u"],
            "subscription": ["s", "s", "s"],
            "consumer_name": ["b", "a", "a"],
        }
    )
    assert consumer_names(listed) == {("t", "s"): frozenset("ab"), ("u", "s"): frozenset("a")}


def test_failover_partitions_name_no_observed_consumer_as_none() -> None:
    topics = {f"{NS}/pay": 3}
    active = dict(zip(partitions_of(topics), ("w1", None, "w2"), strict=True))
    result = analyze([poll_of(active, names=("w1", "w2"))]).result
    assert assignment(result, "observed") == active


def recorded_snapshot(scenario: str) -> Snapshot:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        recorded.register(mock, scenario)
        return poll(AdminClient(recorded.BASE, retries=0))


def test_failover_on_3_0_says_pip_392_does_not_exist_and_keeps_modulo() -> None:
    # 3.0.7 has no activeConsumerFailoverConsistentHashing: no what-if, the modulo analysis stays
    output = analyze([recorded_snapshot("3.0-default")], subscription="")
    summary = output.result.summary
    assert (summary["pulsar"], summary["broker_versions"], summary["pip_392"]) == (
        "3.0",
        ["3.0.7"],
        False,
    )
    groups = output.result.frames["groups"].set_index("subscription")
    assert set(groups.index) == {"fo", "pfo"} and groups["unexplained"].sum() == 0
    assert groups.loc["pfo", "mode"] == "modulo" and groups.loc["pfo", "partitions"] == 3
    assert groups["alternative"].isna().all() and groups["imbalance_alternative"].isna().all()
    parts = output.result.frames["partitions"]
    assert parts["alternative"].isna().all() and not parts["moves"].astype(bool).any()
    assert output.result.frames["consumers"]["partitions_alternative"].isna().all()
    texts = [shown(v.markdown) for v in output.views if isinstance(v, Note)]
    assert any(
        "activeConsumerFailoverConsistentHashing" in t
        and "does not exist" in t
        and "Pulsar 3.0 model (brokers: 3.0.7)" in t
        for t in texts
    )
    assert not any(
        isinstance(v, Metric) and v.label.startswith("Moving with") for v in output.views
    )
    for view in output.views:
        if isinstance(view, Chart):
            assert view.chart.to_dict()
    # the 4.0.7 recording still offers the what-if
    on_4_0 = analyze([recorded_snapshot("default")])
    assert on_4_0.result.summary["pip_392"] is True
    assert any(isinstance(v, Metric) and v.label.startswith("Moving with") for v in on_4_0.views)


def test_failover_charts_draw_the_unexplained_and_flapping_partitions_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pulsar_lens.plugins.builtin.failover_assignment import views as drawn

    monkeypatch.setattr(drawn, "MAX_CHART_PARTITIONS", 3)
    expected = rule(SINGLES, consistent=False)
    topics = sorted(expected)
    elsewhere = {t: next(w for w in WORKERS if w != expected[t]) for t in topics}
    odd = {t: elsewhere[t] for t in topics[7:9]}  # neither rule puts them there
    flappy = topics[4:6]  # away and back twice, where the rules put them at the end
    polls = [
        poll_of(
            expected | odd | ({t: elsewhere[t] for t in flappy} if i % 2 == 0 else {}), seconds=i
        )
        for i in range(4)
    ]
    output = analyze(polls, flap_changes=2)
    charts = {v.title: v for v in output.views if isinstance(v, Chart)}
    matrix = charts[f"Active consumers of fo @ 10 topics ({NS}/single-0, ...)"]
    assert set(matrix.chart.data["topic"]) == {*topics[7:9], topics[4]}
    assert "Drawn: 3 of the 10 partitions, the unexplained ones first" in matrix.caption
    timeline = charts["Active consumer over time"]
    assert set(timeline.chart.data["topic"]) == {*flappy, topics[7]}
    assert "the flapping ones first, then the unexplained" in timeline.caption
    assert len(output.result.frames["matrix"]) == 10 * len(WORKERS)  # the result keeps all
    monkeypatch.setattr(drawn, "MAX_CHART_PARTITIONS", 10)
    shown_all = {v.title: v for v in analyze(polls, flap_changes=2).views if isinstance(v, Chart)}
    assert shown_all["Active consumer over time"].caption.endswith("was Failover.")
