"""Our reconnect backoff model against the Pulsar 4.0 client's own `Backoff` class, on thousands of
`next()` sequences: each delay within our bounds, the nominal ladder, reset, the mandatory stop,
and, with the class's Random seeded, every single delay reproduced exactly.

On the releases whose client builds it with `BackoffBuilder` (4.0.7 and 3.0.7); 4.2.4's client
replaced that with `Backoff.Builder`, and the model is of the 4.0 client."""

from __future__ import annotations

import itertools

import pytest

from pulsar_lens.core.backoff import LADDER_MS, Backoff
from tests.jvm.conftest import ORACLE_RELEASES, BackoffOracle

BACKOFF_RELEASES = tuple(v for v in ORACLE_RELEASES if not v.startswith("4.2."))

RUNS = 3000
MANY = 20_000  # every step's extremes drawn: a miss is ~1e-3 likely per capped step; seeded anyway
STEPS = 16  # reaches the 60 s cap at step 11, then five capped delays per run
MASK = (1 << 48) - 1


@pytest.fixture(scope="session", params=BACKOFF_RELEASES, ids=lambda v: f"pulsar-{v}")
def pulsar_version(request: pytest.FixtureRequest) -> str:
    """The releases whose client's `BackoffBuilder` the backoff oracle drives."""
    version: str = request.param
    return version


class JavaRandom:
    """`java.util.Random`: the same 48-bit LCG and `nextInt(bound)`, so a seeded run of the
    client's Backoff can be replayed through our model draw for draw."""

    def __init__(self, seed: int) -> None:
        self.seed = (seed ^ 0x5DEECE66D) & MASK

    def _next31(self) -> int:
        self.seed = (self.seed * 0x5DEECE66D + 0xB) & MASK
        return self.seed >> 17

    def next_int(self, bound: int) -> int:
        r = self._next31()
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        for _ in range(1000):  # a rejection is rarer than 1 in 2**31 / bound
            u, r = r, r % bound
            if u - r + m < 1 << 31:
                return r
            r = self._next31()
        raise AssertionError("java.util.Random rejected 1000 draws in a row")


def _replay(model: Backoff, seed: int, runs: int, steps: int, **kw: int) -> list[tuple[int, ...]]:
    """Our model on the same draws the seeded Java class made, run after run."""
    rng = JavaRandom(seed)
    reset_at = kw.pop("reset_at", 0)
    if not reset_at:
        return [model.sequence(steps, draw=rng.next_int, **kw) for _ in range(runs)]
    return [
        model.sequence(reset_at, draw=rng.next_int, **kw)
        + model.sequence(steps - reset_at, draw=rng.next_int, **kw)
        for _ in range(runs)
    ]


@pytest.fixture(scope="module")
def consumer_runs(backoff_oracle: BackoffOracle) -> list[tuple[int, ...]]:
    """A consumer's backoff as `ConsumerImpl` builds it: BackoffBuilder, the client's defaults,
    mandatory stop 0."""
    initial, max_ms, _ = backoff_oracle.defaults()
    return backoff_oracle.run(
        initial=initial, max_ms=max_ms, stop=0, seed=20240607, runs=MANY, steps=STEPS, clock=False
    )


def test_backoff_defaults_are_the_clients(backoff_oracle: BackoffOracle) -> None:
    initial, max_ms, send_timeout = backoff_oracle.defaults()
    model = Backoff()
    assert (model.initial_ms, model.max_ms) == (initial, max_ms)
    assert Backoff.for_producer().mandatory_stop_ms == max(100, send_timeout - 100)


def test_backoff_every_java_delay_within_bounds(consumer_runs: list[tuple[int, ...]]) -> None:
    model = Backoff()
    nominal = model.delays(STEPS)
    for step, delays in enumerate(zip(*consumer_runs, strict=True)):
        low, high = model.delay_range(nominal[step])
        assert low <= min(delays) and max(delays) <= high, f"step {step + 1}"
    bounds = model.bounds(STEPS)
    for run in consumer_runs:
        for (earliest, latest), at in zip(bounds, itertools.accumulate(run), strict=True):
            assert earliest <= at <= latest


