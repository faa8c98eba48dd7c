"""failover-assignment keeps each poll's Failover rows in a step: flapping and the timeline
equal the whole window's (the reference reads every subscription of every poll), through a
store pass after pass while a short window slides, with subscriptions that change type, rows
missing from polls and active consumers missing; the timeline lists a partition only in the
polls where its subscription was Failover."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pulsar_lens.core.model import ConsumerRecord, Snapshot, SubscriptionRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.testing import make_inputs, make_snapshot
from tests.plugins import reference_failover

TOPICS = (
    *(f"persistent://public/default/orders-partition-{i}" for i in range(4)),
    "persistent://public/default/single",
)
NAMES = ("c1", "c2", "c3")
TYPES = ("Failover",) * 4 + ("Shared", "Exclusive", None)


class ShortWindow(FailoverAssignment):
    """The plugin over 6 polls: the window slides past the first polls within a short test."""

    history = 6


def polls(seed: int, count: int) -> list[Snapshot]:
    rng = random.Random(seed)
    found = []
    for i in range(count):
        subs, consumers = [], []
        for topic in TOPICS:
            for sub in ("fo", "other"):
                if rng.random() < 0.1:
                    continue  # not listed by this poll
                names = [n for n in NAMES if rng.random() < 0.8]
                active = rng.choice([*names, None]) if names else None
                subs.append(
                    SubscriptionRecord(
                        topic,
                        sub,
                        type="Failover" if i == count - 1 and sub == "fo" else rng.choice(TYPES),
                        active_consumer_name=active,
                        consumer_count=len(names),
                    )
                )
                consumers += [ConsumerRecord(topic, sub, name) for name in names]
        found.append(make_snapshot(i * 30.0, subscriptions=subs, consumers=consumers))
    return found


def whole_window(snapshots: Sequence[Snapshot]) -> dict[str, pd.DataFrame]:
    data = make_inputs(snapshots, ("subscriptions", "consumers", "brokers"))
    params = runner.validate_params(FailoverAssignment(), {"flap_changes": 1})
    return dict(reference_failover.analyze(data, params).frames)


def test_failover_through_a_store_pass_after_pass(tmp_path: Path) -> None:
    store, plugin, snaps = Store(tmp_path), ShortWindow(), polls(3, 14)
    flapping = left_out = 0
    for i, snapshot in enumerate(snaps):
        store.write(snapshot)
        output = runner.run(
            plugin, store, {"flap_changes": 1}, use_cache=False, use_stored=False, views=False
        )
        window = snaps[max(0, i - 5) : i + 1]
        expected = whole_window(window)
        for name, frame in expected.items():
            pd.testing.assert_frame_equal(output.result.frames[name], frame, obj=f"{i} {name}")
        flapping += (
            int(expected["partitions"]["flapping"].sum()) if len(expected["partitions"]) else 0
        )
        every = make_inputs(window, ("subscriptions",)).history("subscriptions")
        current = expected["partitions"][["topic", "subscription"]]
        rows = every.merge(current, on=["topic", "subscription"])
        left_out += int((rows["type"] != "Failover").sum())  # not in the timeline
        assert len(expected["timeline"]) == int((rows["type"] == "Failover").sum())
    assert flapping and left_out  # flaps counted, and polls of other types left out
