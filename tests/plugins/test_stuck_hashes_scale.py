"""stuck-hashes at the broker's bounds: 65,535 draining hashes per consumer, overlapping and
reversed ranges, many consumers on one hash; the waiting consumer against its definition."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.api import Inputs
from pulsar_lens.core.model import ConsumerRecord, DrainingHashRecord, SubscriptionRecord
from pulsar_lens.plugins.builtin.stuck_hashes import MAX_LINES, StuckHashes
from pulsar_lens.plugins.builtin.stuck_hashes.violations import MAX_LISTED
from pulsar_lens.plugins.builtin.stuck_hashes.waiting import waiting_consumers
from pulsar_lens.plugins.runner import run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, at, make_inputs_from_records
from tests.props.strategies import props, weird_names

PLUGIN = StuckHashes()
SUB = "orders-ks"
HASHES = 65_535  # the most a 4.0 broker can list as draining for one consumer


def inputs_of(polls: Sequence[dict[str, Sequence[object]]]) -> Inputs:
    """Inputs over polls (oldest first) built column-wise: no snapshot digest per record."""
    return make_inputs_from_records(PLUGIN.inputs, polls)


def every_hash_draining(consumers: int, poll: int) -> dict[str, Sequence[object]]:
    """`consumers` consumers each reporting every hash (interleaved ranges of one hash) and
    each draining 65,535 hashes: every hash drains for all of them, a broker bug at its
    largest, with messages blocked since the second poll."""
    names = [f"c{c}" for c in range(consumers)]
    owners = [
        ConsumerRecord(
            TOPIC,
            SUB,
            name,
            connected_since=at(-60),
            unacked_messages=5,
            hash_ranges=tuple((h, h) for h in range(1 + c, HASHES + 1, consumers)),
        )
        for c, name in enumerate(names)
    ]
    draining = [
        DrainingHashRecord(TOPIC, SUB, name, h, 3, poll)
        for name in names
        for h in range(1, HASHES + 1)
    ]
    sub = SubscriptionRecord(TOPIC, SUB, type="Key_Shared", consumer_count=consumers)
    return {"consumers": owners, "draining_hashes": draining, "subscriptions": [sub]}


@pytest.mark.timeout(120)  # a deadline with a wide margin: seconds now, over 600 s before
def test_stuck_hashes_65535_per_consumer_of_four_consumers_finish() -> None:
    output = run_on_inputs(PLUGIN, inputs_of([every_hash_draining(4, i) for i in range(3)]))
    hashes, violations = output.result.frames["hashes"], output.result.frames["violations"]
    assert len(hashes) == 4 * HASHES
    assert set(hashes["state"]) == {"stuck"}
    owner = {h: f"c{(h - 1) % 4}" for h in range(1, HASHES + 1)}
    assert hashes["waiting_consumer"].tolist() == [owner[h] for h in hashes["hash"]]
    assert len(violations) == HASHES
    assert set(violations["consumers"]) == {"c0, c1, c2, c3"}
    assert (violations["snapshots"] == 3).all()
    chart = next(v for v in output.views if getattr(v, "title", "").startswith("Blocked"))
    assert chart.chart.data["label"].nunique() == MAX_LINES  # one line per (hash, holder)


def test_stuck_violation_lists_a_few_names_and_counts_the_rest() -> None:
    names = [f"holder-{k}" * 400 for k in range(MAX_LISTED + 3)]  # long names, many holders
    poll = {"draining_hashes": [DrainingHashRecord(TOPIC, SUB, n, 7, 1, 1) for n in names]}
    violations = run_on_inputs(PLUGIN, inputs_of([poll])).result.frames["violations"]
    listed = sorted(names)[:MAX_LISTED]
    assert violations["consumers"].tolist() == [", ".join(listed) + f", … ({len(names)} in all)"]


RANGES = st.lists(
    st.tuples(st.integers(-3, 70_000), st.integers(-3, 70_000)), max_size=6
)  # reversed, overlapping, outside the hash space: whatever a broken broker reports


@props(100)
@given(
    members=st.lists(st.tuples(st.sampled_from(["ks", "other"]), weird_names, RANGES), max_size=6),
    queries=st.lists(
        st.tuples(st.sampled_from(["ks", "other", "none"]), st.integers(-3, 70_000)),
        min_size=1,
        max_size=12,
    ),
)
def test_waiting_consumer_is_the_one_whose_ranges_cover_the_hash(
    members: list[tuple[str, str, list[tuple[int, int]]]], queries: list[tuple[str, int]]
) -> None:
    consumers = pd.DataFrame(
        {
            "topic": [TOPIC] * len(members),
            "subscription": [sub for sub, _, _ in members],
            "consumer_name": pd.Series([name for _, name, _ in members], dtype=object),
            "connected_since": [at(k) for k in range(len(members))],
            "hash_ranges": [[{"start": s, "end": e} for s, e in r] for _, _, r in members],
        }
    )
    hashes = pd.DataFrame(
        {
            "topic": [TOPIC] * len(queries),
            "subscription": [sub for sub, _ in queries],
            "hash": [h for _, h in queries],
        }
    )
    found = waiting_consumers(hashes, consumers)
    for (sub, value), name in zip(queries, found, strict=True):
        covering = [
            n for s, n, ranges in members if s == sub for lo, hi in ranges if lo <= value <= hi
        ]
        if not covering:
            assert name is None
        elif len(covering) == 1:
            assert name == covering[0]
        else:
            suffix = f" (+{len(covering) - 1} overlapping range(s))"
            assert name is not None and name.endswith(suffix)
            assert name.removesuffix(suffix) in covering


def test_waiting_consumer_of_no_hashes_and_of_no_consumers() -> None:
    hashes = pd.DataFrame({"topic": [TOPIC], "subscription": [SUB], "hash": [5]})
    none = pd.DataFrame(
        columns=["topic", "subscription", "consumer_name", "connected_since", "hash_ranges"]
    )
    assert waiting_consumers(hashes.iloc[0:0], none) == []
    assert waiting_consumers(hashes, none) == [None]
