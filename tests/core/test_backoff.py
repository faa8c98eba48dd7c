"""The reconnect backoff model on its own: the ladder, exact bounds (checked against every jitter
history of small configurations), the mandatory stop, and which rung explains an outage."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable

import pytest

from pulsar_lens.core.backoff import LADDER_MS, Backoff

CONFIGS = [
    Backoff(),
    Backoff.for_producer(),
    Backoff(initial_ms=20, max_ms=400, mandatory_stop_ms=138),
    Backoff(initial_ms=7, max_ms=5_000),
    Backoff(initial_ms=100, max_ms=60_000, mandatory_stop_ms=1_470),
    Backoff(initial_ms=500, max_ms=300),
]


def _histories(model: Backoff, steps: int, attempt: int) -> set[tuple[int, ...]]:
    """The delays of every jitter history: each draw's choices enumerated, taken modulo the
    bound actually asked (never above the nominal current's, since a cut only lowers it)."""
    free = Backoff(initial_ms=model.initial_ms, max_ms=model.max_ms).delays(steps)
    widths = [max(1, c // 10) for c in free]
    seen = set()
    for choice in itertools.product(*(range(w) for w in widths)):
        seen.add(model.sequence(steps, draw=_replaying(choice), attempt_ms=attempt))
    return seen


def _replaying(choice: tuple[int, ...]) -> Callable[[int], int]:
    picks = iter(choice)
    return lambda bound: next(picks) % bound


def test_backoff_ladder_is_the_published_one() -> None:
    doubling = [100 * 2**k for k in range(5)]
    assert LADDER_MS == tuple(itertools.accumulate(doubling)) == (100, 300, 700, 1500, 3100)


def test_backoff_delays_double_up_to_the_cap() -> None:
    delays = Backoff().delays(14)
    assert all(b == min(2 * a, 60_000) for a, b in itertools.pairwise(delays))
    assert delays[0] == 100 and delays[-1] == 60_000


def test_backoff_first_delay_is_exactly_initial() -> None:
    assert Backoff().bounds(1) == ((100, 100),)
    assert Backoff().delay_range(100) == (100, 100)


def test_backoff_delay_range_follows_next_int_of_a_tenth() -> None:
    model = Backoff(initial_ms=1)
    assert model.delay_range(200) == (200 - 19, 200)
    assert model.delay_range(60_000) == (60_000 - 5_999, 60_000)
    assert [model.delay_range(c) for c in (9, 10, 19, 20)] == [(9, 9), (10, 10), (19, 19), (19, 20)]


def test_backoff_draws_ask_the_bounds_java_asks() -> None:
    asked: list[int] = []
    Backoff().sequence(12, draw=lambda b: asked.append(b) or 0)
    assert asked == [c // 10 for c in Backoff().delays(12)]


@pytest.mark.parametrize("model", CONFIGS, ids=repr)
@pytest.mark.parametrize("attempt", [0, 40])
def test_backoff_bounds_monotone_around_nominal(model: Backoff, attempt: int) -> None:
    bounds = model.bounds(20, attempt_ms=attempt)
    nominal = [
        t + k * attempt
        for k, t in enumerate(itertools.accumulate(model.sequence(20, attempt_ms=attempt)))
    ]
    assert all(lo <= t <= hi for (lo, hi), t in zip(bounds, nominal, strict=True))
    for (lo1, hi1), (lo2, hi2) in itertools.pairwise(bounds):
        assert lo2 >= lo1 + model.initial_ms + attempt and hi2 >= hi1 + model.initial_ms + attempt


@pytest.mark.parametrize(
    "model",
    [
        Backoff(initial_ms=20, max_ms=400, mandatory_stop_ms=138),
        Backoff(initial_ms=20, max_ms=400, mandatory_stop_ms=120),
        Backoff(initial_ms=20, max_ms=100, mandatory_stop_ms=250),
        Backoff(initial_ms=30, max_ms=150),
    ],
    ids=repr,
)
@pytest.mark.parametrize("attempt", [0, 5])
def test_backoff_bounds_are_exact_over_every_history(model: Backoff, attempt: int) -> None:
    steps = 5
    times = [
        tuple(t + k * attempt for k, t in enumerate(itertools.accumulate(h)))
        for h in _histories(model, steps, attempt)
    ]
    reached = [(min(ts), max(ts)) for ts in zip(*times, strict=True)]
    assert tuple(reached) == model.bounds(steps, attempt_ms=attempt)


@pytest.mark.parametrize("model", CONFIGS, ids=repr)
def test_backoff_sampled_histories_within_bounds(model: Backoff) -> None:
    rng = random.Random(7)
    bounds = model.bounds(18, attempt_ms=11)
    for _ in range(300):
        delays = model.sequence(18, draw=rng.randrange, attempt_ms=11)
        times = [t + k * 11 for k, t in enumerate(itertools.accumulate(delays))]
        assert all(lo <= t <= hi for (lo, hi), t in zip(bounds, times, strict=True))


def test_backoff_producer_stop_lands_on_the_stop_then_doubling_resumes() -> None:
    model = Backoff.for_producer(send_timeout_ms=30_000)
    assert model.mandatory_stop_ms == 29_900
    free = Backoff().retry_times(12)
    cut = next(k for k, t in enumerate(free) if t > 29_900)
    times, delays = model.retry_times(12), model.delays(12)
    assert times[:cut] == free[:cut] and times[cut] == 29_900
    assert delays[cut + 1 :] == Backoff().delays(12)[cut + 1 :]


def test_backoff_producer_without_send_timeout_cuts_the_second_delay() -> None:
    producer = Backoff.for_producer(send_timeout_ms=0)
    assert producer.mandatory_stop_ms == 100
    consumer = Backoff().delays(15)
    assert producer.delays(15) == (consumer[0], producer.initial_ms, *consumer[2:])
    assert producer.bounds(2) == ((100, 100), (200, 200))


def test_backoff_consumer_stop_changes_nothing() -> None:
    never = Backoff(mandatory_stop_ms=10**12)
    assert Backoff(mandatory_stop_ms=0).bounds(15) == never.bounds(15)
    assert Backoff(mandatory_stop_ms=0).delays(15) == never.delays(15)


def test_backoff_step_of_no_outage_is_zero() -> None:
    assert Backoff().step_of(0) == 0 and Backoff().step_of(-5.0) == 0


def test_backoff_step_of_rung_edges() -> None:
    model = Backoff()
    bounds = model.bounds(8)
    for step, (lo, hi) in enumerate(bounds, 1):
        assert model.step_of(lo) == step and model.step_of(hi) == step
        assert model.step_of((lo + hi) / 2) == step
        assert model.step_of(hi + 0.5) == step + 1
    assert model.step_of(0.1) == 1  # before the first rung: the first retry ends it


def test_backoff_step_of_between_rungs_is_the_next() -> None:
    model = Backoff()
    (_, hi1), (lo2, _) = model.bounds(2)
    assert hi1 < lo2 and model.step_of((hi1 + lo2) / 2) == 2


@pytest.mark.parametrize("outage", [59_999.5, 3_600_000, 36_000_000.0])
def test_backoff_step_of_long_outages(outage: float) -> None:
    model = Backoff()
    step = model.step_of(outage)
    bounds = model.bounds(step)
    assert bounds[-1][1] >= outage and (step == 1 or bounds[-2][1] < outage)
    assert step <= math.ceil(outage / model.initial_ms)


@pytest.mark.parametrize(
    "kwargs",
    [{"initial_ms": 0}, {"max_ms": 0}, {"mandatory_stop_ms": -1}, {"jitter": 0.3}],
)
def test_backoff_refuses_what_the_client_cannot_be(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"backoff|jitter"):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_backoff_without_jitter_has_point_bounds() -> None:
    model = Backoff(jitter=0)
    assert [lo for lo, _ in model.bounds(10)] == list(model.retry_times(10))
    assert [hi for _, hi in model.bounds(10)] == list(model.retry_times(10))
