"""Our Key_Shared selectors against the broker's own selector classes, on each release of
`ORACLE_RELEASES`: the model of the release's line (`make_selector(kind, pulsar="3.0")` on
3.0.7, the 4.0 one on 4.0.7) is fed the same random joins and leaves as the broker's
`ConsistentHashingStickyKeyConsumerSelector`, `HashRangeAutoSplitStickyKeyConsumerSelector`
or `HashRangeExclusiveStickyKeyConsumerSelector`; after each, every consumer's ranges must
be the broker's, and random keys must reach the consumer the broker picks."""

from __future__ import annotations

import random

import pytest

from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.pulsarvalues import model_line
from pulsar_lens.core.selectors import Consumer, Selector, make_selector
from tests.jvm.conftest import SelectorOracle

NAMES = ["alpha", "beta", "dup", "dup", "consumer1", "consumer11", "Zoë", "消费者", "🚀"]
STEPS = 40
KEYS = 400


def line(oracle: SelectorOracle) -> PulsarLine:
    """The broker line whose model is checked against this oracle's release."""
    return model_line(oracle.version)


class Pair:
    """The model and the broker's selector, fed the same consumers under the same ids."""

    def __init__(self, oracle: SelectorOracle, model: Selector) -> None:
        self.oracle, self.model = oracle, model
        self.ids: dict[Consumer, int] = {}
        self.next_id = 1

    def join(self, name: str, sticky: tuple[tuple[int, int], ...] = ()) -> None:
        handle, ident = Consumer(name, sticky), self.next_id
        self.next_id += 1
        refused = self.oracle.add(ident, name, sticky)
        try:
            self.model.add(handle)
        except ModelError as exc:
            assert refused is not None, f"the broker took {handle}; ours refused: {exc}"
            return
        assert refused is None, f"the broker refused {handle} ({refused}); ours took it"
        self.ids[handle] = ident

    def leave(self, handle: Consumer) -> None:
        self.oracle.remove(self.ids.pop(handle))
        self.model.remove(handle)

    def check(self, rng: random.Random, when: str) -> None:
        where = f"{when} on Pulsar {self.oracle.version}, our {line(self.oracle)} model"
        ours = {self.ids[c]: [tuple(r) for r in rs] for c, rs in self.model.ranges().items() if rs}
        assert ours == self.oracle.ranges(), where
        keys = [rng.randbytes(rng.randint(1, 24)) for _ in range(KEYS)]
        theirs = self.oracle.select(keys)
        picked = [self.model.select_key(k) for k in keys]
        wrong = [
            (k, t, p)
            for k, t, p in zip(keys, theirs, picked, strict=True)
            if t != (None if p is None else self.ids[p])
        ]
        assert not wrong, f"{len(wrong)} of {KEYS} keys differ {where}, e.g. {wrong[:3]}"


def run_sequence(pair: Pair, rng: random.Random, sticky: bool = False) -> None:
    for step in range(STEPS):
        if pair.ids and rng.random() < 0.35:
            handle = rng.choice(list(pair.ids))
            pair.leave(handle)
            pair.check(rng, f"step {step}: {handle.name!r} left")
        else:
            name = rng.choice(NAMES)
            ranges = sticky_ranges(rng) if sticky else ()
            pair.join(name, ranges)
            pair.check(rng, f"step {step}: {name!r} joined with {ranges}")


def sticky_ranges(rng: random.Random) -> tuple[tuple[int, int], ...]:
    """One to three ranges of 0..65535, sorted and apart (conflicts come from other consumers)."""
    starts = sorted(rng.sample(range(0, 65536, 64), rng.randint(1, 3)))
    return tuple((s, s + rng.randint(0, 63)) for s in starts)


@pytest.mark.parametrize("points", [100, 3])
@pytest.mark.parametrize("seed", [1, 2])
def test_consistent_hashing_is_the_brokers(
    selector_oracle: SelectorOracle, points: int, seed: int
) -> None:
    selector_oracle.new("consistent", points)
    model = make_selector("consistent", points=points, pulsar=line(selector_oracle))
    run_sequence(Pair(selector_oracle, model), random.Random(seed))


@pytest.mark.parametrize("seed", [1, 2])
def test_auto_split_is_the_brokers(selector_oracle: SelectorOracle, seed: int) -> None:
    selector_oracle.new("auto-split")
    model = make_selector("auto-split", pulsar=line(selector_oracle))
    run_sequence(Pair(selector_oracle, model), random.Random(seed))


@pytest.mark.parametrize("seed", [1, 2])
def test_sticky_ranges_and_conflicts_are_the_brokers(
    selector_oracle: SelectorOracle, seed: int
) -> None:
    selector_oracle.new("sticky")
    model = make_selector("sticky", pulsar=line(selector_oracle))
    run_sequence(Pair(selector_oracle, model), random.Random(seed), sticky=True)
