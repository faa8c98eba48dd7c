"""key-shared-map's per-consumer drift, batched over every modelled subscription, gives
exactly what the comparison it replaced gave (tests/plugins/reference_key_shared_map.py, an
owner array per hash): every frame with its dtypes and order, and the summary, on clusters
of auto split, sticky and consistent-hashing subscriptions on 3.0 and 4.0 brokers, drifting
or not; and `narrow_wrong` equals the owner arrays on ranges of every shape (out of range,
empty, overlapping, more model owners than members)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.core.assignments import Consumer
from pulsar_lens.core.keyshared.layout import Layout
from pulsar_lens.core.model import BrokerRecord, ConsumerRecord, SubscriptionRecord
from pulsar_lens.core.selectors import make_selector
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap, frames
from pulsar_lens.plugins.builtin.key_shared_map.drift import narrow_wrong
from pulsar_lens.plugins.runner import validate_params
from pulsar_lens.plugins.testing import at, make_inputs_from_records
from tests.plugins import reference_key_shared_map as reference
from tests.plugins.vectorised_cases import CONSUMER_NAMES, TOPIC_NAMES, cases

PLUGIN = KeySharedMap()
TABLES = ("subscriptions", "consumers", "draining_hashes", "key_samples", "brokers")


@contextmanager
def old_model_columns() -> Iterator[None]:
    saved = frames._model_columns
    frames._model_columns = reference.model_columns  # type: ignore[assignment]
    try:
        yield
    finally:
        frames._model_columns = saved


def _selected(seed: int, kind: str, n: int, pulsar: str, *, leave: bool) -> list[Any]:
    """(name, ranges) of `n` consumers of a fresh selector, in join order; with `leave`, one
    more joined and one of them left (which auto split's model cannot know)."""
    rng = random.Random(seed)
    selector = make_selector(kind, pulsar=pulsar)  # type: ignore[arg-type]
    names = [f"{rng.choice(CONSUMER_NAMES)}-{k % 3}" for k in range(n + leave)]
    joined = []
    for k, name in enumerate(names):
        sticky = ((k * 8000, k * 8000 + rng.randint(100, 7999)),) if kind == "sticky" else ()
        joined.append(Consumer(name, sticky))
        selector.add(joined[-1])
    if leave:
        selector.remove(rng.choice(joined[:-1]))
    return [(c.name, r) for c, r in selector.ranges().items()]


def _drifted(rng: random.Random, ranges: Any) -> Any:
    """A consumer's ranges as a broker might list them after the model lost track."""
    choice = rng.random()
    if not ranges or choice < 0.6:
        return ranges
    (start, end), rest = ranges[0], ranges[1:]
    if choice < 0.75:
        return rest  # a range gone
    if choice < 0.9:
        return ((start, max(start, end - rng.randint(1, 50))), *rest)  # shorter
    return ((max(0, start - 7), end), *rest)  # overlapping its neighbour


def cluster(seed: int, subscriptions: int, pulsar: str) -> Inputs:
    rng = random.Random(seed)
    subs, consumers = [], []
    for s in range(subscriptions):
        topic = f"persistent://t/ns/{rng.choice(TOPIC_NAMES)}-{s}"
        kind = rng.choice(("auto-split", "sticky", "consistent", "consistent"))
        mode = {"auto-split": "AUTO_SPLIT", "sticky": "STICKY"}.get(kind, "AUTO_SPLIT")
        drifting = rng.random() < 0.4
        leave = drifting and kind == "auto-split"
        members = _selected(seed * 1000 + s, kind, rng.randint(1, 6), pulsar, leave=leave)
        drifting = drifting and not leave
        subs.append(
            SubscriptionRecord(
                topic, "ks", type="Key_Shared", key_shared_mode=mode, consumer_count=len(members)
            )
        )
        consumers += [
            ConsumerRecord(
                topic,
                "ks",
                name,
                hash_ranges=_drifted(rng, ranges) if drifting else ranges,
                connected_since=at(-100 + k),
            )
            for k, (name, ranges) in enumerate(members)
        ]
    version = "4.0.7" if pulsar == "4.0" else "3.0.11"
    poll = {
        "subscriptions": subs,
        "consumers": consumers,
        "brokers": [BrokerRecord("b1:8080", version=version)],
    }
    return make_inputs_from_records(TABLES, [poll])


SELECTED = [
    (f"{n} subscriptions on {pulsar}", cluster(seed, n, pulsar))
    for seed, (n, pulsar) in enumerate(((3, "4.0"), (30, "4.0"), (50, "4.0"), (30, "3.0")))
]
CASES = [*cases(TABLES), *SELECTED]


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
@pytest.mark.parametrize("params", [{}, {"replica_points": 3}])
def test_key_shared_map_batched_drift_equals_the_reference(
    name: str, inputs: Inputs, params: dict[str, Any]
) -> None:
    validated = validate_params(PLUGIN, params)
    new = PLUGIN.analyze(inputs, validated)
    with old_model_columns():
        old = PLUGIN.analyze(inputs, validated)
    assert list(new.frames) == list(old.frames)
    for frame, was in old.frames.items():
        pd.testing.assert_frame_equal(new.frames[frame], was, obj=frame)
    assert new.summary == old.summary


def test_the_selected_clusters_drift_and_fit() -> None:
    """Auto split and consistent-hashing subscriptions drifting and not, sticky ones."""
    seen = set()
    for _, inputs in SELECTED:
        subs = PLUGIN.analyze(inputs, validate_params(PLUGIN, {})).frames["subscriptions"]
        seen |= set(zip(subs["selector"], subs["drift"], strict=True))
    wanted = {(k, d) for k in ("auto-split", "consistent") for d in (True, False)}
    assert {*wanted, ("sticky", False)} <= seen


def _random_ranges(rng: random.Random, owners: int) -> list[tuple[tuple[int, int], ...]]:
    """Per owner: ranges tiling part of 0..65536, now and then one out of range, empty or
    overlapping."""
    cuts = sorted(rng.sample(range(1, 65536), rng.randint(0, 12)))
    bounds = [0, *cuts, 65537]
    out: list[list[tuple[int, int]]] = [[] for _ in range(owners)]
    for low, high in itertools.pairwise(bounds):
        if owners and rng.random() < 0.8:
            out[rng.randrange(owners)].append((low, high - 1))
    odd = rng.random()
    if owners and odd < 0.25:
        hostile = rng.choice(((-5, 10), (65000, 70000), (300, 200), (70000, 70010), (5, 40000)))
        out[rng.randrange(owners)].append(hostile)
    return [tuple(sorted(r)) for r in out]


def test_narrow_wrong_equals_the_owner_arrays() -> None:
    rng = random.Random(5)
    subs = 300
    sizes = [rng.randint(0, 5) for _ in range(subs)]
    observed = [_random_ranges(rng, n) for n in sizes]
    flat = [r for per_sub in observed for ranges in per_sub for r in ranges]
    per_consumer = [len(ranges) for per_sub in observed for ranges in per_sub]
    layout = Layout(
        first=np.cumsum([0, *sizes]).astype(np.int64),
        names=[f"c{k}" for k in range(sum(sizes))],
        since=[None] * sum(sizes),
        range_first=np.cumsum([0, *per_consumer]).astype(np.int64),
        starts=np.asarray([s for s, _ in flat], np.int64),
        ends=np.asarray([e for _, e in flat], np.int64),
    )
    modelled = [
        (s, _random_ranges(rng, max(0, n + rng.choice((0, 0, 0, -1, 1)))))
        for s, n in enumerate(sizes)
    ]
    found = narrow_wrong(layout, modelled)
    for s, ranges in modelled:
        assert found[s] == reference.wrong_of(layout.members(s), ranges), s
    assert all(type(v) is int for counts in found.values() for v in counts)