def test_backoff_java_extremes_reach_our_nominal_and_lower_bound(
    consumer_runs: list[tuple[int, ...]],
) -> None:
    """Jitter removed (the greatest delay seen) the Java sequence is our nominal one; the least
    delay seen comes down to our lower bound, within 0.1 % of the jitter span."""
    model = Backoff()
    nominal = model.delays(STEPS)
    for step, delays in enumerate(zip(*consumer_runs, strict=True)):
        low, high = model.delay_range(nominal[step])
        slack = max(1, (high - low) // 1000)
        assert abs(max(delays) - nominal[step]) <= 1, f"step {step + 1}"
        assert min(delays) - low <= slack, f"step {step + 1}: {min(delays)} vs {low}"
    firsts = [run[: len(LADDER_MS)] for run in consumer_runs]
    assert tuple(itertools.accumulate(max(d) for d in zip(*firsts, strict=True))) == LADDER_MS


def test_backoff_replays_java_exactly(
    backoff_oracle: BackoffOracle, consumer_runs: list[tuple[int, ...]]
) -> None:
    assert _replay(Backoff(), 20240607, MANY, STEPS) == consumer_runs
    odd = Backoff(initial_ms=7, max_ms=5_000)
    seen = backoff_oracle.run(initial=7, max_ms=5_000, stop=0, seed=5, runs=500, steps=14)
    assert _replay(odd, 5, 500, 14) == seen


def test_backoff_reset_starts_the_ladder_again(backoff_oracle: BackoffOracle) -> None:
    seen = backoff_oracle.run(
        initial=100, max_ms=60_000, stop=0, seed=11, runs=RUNS, steps=12, reset_at=5, clock=False
    )
    assert _replay(Backoff(), 11, RUNS, 12, reset_at=5) == seen
    restarted = [run[5:] for run in seen]
    assert {run[0] for run in restarted} == {100}
    bounds = Backoff().bounds(7)
    for run in restarted:
        times = itertools.accumulate(run)
        assert all(lo <= t <= hi for (lo, hi), t in zip(bounds, times, strict=True))


@pytest.mark.parametrize(("send_timeout", "attempt"), [(None, 0), (None, 3), (None, 250), (0, 3)])
def test_backoff_producer_mandatory_stop_matches(
    backoff_oracle: BackoffOracle, send_timeout: int | None, attempt: int
) -> None:
    """`ProducerImpl`'s stop (29.9 s with the default 30 s send timeout, 100 ms without one), on
    a clock that advances by each delay plus a failed attempt's duration: the cut rung and every
    delay are Java's."""
    if send_timeout is None:
        _, _, send_timeout = backoff_oracle.defaults()
    model = Backoff.for_producer(send_timeout_ms=send_timeout)
    stop = model.mandatory_stop_ms
    seen = backoff_oracle.run(
        initial=100,
        max_ms=60_000,
        stop=stop,
        seed=stop + attempt,
        runs=RUNS,
        steps=STEPS,
        attempt=attempt,
    )
    assert _replay(model, stop + attempt, RUNS, STEPS, attempt_ms=attempt) == seen
    bounds = model.bounds(STEPS, attempt_ms=attempt)
    last_before_stop = set()
    for run in seen:
        times = [sum(run[: k + 1]) + k * attempt for k in range(STEPS)]
        assert all(lo <= t <= hi for (lo, hi), t in zip(bounds, times, strict=True))
        last_before_stop.add(max(t for t in times if t <= stop))
    assert max(last_before_stop) == stop


@pytest.mark.parametrize(
    ("initial", "max_ms", "stop", "after"), [(20, 400, 138, 3), (100, 60_000, 1_470, 4)]
)
def test_backoff_stop_where_histories_branch(
    backoff_oracle: BackoffOracle, initial: int, max_ms: int, stop: int, after: int
) -> None:
    """Stops where the jitter decides whether the cut falls on call `after` or the next one (then
    cut to almost nothing): both histories occur, and every retry time is within our bounds."""
    model = Backoff(initial_ms=initial, max_ms=max_ms, mandatory_stop_ms=stop)
    seen = backoff_oracle.run(
        initial=initial, max_ms=max_ms, stop=stop, seed=stop, runs=RUNS, steps=10
    )
    assert _replay(model, stop, RUNS, 10) == seen
    late_cut = {run[after] < model.delays(after + 1)[after] // 2 for run in seen}
    assert late_cut == {True, False}
    bounds = model.bounds(10)
    for run in seen:
        times = itertools.accumulate(run)
        assert all(lo <= t <= hi for (lo, hi), t in zip(bounds, times, strict=True))
