"""The Pulsar client's reconnect backoff: when a bundle unload closes a topic, every producer and
consumer reconnects on this ladder, so the unload-latency page reads measured outages against it.

The rule is `org.apache.pulsar.common.util.Backoff.next()` of the 4.0 Java client (pulsar-common
4.0.7, checked against its bytecode and the oracle test in `tests/jvm/test_backoff.py`):

* `current = next`; then `next = min(2 * next, max)` (only while `current < max`);
* mandatory stop, checked until it has fired once: the call where `current == initial` records
  the first-backoff time; on any call where `elapsed + current > mandatoryStop`, current becomes
  `max(initial, mandatoryStop - elapsed)` and the stop is marked made;
* jitter: if `current > 10`, `current -= random.nextInt(current / 10)`, i.e. a reduction of
  0 .. current/10 - 1 whole milliseconds (never upward, strictly under 10 %);
* the result is `max(initial, current)`, so the first delay is always exactly `initial`;
* `reset()` (after a successful reconnect) sets `next = initial` and clears the stop.

Who builds one (pulsar-client-original 4.0.7): `ConsumerImpl` with mandatory stop 0 (which fires
on the first call and changes nothing), `ProducerImpl` with `max(100, sendTimeoutMs - 100)` ms;
both take `initialBackoffIntervalNanos` (100 ms) and `maxBackoffIntervalNanos` (60 s) from
`ClientConfigurationData`. `ConnectionHandler.connectionClosed` waits `backoff.next()` before the
first reconnect, except when the broker's close command names the new owner (extensible load
manager, PIP-307): then it reconnects at once, although `next()` is still called (the argument of
`Optional.orElse` is evaluated), so a failed immediate reconnect continues at the second rung.

The Python `pulsar-client` 3.13.0 wraps pulsar-client-cpp 4.2.0 (its bundled `libpulsar` names
that source tree and exports `pulsar::Backoff::next()`). Its `lib/Backoff.cc` (read in a
revision older than 4.2.0) has the same doubling, cap, mandatory stop and floor, but jitters by
`current * (rand % 10) / 100`: a 0-9 % reduction in whole percent, on a nanosecond duration.
Calling the wheel's own `Backoff::next()` (100 ms, 60 s, no mandatory stop) confirmed the
doubling, cap, floor and jitter: every delay was the nominal one less 0-9 whole percent, the
first exactly 100 ms. For the default ladder those delays lie inside the Java bounds
below (e.g. 182-200 ms against 181-200 ms for the second delay). Its generator is seeded with
`time(NULL)`, so C++ backoffs created in the same second draw the same jitter (3,000 built in one
second returned one sequence): they do not spread out as the Java ones do. The C++ mandatory
stop was read from the source, not exercised.

Times are whole milliseconds after the cut (the first `next()` call). Retry times assume each
failed attempt takes `attempt_ms` between its retry firing and the next `next()` call.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

Draw = Callable[[int], int]
"""A source of jitter: given a bound `b >= 1`, an integer in [0, b), as `Random.nextInt(b)`."""

PRODUCER_STOP_FLOOR_MS = 100
"""`ProducerImpl`: mandatory stop is `max(100, sendTimeoutMs - 100)` ms."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """One client's reconnect backoff, as `org.apache.pulsar.common.util.Backoff` (4.0).

    `jitter` is the largest fraction taken off a delay; the Java client hard-codes 1/10 (the
    divisor in `nextInt(current / 10)`), so only 0 or 1/k for a whole k is accepted."""

    initial_ms: int = 100
    max_ms: int = 60_000
    mandatory_stop_ms: int = 0
    jitter: float = 0.10

    def __post_init__(self) -> None:
        if self.initial_ms < 1 or self.max_ms < 1 or self.mandatory_stop_ms < 0:
            raise ValueError(
                f"backoff needs initial_ms >= 1, max_ms >= 1, mandatory_stop_ms >= 0; got "
                f"{self.initial_ms}, {self.max_ms}, {self.mandatory_stop_ms}"
            )
        if self.jitter != 0 and _divisor(self.jitter) is None:
            raise ValueError(
                f"jitter must be 0 or 1/k for a whole k (Java: 0.1); got {self.jitter}"
            )

    @classmethod
    def for_producer(
        cls, *, send_timeout_ms: int = 30_000, initial_ms: int = 100, max_ms: int = 60_000
    ) -> Backoff:
        """A producer's backoff: `ProducerImpl` sets the mandatory stop near the send timeout.
        A send timeout of 0 (none) gives a 100 ms stop, which fires on the second call and cuts
        that delay to `initial`: retries at 100, 200, 600, 1400 ms instead of 100, 300, 700."""
        stop = max(PRODUCER_STOP_FLOOR_MS, send_timeout_ms - PRODUCER_STOP_FLOOR_MS)
        return cls(initial_ms=initial_ms, max_ms=max_ms, mandatory_stop_ms=stop)

    def sequence(self, n: int, *, draw: Draw | None = None, attempt_ms: int = 0) -> tuple[int, ...]:
        """The delays the first `n` `next()` calls return, `Backoff.next()` step by step.

        `draw` supplies the jitter (None: no reduction, the nominal ladder); the clock advances
        by each delay plus `attempt_ms`, which is what the mandatory stop measures."""
        divisor = _divisor(self.jitter)
        following, made, first, now = self.initial_ms, False, 0, 0
        delays: list[int] = []
        for _ in range(n):
            current = following
            if current < self.max_ms:
                following = min(following * 2, self.max_ms)
            if not made:
                elapsed = 0
                if current == self.initial_ms:
                    first = now
                else:
                    elapsed = now - first
                if elapsed + current > self.mandatory_stop_ms:
                    current = max(self.initial_ms, self.mandatory_stop_ms - elapsed)
                    made = True
            if divisor is not None and current > divisor and draw is not None:
                current -= draw(current // divisor)
            delay = max(self.initial_ms, current)
            delays.append(delay)
            now += delay + attempt_ms
        return tuple(delays)

    def delays(self, n: int) -> tuple[int, ...]:
        """The first `n` nominal delays (no jitter, failed attempts take no time)."""
        return self.sequence(n)

    def retry_times(self, n: int) -> tuple[int, ...]:
        """When the first `n` retries fire after the cut, nominally: cumulative delays."""
        return tuple(itertools.accumulate(self.delays(n)))

    def delay_range(self, current: int) -> tuple[int, int]:
        """The [least, greatest] delay `next()` returns for a pre-jitter value `current`."""
        divisor = _divisor(self.jitter)
        most = current // divisor - 1 if divisor is not None and current > divisor else 0
        return max(self.initial_ms, current - most), max(self.initial_ms, current)

    def bounds(self, n: int, *, attempt_ms: int = 0) -> tuple[tuple[int, int], ...]:
        """For each of the first `n` retries, the [earliest, latest] time after the cut at which
        it fires, over every jitter the client can draw (exact, including the mandatory stop)."""
        return tuple(itertools.islice(self._bounds(attempt_ms), n))

    def step_of(self, outage_ms: float, *, attempt_ms: int = 0) -> int:
        """Which retry explains an outage of this length: 0 for none (no outage), else the first
        retry whose latest time is not before the outage ends. An outage between two rungs
        belongs to the later one; where rungs overlap (many capped steps) the earlier wins."""
        if outage_ms <= 0:
            return 0
        # each rung's latest time grows by at least initial_ms, which bounds the search
        limit = int(outage_ms) // self.initial_ms + 2
        for step, (_, latest) in enumerate(itertools.islice(self._bounds(attempt_ms), limit), 1):
            if outage_ms <= latest:
                return step
        raise AssertionError(f"no rung within {limit} steps reaches {outage_ms} ms")

    def _bounds(self, attempt_ms: int) -> Iterator[tuple[int, int]]:
        """Reachable retry times, step by step, as unions of integer intervals: `waiting` holds
        the times of the previous retry for histories where the mandatory stop has not fired,
        `made` those where it has (after which the clock no longer matters)."""
        waiting: list[tuple[int, int]] = [(-attempt_ms, -attempt_ms)]  # the cut is call time 0
        made: list[tuple[int, int]] = []
        for current in self._currents():
            calls = [(lo + attempt_ms, hi + attempt_ms) for lo, hi in waiting]
            made = [(lo + attempt_ms, hi + attempt_ms) for lo, hi in made]
            made = _shift(made, self.delay_range(current))
            waiting, cut = self._split(calls, current)
            made = _union(made + cut)
            waiting = _shift(waiting, self.delay_range(current))
            everything = waiting + made
            yield min(lo for lo, _ in everything), max(hi for _, hi in everything)

    def _split(
        self, calls: list[tuple[int, int]], current: int
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Split call times (= elapsed since the first backoff, which is call time 0) into those
        where the stop does not fire, left unshifted, and the retry times where it fires."""
        stop, initial = self.mandatory_stop_ms, self.initial_ms
        if current == initial:  # the first-backoff time is reset to now: elapsed is 0
            if current <= stop:
                return calls, []
            return [], _shift(calls, self.delay_range(max(initial, stop)))
        keep = _clip(calls, None, stop - current)
        fired = _clip(calls, stop - current + 1, None)
        cut: list[tuple[int, int]] = []
        for lo, _ in _clip(fired, None, stop - initial):
            # delay from max(initial, stop - e): the retry lands at stop minus a jitter that
            # shrinks as e grows, so the earliest is at e = lo and the latest is stop itself
            least, _ = self.delay_range(stop - lo)
            cut.append((lo + least, stop))
        cut += _shift(_clip(fired, stop - initial + 1, None), self.delay_range(initial))
        return keep, cut

    def _currents(self) -> Iterator[int]:
        """The pre-jitter `current` of each call: doubling from initial, capped at max."""
        current = self.initial_ms
        while True:
            yield current
            if current < self.max_ms:
                current = min(current * 2, self.max_ms)


def _divisor(jitter: float) -> int | None:
    """k for jitter 1/k (10 for the Java client's 0.1), None for no jitter or another value."""
    if jitter == 0:
        return None
    inverse = 1 / Fraction(str(jitter))
    return int(inverse) if inverse.denominator == 1 else None


def _shift(spans: list[tuple[int, int]], by: tuple[int, int]) -> list[tuple[int, int]]:
    return _union([(lo + by[0], hi + by[1]) for lo, hi in spans])


def _clip(spans: list[tuple[int, int]], low: int | None, high: int | None) -> list[tuple[int, int]]:
    clipped = [
        (lo if low is None else max(lo, low), hi if high is None else min(hi, high))
        for lo, hi in spans
    ]
    return [(lo, hi) for lo, hi in clipped if lo <= hi]


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint sorted integer intervals covering the same points."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


LADDER_MS: tuple[int, ...] = Backoff().retry_times(5)
"""The default ladder of retry times after the cut: (100, 300, 700, 1500, 3100)."""
