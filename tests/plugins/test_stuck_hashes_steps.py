"""stuck-hashes keeps each poll's marked subscriptions (the classic dispatcher's held-back
consumers) in a step: its results equal the whole window's, through a store pass after pass
and windows sliding past the first polls."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens.core.model import ConsumerRecord, Snapshot, SubscriptionRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.shared.choices import chosen
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.stuck_hashes.classic import compute_held_back, marked
from pulsar_lens.plugins.builtin.stuck_hashes.windows import snapshot_order
from pulsar_lens.plugins.testing import at, make_inputs, make_snapshot, read_by

TOPICS = ("persistent://public/default/a", "persistent://public/default/b-partition-0")
NAMES = ("c1", "c2", "c3")
TEXTS = ('{"c2": "12:40"}', '{"c2": "12:40", "c3": "12:41"}', '{"c3": "13:1"}', "{}", "", None)


class ShortWindow(StuckHashes):
    """The plugin over 6 polls: windows slide past the first polls within a short test."""

    history = 6


def polls(seed: int, count: int) -> list[Snapshot]:
    """Key_Shared subscriptions whose classic dispatcher holds consumers back for a few polls
    at a time, rows missing from some polls, text that is empty or not JSON."""
    rng = random.Random(seed)
    found = []
    for i in range(count):
        subs, consumers = [], []
        for topic in TOPICS:
            for sub in ("ks", "other"):
                if rng.random() < 0.15:
                    continue  # not listed by this poll
                text = rng.choice(TEXTS) if rng.random() < 0.7 else "not json"
                subs.append(
                    SubscriptionRecord(
                        topic, sub, type="Key_Shared", consumers_after_mark_delete_position=text
                    )
                )
                consumers += [
                    ConsumerRecord(
                        topic,
                        sub,
                        name,
                        connected_since=at(-rng.randrange(1, 50)),
                        read_position_when_joining=rng.choice([None, "9:9"]),
                    )
                    for name in NAMES
                    if rng.random() < 0.8
                ]
        found.append(make_snapshot(i * 30.0, subscriptions=subs, consumers=consumers))
    return found


def whole_window(snapshots: Sequence[Snapshot], topic: str, subscription: str) -> pd.DataFrame:
    """held_back as the plugin found it before the steps: the window's every subscription row."""
    data = make_inputs(snapshots, ("subscriptions", "consumers"))
    consumers = chosen(data.latest("consumers"), topic, subscription)
    rows = chosen(data.history("subscriptions"), topic, subscription)
    return compute_held_back(marked(rows), consumers, snapshot_order(data.snapshots))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("topic", "subscription"), [("", ""), (TOPICS[1], "ks")])
def test_held_back_from_steps_equals_the_whole_window(
    seed: int, topic: str, subscription: str
) -> None:
    snaps = polls(seed, 8)
    params = {"topic": topic, "subscription": subscription}
    stepped = runner.run_on_inputs(StuckHashes(), make_inputs(snaps, read_by(StuckHashes)), params)
    expected = whole_window(snaps, topic, subscription)
    pd.testing.assert_frame_equal(stepped.result.frames["held_back"], expected)


def test_held_back_through_a_store_pass_after_pass(tmp_path: Path) -> None:
    """Steps kept and read back while the 6-poll window slides over 14 polls: each pass
    equals the whole window of its polls, and the stored steps are the window's."""
    store, plugin, snaps = Store(tmp_path), ShortWindow(), polls(7, 14)
    held = 0
    for i, snapshot in enumerate(snaps):
        store.write(snapshot)
        output = runner.run(plugin, store, None, use_cache=False, use_stored=False, views=False)
        expected = whole_window(snaps[max(0, i - 5) : i + 1], "", "")
        pd.testing.assert_frame_equal(output.result.frames["held_back"], expected, obj=str(i))
        held += len(expected)
    assert held  # consumers were held back: not an empty comparison


def test_a_poll_with_no_marked_subscription_steps_an_empty_frame_with_its_columns() -> None:
    plain = make_snapshot(0, subscriptions=(SubscriptionRecord(TOPICS[0], "ks"),))
    frame = marked(make_inputs([plain], ("subscriptions",)).history("subscriptions"))
    assert frame.empty
    assert list(frame.columns) == [
        "snapshot_id",
        "topic",
        "subscription",
        "consumers_after_mark_delete_position",
    ]
