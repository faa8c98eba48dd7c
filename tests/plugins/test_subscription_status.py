"""subscription-status: each Burrow-style rule on small recorded series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Metric, Note, Table
from pulsar_lens.core.model import ConsumerRecord, Snapshot, SubscriptionRecord
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, at, make_inputs, make_snapshot

PLUGIN = SubscriptionStatus()


def sub(**fields: Any) -> SubscriptionRecord:
    base: dict[str, Any] = {
        "topic": TOPIC,
        "subscription": "billing",
        "type": "Shared",
        "consumer_count": 1,
        "is_durable": True,
        "msg_backlog": 0,
        "msg_rate_out": 0.0,
        "msg_ack_rate": 0.0,
    }
    return SubscriptionRecord(**{**base, **fields})


def series(rows: Sequence[SubscriptionRecord], *, every: float = 10.0) -> list[Snapshot]:
    return [make_snapshot(i * every, subscriptions=(r,)) for i, r in enumerate(rows)]


def status_of(snapshots: Sequence[Snapshot], **params: Any) -> tuple[str, str, pd.Series]:
    output = run_on_inputs(PLUGIN, make_inputs(snapshots, PLUGIN.inputs), params)
    frame = output.result.frames["status"]
    assert len(frame) == 1, frame
    row = frame.iloc[0]
    return str(row["status"]), str(row["reason"]), row


def test_status_ok_when_backlog_is_empty() -> None:
    status, _, row = status_of(series([sub(msg_backlog=5), sub(msg_backlog=0)]))
    assert (status, row["time_lag_s"]) == ("OK", 0.0)


def test_status_error_when_subscription_blocked_on_unacked() -> None:
    snaps = series([sub(msg_backlog=10, blocked_on_unacked=True)])
    assert status_of(snaps)[0] == "ERROR"


def test_status_error_when_a_consumer_is_blocked_on_unacked() -> None:
    consumer = ConsumerRecord(TOPIC, "billing", "c1", blocked_on_unacked=True)
    snaps = [make_snapshot(0, subscriptions=(sub(msg_backlog=3),), consumers=(consumer,))]
    assert status_of(snaps)[0] == "ERROR"


def test_status_stop_when_no_consumer_and_backlog() -> None:
    snaps = series([sub(msg_backlog=3, consumer_count=0), sub(msg_backlog=4, consumer_count=0)])
    status, reason, _ = status_of(snaps)
    assert status == "STOP" and "no consumer" in reason


def test_status_stop_when_consumers_neither_receive_nor_ack() -> None:
    snaps = series([sub(msg_backlog=3), sub(msg_backlog=5), sub(msg_backlog=9)])
    assert status_of(snaps)[0] == "STOP"


def test_status_stall_when_dispatching_without_acks() -> None:
    rows = [sub(msg_backlog=b, msg_rate_out=5.0, unacked_messages=b) for b in (10, 60, 110)]
    status, reason, row = status_of(series(rows))
    assert status == "STALL" and "none acknowledged" in reason
    assert row["backlog_change"] == 100


def test_status_stall_seen_through_last_consumed_timestamp() -> None:
    rows = [sub(msg_backlog=7, last_consumed_at=at(s)) for s in (0, 5, 15)]
    assert status_of(series(rows))[0] == "STALL"


def test_status_warn_when_backlog_grows_while_acking() -> None:
    rows = [sub(msg_backlog=b, msg_rate_out=9.0, msg_ack_rate=9.0) for b in (100, 100, 150, 200)]
    status, reason, _ = status_of(series(rows))
    assert status == "WARN" and "100 -> 200" in reason


def test_status_ok_when_backlog_shrinks_while_acking() -> None:
    rows = [sub(msg_backlog=b, msg_rate_out=9.0, msg_ack_rate=9.0) for b in (300, 200, 250)]
    assert status_of(series(rows))[0] == "OK"


def test_status_ok_when_acks_keep_a_steady_backlog() -> None:
    rows = [sub(msg_backlog=50, msg_rate_out=9.0, msg_ack_rate=9.0) for _ in range(3)]
    assert status_of(series(rows))[0] == "OK"


def test_status_reader_dispatch_counts_as_progress() -> None:
    rows = [sub(msg_backlog=b, is_durable=False, msg_rate_out=3.0) for b in (9, 8, 7)]
    assert status_of(series(rows))[0] == "OK"


def test_status_window_limits_the_evidence() -> None:
    acked = [sub(msg_backlog=b, msg_rate_out=5.0, msg_ack_rate=5.0) for b in (5, 6)]
    stalled = [sub(msg_backlog=b, msg_rate_out=5.0) for b in (7, 8, 9)]
    snaps = series(acked + stalled)
    assert status_of(snaps, window=3)[0] == "STALL"
    assert status_of(snaps, window=5)[0] == "WARN"


def test_status_time_lag_from_earliest_publish_time() -> None:
    row = sub(msg_backlog=4, consumer_count=0, earliest_msg_publish_time_in_backlog=at(-90))
    assert status_of(series([row]))[2]["time_lag_s"] == pytest.approx(90.0)


def test_status_gone_subscriptions_and_system_topics_are_left_out() -> None:
    system = sub(topic="persistent://public/default/__change_events", subscription="r")
    snaps = [
        make_snapshot(0, subscriptions=(sub(subscription="old"), sub())),
        make_snapshot(10, subscriptions=(sub(), system)),
    ]
    output = run_on_inputs(PLUGIN, make_inputs(snaps, PLUGIN.inputs))
    assert list(output.result.frames["status"]["subscription"]) == ["billing"]
    with_system = run_on_inputs(PLUGIN, make_inputs(snaps, PLUGIN.inputs), {"include_system": True})
    assert len(with_system.result.frames["status"]) == 2


def test_status_worst_first_and_summary_counts() -> None:
    snaps = series([sub(), sub()])
    snaps.append(
        make_snapshot(
            20, subscriptions=(sub(), sub(subscription="stuck", msg_backlog=2, consumer_count=0))
        )
    )
    output = run_on_inputs(PLUGIN, make_inputs(snaps, PLUGIN.inputs))
    assert list(output.result.frames["status"]["status"]) == ["STOP", "OK"]
    assert output.result.summary["worst"] == "STOP"
    assert output.result.summary["counts"]["OK"] == 1


def test_status_render_views() -> None:
    rows = [sub(msg_backlog=b, msg_rate_out=5.0) for b in (10, 20)]
    views = run_on_inputs(PLUGIN, make_inputs(series(rows), PLUGIN.inputs)).views
    kinds = [type(v) for v in views]
    assert kinds.count(Metric) == 5 and Table in kinds and Chart in kinds and Note in kinds
    chart = next(v for v in views if isinstance(v, Chart))
    assert chart.chart.to_dict()["mark"]["type"] == "line"


def test_status_empty_store_gives_empty_frames() -> None:
    output = run_on_inputs(PLUGIN, make_inputs([], PLUGIN.inputs))
    assert output.result.frames["status"].empty
    assert output.result.summary["worst"] == "OK"


def test_status_of_one_topic_or_subscription() -> None:
    other = f"{TOPIC}-2"
    rows = (
        sub(msg_backlog=0),
        sub(subscription="audit", msg_backlog=4, consumer_count=0),
        sub(topic=other, msg_backlog=7, blocked_on_unacked=True),
    )
    snaps = [make_snapshot(i * 10.0, subscriptions=rows) for i in range(2)]

    def judged(**params: Any) -> list[tuple[str, str, str]]:
        output = run_on_inputs(PLUGIN, make_inputs(snaps, PLUGIN.inputs), params)
        frame = output.result.frames["status"]
        assert set(output.result.frames["backlog"]["topic"]) <= set(frame["topic"])
        return list(zip(frame["topic"], frame["subscription"], frame["status"], strict=True))

    assert len(judged()) == 3
    assert judged(topic=TOPIC) == [(TOPIC, "audit", "STOP"), (TOPIC, "billing", "OK")]
    assert judged(subscription="billing") == [(other, "billing", "ERROR"), (TOPIC, "billing", "OK")]
    assert judged(topic=other, subscription="billing") == [(other, "billing", "ERROR")]
    assert judged(topic=other, subscription="audit") == []
    # the controls offer every topic and subscription name of the newest poll
    choices = PLUGIN.param_choices(make_inputs(snaps, PLUGIN.inputs))
    assert choices == {"topic": ["", TOPIC, other], "subscription": ["", "audit", "billing"]}
    assert PLUGIN.page is not None and PLUGIN.page.controls == ("topic", "subscription")
