"""failover-history on Spark equals the same rule on pandas, and counts what it must."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Metric, Note, Tabs, parse_topic_name
from pulsar_lens.core.failover import FailoverConsumer, compare_churn, compare_modes
from pulsar_lens.core.model import ConsumerRecord, SubscriptionRecord, TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.failover_history import FailoverHistory
from pulsar_lens.plugins.builtin.failover_history.frames import OUTPUT_TYPES
from pulsar_lens.plugins.builtin.failover_history.reference import pandas_result
from pulsar_lens.plugins.builtin.shared.failover import imbalance
from pulsar_lens.plugins.testing import make_snapshot

pytestmark = pytest.mark.spark

PLUGIN = FailoverHistory()
ORDERS = "persistent://public/default/orders"
PAYMENTS = "persistent://public/default/payments"
SINGLE = "persistent://public/default/single"

Active = Mapping[str, str | None]  # topic -> active consumer name
Connected = Mapping[str, Sequence[str]]  # topic -> connected consumer names


def part(parent: str, index: int) -> str:
    return f"{parent}-partition-{index}"


def topic_record(topic: str) -> TopicRecord:
    name = parse_topic_name(topic)
    return TopicRecord(
        topic,
        name.tenant,
        name.namespace,
        partitioned_topic=name.partitioned_topic,
        partition_index=name.partition_index,
    )


def poll_records(
    subscription: str, active: Active, connected: Connected, *, listed: bool
) -> dict[str, list[object]]:
    """One subscription's rows of a poll; `listed`: the poll has its topics' rows too."""
    return {
        "subscriptions": [
            SubscriptionRecord(
                t,
                subscription,
                type="Failover",
                active_consumer_name=a,
                consumer_count=len(connected[t]),
            )
            for t, a in active.items()
        ],
        "consumers": [ConsumerRecord(t, subscription, c) for t in active for c in connected[t]],
        "topics": [topic_record(t) for t in active] if listed else [],
    }


def write_poll(store: Store, seconds: float, parts: Sequence[dict[str, list[object]]]) -> None:
    tables: dict[str, list[object]] = {"subscriptions": [], "consumers": [], "topics": []}
    for records in parts:
        for name, rows in records.items():
            tables[name].extend(rows)
    snapshot = make_snapshot(
        seconds,
        subscriptions=tables["subscriptions"],
        consumers=tables["consumers"],
        topics=list(dict.fromkeys(tables["topics"])),  # two subscriptions, one topic
    )
    store.write(snapshot)


def run(store: Store, **params: object) -> runner.RunOutput:
    return runner.run(PLUGIN, store, params or None, use_cache=False, use_stored=False)


def assert_same(spark: Mapping[str, pd.DataFrame], plain: Mapping[str, pd.DataFrame]) -> None:
    assert set(spark) == set(plain) == set(OUTPUT_TYPES)
    for name, frame in plain.items():
        pd.testing.assert_frame_equal(spark[name], frame, obj=name)


# -- a hand-made history -------------------------------------------------------------------


@pytest.fixture(scope="module")
def hand(spark: object, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runner.RunOutput]:
    """`single` flaps once among the same consumers, then moves to a joining consumer;
    `orders` (6 partitions) is 4/2 on two consumers, then 2/2/2 once a third joins. Polls 1
    and 3 list no topic rows (the parent comes from the name)."""
    root = tmp_path_factory.mktemp("hand")
    store = Store(root)
    ab, abc = ["a", "b"], ["a", "b", "c"]
    singles = ["a", "b", "b", "c"]
    for i in range(4):
        consumers = ab if i < 2 else abc
        uneven = {part(ORDERS, p): ("a" if p < 4 else "b") for p in range(6)}
        modulo = {part(ORDERS, p): abc[p % 3] for p in range(6)}
        orders = uneven if i < 2 else modulo
        single_set = abc if i == 3 else ab
        write_poll(
            store,
            30.0 * i,
            [
                poll_records("fo", {SINGLE: singles[i]}, {SINGLE: single_set}, listed=i % 2 == 0),
                poll_records("fo", orders, dict.fromkeys(orders, consumers), listed=i % 2 == 0),
            ],
        )
    return root, run(store)


def test_one_flap_among_the_same_consumers_is_suspicious_a_move_to_a_joiner_is_not(
    hand: tuple[Path, runner.RunOutput],
) -> None:
    frames = hand[1].result.frames
    single = frames["partitions"].set_index("topic").loc[SINGLE]
    assert (single["changes"], single["suspicious"], single["last_active"]) == (2, 1, "c")
    assert single["label"] == f"fo @ {SINGLE}" and single["partition_index"] == -1
    orders = frames["partitions"][frames["partitions"]["parent_topic"] == ORDERS]
    assert sorted(orders["partition_index"]) == list(range(6))
    assert dict(zip(orders["partition_index"], orders["changes"], strict=True)) == {
        0: 0,
        1: 1,
        2: 1,
        3: 0,
        4: 0,
        5: 1,
    }
    assert orders["suspicious"].sum() == 0
    assert list(frames["partitions"]["changes"].head(1)) == [2]  # the top flapper first
    summary = hand[1].result.summary
    assert (summary["flaps"], summary["suspicious_flaps"], summary["partitions"]) == (5, 1, 7)


def test_imbalance_two_then_zero_after_a_join(hand: tuple[Path, runner.RunOutput]) -> None:
    frames = hand[1].result.frames
    label = f"fo @ {ORDERS}"
    groups = frames["groups"].set_index("label")
    assert list(frames["groups"]["label"]) == [label, f"fo @ {SINGLE}"]  # the worst first
    row = groups.loc[label]
    assert (row["polls"], row["partitions"], row["max_consumers"]) == (4, 6, 3)
    assert (row["worst_spread"], row["polls_imbalanced"], row["balanced_share"]) == (2, 2, 0.5)
    assert row["worst_ratio"] == imbalance([4, 2], 6)
    assert (row["changes"], row["suspicious"], row["flapping_partitions"]) == (3, 0, 3)
    single = groups.loc[f"fo @ {SINGLE}"]
    assert (single["worst_spread"], single["balanced_share"], single["suspicious"]) == (1, 1.0, 1)
    spread = frames["imbalance"][frames["imbalance"]["label"] == label]
    assert list(spread["spread"]) == [2, 2, 0, 0]
    assert list(spread["ratio"]) == [imbalance([4, 2], 6)] * 2 + [1.0, 1.0]
    timeline = frames["timeline"][frames["timeline"]["label"] == label]
    first, last = (
        timeline[timeline["collected_at"] == t] for t in spread["collected_at"].iloc[[0, -1]]
    )
    assert dict(zip(first["consumer_name"], first["partitions"], strict=True)) == {"a": 4, "b": 2}
    assert dict(zip(last["consumer_name"], last["partitions"], strict=True)) == {
        "a": 2,
        "b": 2,
        "c": 2,
    }
    assert hand[1].result.summary["worst_spread"] == 2
    assert hand[1].result.summary["worst_group"] == label


def test_what_if_moves_what_the_broker_rules_move(hand: tuple[Path, runner.RunOutput]) -> None:
    what_if = hand[1].result.frames["what_if"]
    orders = what_if[what_if["parent_topic"] == ORDERS].set_index(["scenario", "consumer"])
    abc = [FailoverConsumer(n) for n in "abc"]
    now = orders.loc[("now", "")]
    assert (
        now["moved_modulo"] == now["moved_consistent"] == len(compare_modes(ORDERS, 6, abc).moved)
    )
    assert (now["spread_modulo"], now["ratio_modulo"]) == (0, 1.0)
    for name in "abc":
        churn = compare_churn(ORDERS, 6, abc, [c for c in abc if c.name != name])
        row = orders.loc[("leave", name)]
        assert row["moved_modulo"] == len(churn.moved_modulo)
        assert row["moved_consistent"] == len(churn.moved_consistent)
        assert row["consumers"] == 2 and row["spread_modulo"] == 0
    assert orders.loc[("leave", "a"), "moved_modulo"] == 4  # 0,1,2,3 of 6 under i % n
    joiner = FailoverConsumer("what-if-joiner")
    churn = compare_churn(ORDERS, 6, abc, [*abc, joiner])
    joined = orders.loc[("join", "what-if-joiner")]
    assert (joined["moved_modulo"], joined["moved_consistent"]) == (
        len(churn.moved_modulo),
        len(churn.moved_consistent),
    )
    assert (joined["consumers"], joined["spread_modulo"]) == (4, 1)
    single = what_if[what_if["parent_topic"] == SINGLE]
    # a non-partitioned topic is always on the ring: both rules agree
    assert list(single["scenario"]) == ["join", "leave", "leave", "leave", "now"]
    assert (single["moved_modulo"] == single["moved_consistent"]).all()
    assert single.set_index("scenario").loc["now", "moved_modulo"] == 0


def test_hand_history_equals_pandas(hand: tuple[Path, runner.RunOutput]) -> None:
    root, output = hand
    plain = pandas_result(root)
    assert_same(output.result.frames, plain.frames)
    assert output.result.summary == plain.summary
    views = output.views
    assert [type(v) for v in views[:4]] == [Metric] * 4
    charts: list[object] = [v for v in views if isinstance(v, Chart)]
    charts += [c for v in views if isinstance(v, Tabs) for _, tab in v.tabs for c in tab]
    assert len(charts) == 4  # spread, one timeline per group, the what-if
    for view in charts:
        assert isinstance(view, Chart) and view.chart.to_dict()["$schema"]


# -- random histories ------------------------------------------------------------------------

GROUPS = {
    ("fo", ORDERS): [part(ORDERS, p) for p in range(4)],
    ("fo", SINGLE): [SINGLE],
    ("audit", ORDERS): [part(ORDERS, p) for p in range(4)],
    ("audit", PAYMENTS): [part(PAYMENTS, p) for p in range(3)],
}
POOL = ["c0", "c1", "c2", "c3", "c4"]


def random_history(root: Path, *, seed: int, polls: int) -> Store:
    """Consumers join and leave, active consumers stay, flap, vanish or name a consumer the
    stats do not list; some partitions miss a consumer; some polls list no topic rows."""
    rng = random.Random(seed)
    store = Store(root)
    members = {g: set(rng.sample(POOL, 2)) for g in GROUPS}
    active: dict[tuple[str, str], str | None] = {}
    for i in range(polls):
        parts = []
        listed = rng.random() < 0.6
        for (sub, parent), topics in GROUPS.items():
            group = members[(sub, parent)]
            if rng.random() < 0.25:
                group.symmetric_difference_update({rng.choice(POOL)})
            connected = {t: sorted(group) for t in topics}
            for t in topics:
                if connected[t] and rng.random() < 0.1:
                    connected[t].remove(rng.choice(connected[t]))
                before = active.get((sub, t))
                roll = rng.random()
                if not connected[t] or roll < 0.05:
                    active[(sub, t)] = None
                elif roll < 0.08:
                    active[(sub, t)] = "ghost"
                elif before not in connected[t] or roll > 0.75:
                    active[(sub, t)] = rng.choice(connected[t])
            chosen = {t: active[(sub, t)] for t in topics}
            parts.append(poll_records(sub, chosen, connected, listed=listed))
        parts.append(
            {
                "subscriptions": [SubscriptionRecord(SINGLE, "shared", "Shared", consumer_count=2)],
                "consumers": [ConsumerRecord(SINGLE, "shared", n) for n in ("s1", "s2")],
                "topics": [],
            }
        )
        write_poll(store, 30.0 * i, parts)
    return store


def test_spark_equals_pandas_on_a_random_history(spark: object, tmp_path: Path) -> None:
    random_history(tmp_path, seed=7, polls=30)
    output = run(Store(tmp_path), top=3, timeline_polls=20)
    plain = pandas_result(tmp_path, top=3, timeline_polls=20)
    assert_same(output.result.frames, plain.frames)
    assert output.result.summary == plain.summary
    summary = output.result.summary
    assert (summary["groups"], summary["polls"], summary["partitions"]) == (4, 30, 12)
    assert summary["flaps"] > 20 and 0 < summary["suspicious_flaps"] < summary["flaps"]
    frames = output.result.frames
    worst = sorted(frames["groups"]["label"].head(3))
    for name in ("imbalance", "timeline"):  # the worst groups over the newest polls only
        assert sorted(set(frames[name]["label"])) == worst
        assert frames[name]["collected_at"].nunique() == 20
    assert "ghost" in set(frames["timeline"]["consumer_name"])
    assert frames["what_if"]["scenario"].isin(["now", "leave", "join"]).all()
    assert set(frames["what_if"]["label"]) <= set(frames["groups"]["label"])


# -- nothing to show -------------------------------------------------------------------------


def _assert_empty(output: runner.RunOutput, *, polls: int) -> None:
    for name, types in OUTPUT_TYPES.items():
        frame = output.result.frames[name]
        assert frame.empty and list(frame.columns) == list(types)
        assert {c: str(t) for c, t in frame.dtypes.items()} == {
            c: str(pd.Series(dtype=t).dtype) for c, t in types.items()
        }
    assert output.result.summary["groups"] == 0 and output.result.summary["polls"] == polls
    assert [type(v) for v in output.views] == [Note]


def test_an_empty_store_gives_empty_frames(spark: object, tmp_path: Path) -> None:
    _assert_empty(run(Store(tmp_path)), polls=0)
    assert_same(run(Store(tmp_path)).result.frames, pandas_result(tmp_path).frames)


def test_a_store_without_failover_subscriptions_gives_empty_frames(
    spark: object, tmp_path: Path
) -> None:
    store = Store(tmp_path)
    for i in range(3):
        subs = [
            SubscriptionRecord(SINGLE, "shared", "Shared", consumer_count=1),
            SubscriptionRecord(ORDERS, "idle", "Failover", consumer_count=0),
        ]
        consumers = [ConsumerRecord(SINGLE, "shared", "s1")]
        store.write(make_snapshot(30.0 * i, subscriptions=subs, consumers=consumers))
    output = run(store)
    _assert_empty(output, polls=3)
    assert_same(output.result.frames, pandas_result(tmp_path).frames)


# -- the benchmark's synthetic cluster -------------------------------------------------------


def test_spark_equals_pandas_on_the_synthetic_cluster(spark: object, tmp_path: Path) -> None:
    """Two hours of the benchmark's cluster (partitioned and single Failover groups, flapping
    groups, restarting consumers, other subscription types beside them) at a small size."""
    from benchmarks.synth_store import generate

    generate(tmp_path, topics=400, days=2 / 24, interval=30.0)
    output = run(Store(tmp_path), top=5, timeline_polls=100)
    plain = pandas_result(tmp_path, top=5, timeline_polls=100)
    assert_same(output.result.frames, plain.frames)
    assert output.result.summary == plain.summary
    summary = output.result.summary
    assert summary["polls"] == 240 and summary["groups"] > 50
    assert summary["flaps"] > 0 and summary["suspicious_flaps"] > 0
    frames = output.result.frames
    assert set(frames["what_if"]["scenario"]) == {"now", "leave", "join"}
    assert frames["timeline"]["collected_at"].nunique() == 100
