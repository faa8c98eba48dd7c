"""Key sampling rounds: which topics, how often, and that rows land with their snapshot."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.keys import TopicSample
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.collectors.sampling import KeySampling, choose_topics, round_line
from pulsar_lens.core.model import BrokerRecord, KeySampleRecord, SubscriptionRecord, TopicRecord
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges
from pulsar_lens.plugins.runner import load_inputs
from tests.core.snapshots import T0, make_snapshot


class FakeCollect:
    """Answers every topic with one sample of two keys; remembers its calls."""

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[tuple[str, list[str], dict[str, Any]]] = []
        self.fail = fail

    def __call__(self, service_url: str, topics: Iterable[str], **kwargs: Any) -> list[TopicSample]:
        names = list(topics)
        self.calls.append((service_url, names, kwargs))
        if self.fail:
            raise RuntimeError("broker gone")
        return [
            TopicSample(t, (KeySampleRecord(t, "a", 1), KeySampleRecord(t, "b", 2)), 3, 1)
            for t in names
        ]


def test_choose_topics_defaults_to_the_key_shared_topics() -> None:
    snapshot = make_snapshot(topics=3)
    shared = dataclasses.replace(
        snapshot,
        subscriptions=(
            *snapshot.subscriptions[:2],
            SubscriptionRecord(
                topic="persistent://public/default/t2", subscription="s", type="Shared"
            ),
        ),
    )
    assert choose_topics(shared, limit=10) == [
        "persistent://public/default/t0",
        "persistent://public/default/t1",
    ]


def test_choose_topics_rotates_through_candidates_within_the_limit() -> None:
    snapshot = make_snapshot(topics=5)
    first = choose_topics(snapshot, limit=2, offset=0)
    second = choose_topics(snapshot, limit=2, offset=2)
    third = choose_topics(snapshot, limit=2, offset=4)
    assert [t[-2:] for t in first + second + third] == ["t0", "t1", "t2", "t3", "t4", "t0"]


def test_choose_topics_matches_a_pattern_on_full_bare_and_parent_names() -> None:
    snapshot = dataclasses.replace(
        make_snapshot(topics=2),
        topics=(
            TopicRecord(
                topic="persistent://public/demo/orders", tenant="public", namespace="public/demo"
            ),
            TopicRecord(
                topic="persistent://public/demo/events-partition-0",
                tenant="public",
                namespace="public/demo",
                partitioned_topic="persistent://public/demo/events",
            ),
            TopicRecord(
                topic="persistent://public/other/x", tenant="public", namespace="public/other"
            ),
        ),
    )
    assert choose_topics(snapshot, pattern="public/demo/*", limit=10) == [
        "persistent://public/demo/events-partition-0",
        "persistent://public/demo/orders",
    ]
    assert choose_topics(snapshot, pattern="persistent://public/demo/events", limit=10) == [
        "persistent://public/demo/events-partition-0"
    ]
    assert choose_topics(snapshot, pattern="nothing*", limit=10) == []


def test_key_sampling_writes_rows_with_the_snapshot_id_and_time(tmp_path: Path) -> None:
    store = Store(tmp_path)
    collect = FakeCollect()
    sampling = KeySampling(
        store, service_url="pulsar://b:6650", collect=collect, token=Secret("t"), per_topic=9
    )
    at = dt.datetime.now(dt.UTC).replace(microsecond=0)  # within the loop's retention
    loop = PollLoop(
        sampling.wrap(lambda: make_snapshot(at=at, topics=2)),
        store,
        on_heartbeat=sampling.after(lambda beat: None),
        max_polls=1,
    )
    loop.run()
    sid = store.latest_snapshot_id()
    assert sid is not None
    rows = store.read("key_samples", snapshot_ids=[sid]).to_pylist()
    assert len(rows) == 4
    assert {r["snapshot_id"] for r in rows} == {sid}
    assert {r["collected_at"] for r in rows} == {at}
    assert {r["key"] for r in rows} == {"a", "b"}
    url, topics, kwargs = collect.calls[0]
    assert url == "pulsar://b:6650" and len(topics) == 2
    assert kwargs["per_topic"] == 9 and kwargs["token"] == Secret("t")


def test_key_sampling_rows_reach_a_plugin_with_their_snapshot(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sampling = KeySampling(store, service_url="pulsar://b:6650", collect=FakeCollect())
    for i in range(2):
        snapshot = make_snapshot(at=T0 + dt.timedelta(minutes=i), topics=1)
        sid = store.write(snapshot)
        sampling.sample(snapshot, sid)
    inputs = load_inputs(StickyRanges(), store)
    assert len(inputs.history("key_samples")) == 4


def test_key_sampling_samples_after_every_nth_stored_poll(tmp_path: Path) -> None:
    store = Store(tmp_path)
    collect = FakeCollect()
    sampling = KeySampling(store, service_url="pulsar://b:6650", every=3, collect=collect)
    polls = iter(range(7))
    # dated now, as a poll is: polls of a past day are that day's to compact, and the loop's
    # compaction of it would race with their writes (a failed write is a round not sampled)
    start = dt.datetime.now(dt.UTC).replace(microsecond=0)
    loop = PollLoop(
        sampling.wrap(lambda: make_snapshot(at=start + dt.timedelta(seconds=next(polls)))),
        store,
        on_heartbeat=sampling.after(lambda beat: None),
        max_polls=7,
        sleep=lambda seconds: False,
    )
    loop.run()
    assert len(collect.calls) == 3 and sampling.rounds == 3  # polls 1, 4 and 7


def test_key_sampling_failure_does_not_stop_the_loop(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sampling = KeySampling(store, service_url="pulsar://b:6650", collect=FakeCollect(fail=True))
    loop = PollLoop(
        sampling.wrap(lambda: make_snapshot(at=dt.datetime.now(dt.UTC))),
        store,
        on_heartbeat=sampling.after(lambda beat: None),
        max_polls=2,
        sleep=lambda seconds: False,
    )
    assert loop.run() == 2
    assert store.read("key_samples").num_rows == 0


def test_key_sampling_uses_the_broker_service_url_without_one(tmp_path: Path) -> None:
    collect = FakeCollect()
    sampling = KeySampling(Store(tmp_path), collect=collect)
    snapshot = dataclasses.replace(
        make_snapshot(topics=1),
        brokers=(BrokerRecord(broker_id="b:8080", pulsar_service_url="pulsar://b:6650"),),
    )
    sampling.sample(snapshot, "sha256:00")
    assert collect.calls[0][0] == "pulsar://b:6650"


def test_key_sampling_without_any_service_url_skips_the_round(tmp_path: Path) -> None:
    collect = FakeCollect()
    sampling = KeySampling(Store(tmp_path), collect=collect)
    assert sampling.sample(make_snapshot(topics=1), "sha256:00") == []
    assert collect.calls == []


def test_round_line_reports_keys_unresolved_and_failures() -> None:
    samples = [
        TopicSample("t0", (KeySampleRecord("t0", "a", 1),), 3, 2),
        TopicSample("t1", stopped="error", error="TopicNotFound"),
    ]
    assert round_line(samples) == (
        "key samples: 1 keys from 2 topics, 2 messages without a visible sticky key, "
        "1 failed (first: t1)"
    )
