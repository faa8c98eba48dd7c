"""stuck-hashes: streaks without progress, holders, invariant violations, held-back consumers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import Chart, Note, Table
from pulsar_lens.core.model import ConsumerRecord, DrainingHashRecord, Snapshot, SubscriptionRecord
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.stuck_hashes.classic import parse_positions
from pulsar_lens.plugins.runner import RunOutput, run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, at, make_inputs, make_snapshot, read_by

PLUGIN = StuckHashes()
SUB = "orders-ks"


def drain(consumer: str, hash_value: int, unack: int, blocked: int) -> DrainingHashRecord:
    return DrainingHashRecord(TOPIC, SUB, consumer, hash_value, unack, blocked)


def consumer(name: str, ranges: Sequence[tuple[int, int]], **fields: Any) -> ConsumerRecord:
    return ConsumerRecord(TOPIC, SUB, name, hash_ranges=tuple(ranges), **fields)


C1 = consumer("c1", [(1, 20000), (20001, 30000)], unacked_messages=12, last_acked_at=at(-300))
C2 = consumer("c2", [(30001, 65535)], unacked_messages=0)
SUBSCRIPTION = SubscriptionRecord(TOPIC, SUB, type="Key_Shared", msg_in_replay=7)


def poll(seconds: float, *rows: DrainingHashRecord, **tables: Any) -> Snapshot:
    tables.setdefault("consumers", (C1, C2))
    tables.setdefault("subscriptions", (SUBSCRIPTION,))
    return make_snapshot(seconds, draining_hashes=rows, **tables)


def analyze(snapshots: Sequence[Snapshot], **params: Any) -> RunOutput:
    return run_on_inputs(PLUGIN, make_inputs(snapshots, read_by(PLUGIN)), params)


def hashes_of(output: RunOutput) -> pd.DataFrame:
    return output.result.frames["hashes"].set_index("hash")


def test_stuck_after_k_polls_without_progress_while_blocked() -> None:
    snaps = [poll(i * 10, drain("c1", 40000, 3, 2 + 5 * i)) for i in range(3)]
    row = hashes_of(analyze(snaps, polls=3)).loc[40000]
    assert row["state"] == "stuck"
    assert (row["consumer_name"], row["waiting_consumer"]) == ("c1", "c2")
    assert (row["polls_without_progress"], row["blocked_growth"]) == (3, 10)
    assert (row["holder_unacked_messages"], row["msg_in_replay"]) == (12, 7)
    assert row["holder_last_acked_at"] == at(-300)


def test_stuck_needs_k_polls() -> None:
    snaps = [poll(i * 10, drain("c1", 40000, 3, 2 + i)) for i in range(2)]
    assert hashes_of(analyze(snaps, polls=3)).loc[40000, "state"] == "draining"


def test_stuck_after_t_seconds_even_with_fewer_polls() -> None:
    snaps = [poll(0, drain("c1", 40000, 3, 1)), poll(200, drain("c1", 40000, 3, 9))]
    row = hashes_of(analyze(snaps, polls=5, seconds=120)).loc[40000]
    assert row["state"] == "stuck" and row["seconds_without_progress"] == 200


def test_stuck_progress_resets_the_streak() -> None:
    unacked = [5, 5, 4, 4]
    snaps = [poll(i * 10, drain("c1", 40000, u, 10 * i)) for i, u in enumerate(unacked)]
    row = hashes_of(analyze(snaps, polls=3)).loc[40000]
    assert (row["state"], row["polls_without_progress"]) == ("draining", 2)
    assert row["draining_since"] == at(0)


def test_stuck_gap_in_presence_resets_the_streak() -> None:
    snaps = [
        poll(0, drain("c1", 40000, 3, 1)),
        poll(10),
        poll(20, drain("c1", 40000, 3, 5)),
        poll(30, drain("c1", 40000, 3, 8)),
    ]
    row = hashes_of(analyze(snaps, polls=3)).loc[40000]
    assert (row["state"], row["draining_since"]) == ("draining", at(20))


def test_stuck_idle_when_nothing_is_blocked() -> None:
    snaps = [poll(i * 10, drain("c1", 40000, 3, 0)) for i in range(4)]
    assert hashes_of(analyze(snaps)).loc[40000, "state"] == "idle"


def test_stuck_while_earlier_blocked_messages_still_wait() -> None:
    snaps = [poll(i * 10, drain("c1", 40000, 3, 4)) for i in range(4)]
    row = hashes_of(analyze(snaps)).loc[40000]
    assert (row["state"], row["blocked_growth"]) == ("stuck", 0)


def test_stuck_cleared_hashes_disappear() -> None:
    snaps = [poll(i * 10, drain("c1", 40000, 3, i)) for i in range(3)] + [poll(30)]
    output = analyze(snaps)
    assert output.result.frames["hashes"].empty
    assert output.result.summary["stuck"] == 0
    assert len(output.result.frames["history"]) == 3


def test_stuck_summary_lists_stuck_hashes_first() -> None:
    rows = [drain("c1", 50000, 1, 0), drain("c1", 40000, 2, 0), drain("c1", 31000, 1, 0)]
    snaps = [poll(0, *rows)]
    grown = [drain("c1", 50000, 1, 9), drain("c1", 40000, 2, 9), drain("c1", 31000, 1, 0)]
    snaps += [poll(10, *grown), poll(20, *grown[:2], drain("c1", 31000, 1, 0))]
    output = analyze(snaps, polls=2)
    assert output.result.summary["stuck_hashes"] == [40000, 50000]
    assert list(output.result.frames["hashes"]["state"]) == ["stuck", "stuck", "idle"]


def test_stuck_violation_when_two_consumers_drain_one_hash() -> None:
    snaps = [
        poll(0, drain("c1", 40000, 1, 0)),
        poll(10, drain("c1", 40000, 1, 0), drain("c3", 40000, 2, 0)),
    ]
    output = analyze(snaps)
    violations = output.result.frames["violations"]
    assert violations.to_dict("records") == [
        {
            "topic": TOPIC,
            "subscription": SUB,
            "hash": 40000,
            "consumers": "c1, c3",
            "first_seen_at": at(10),
            "last_seen_at": at(10),
            "snapshots": 1,
        }
    ]
    notes = [v for v in output.views if isinstance(v, Note) and v.level == "error"]
    assert len(notes) == 1


def test_stuck_held_back_consumers_of_the_classic_dispatcher() -> None:
    classic = SubscriptionRecord(
        TOPIC, SUB, type="Key_Shared", consumers_after_mark_delete_position='{"c2": "12:40"}'
    )
    c2 = consumer("c2", [], connected_since=at(-5), read_position_when_joining="12:40")
    snaps = [
        poll(0, subscriptions=(SubscriptionRecord(TOPIC, SUB),), consumers=(C1,)),
        poll(10, subscriptions=(classic,), consumers=(C1, c2)),
        poll(25, subscriptions=(classic,), consumers=(C1, c2)),
    ]
    held = analyze(snaps).result.frames["held_back"]
    assert held.to_dict("records") == [
        {
            "topic": TOPIC,
            "subscription": SUB,
            "consumer_name": "c2",
            "read_position_when_joining": "12:40",
            "held_since": at(10),
            "held_for_s": 15.0,
            "connected_since": at(-5),
        }
    ]


def test_stuck_held_back_only_while_still_held() -> None:
    classic = SubscriptionRecord(
        TOPIC, SUB, type="Key_Shared", consumers_after_mark_delete_position='{"c2": "12:40"}'
    )
    snaps = [poll(0, subscriptions=(classic,)), poll(10, subscriptions=(SUBSCRIPTION,))]
    assert analyze(snaps).result.frames["held_back"].empty


def test_stuck_parse_positions_tolerates_empty_and_bad_text() -> None:
    assert parse_positions(None) == {}
    assert parse_positions("{}") == {}
    assert parse_positions("not json") == {}
    assert parse_positions('{"a": "1:2"}') == {"a": "1:2"}


def test_stuck_render_views() -> None:
    snaps = [poll(i * 10, drain("c1", 40000, 3, i * 4)) for i in range(3)]
    views = analyze(snaps).views
    assert any(isinstance(v, Table) and v.title == "Draining hashes" for v in views)
    chart = next(v for v in views if isinstance(v, Chart))
    assert len(chart.chart.to_dict()["datasets"]) == 1
    assert any(isinstance(v, Note) and "c1 must acknowledge" in v.markdown for v in views)


def test_stuck_empty_inputs() -> None:
    output = analyze([])
    assert all(frame.empty for frame in output.result.frames.values())
    assert output.result.summary["draining"] == 0


def test_stuck_hashes_of_one_topic_or_subscription() -> None:
    other_topic = f"{TOPIC}-2"
    elsewhere = (
        ConsumerRecord(other_topic, SUB, "c9", hash_ranges=((1, 65535),), unacked_messages=4),
        SubscriptionRecord(other_topic, SUB, type="Key_Shared"),
        SubscriptionRecord(TOPIC, "orders-shared", type="Shared"),
    )
    snaps = [
        poll(
            i * 10,
            drain("c1", 40000, 3, 2 + i),
            DrainingHashRecord(other_topic, SUB, "c9", 7, 4, 1 + i),
            consumers=(C1, C2, elsewhere[0]),
            subscriptions=(SUBSCRIPTION, *elsewhere[1:]),
        )
        for i in range(3)
    ]
    every = analyze(snaps, polls=3).result
    assert every.summary["stuck_hashes"] == [7, 40000]
    mine = analyze(snaps, polls=3, topic=TOPIC).result
    assert mine.summary["stuck_hashes"] == [40000]
    assert set(mine.frames["history"]["topic"]) == {TOPIC}
    named = analyze(snaps, polls=3, topic=other_topic, subscription=SUB).result
    assert named.summary["stuck_hashes"] == [7]
    assert analyze(snaps, polls=3, subscription="orders-shared").result.summary["draining"] == 0
    # the controls offer the Key_Shared subscriptions' topics and names
    choices = PLUGIN.param_choices(make_inputs(snaps, PLUGIN.inputs))
    assert choices == {"topic": ["", TOPIC, other_topic], "subscription": ["", SUB]}
