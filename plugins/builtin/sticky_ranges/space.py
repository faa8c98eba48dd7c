"""The sticky hashes a broker of each line routes, which `sticky-ranges` counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.keyshared.ranges import ROUTABLE_HIGH, ROUTABLE_LOW, routable_count


@dataclass(frozen=True)
class Space:
    """The sticky hashes a broker routes: `low..high` inclusive."""

    low: int
    high: int

    @property
    def size(self) -> int:
        return self.high - self.low + 1

    def count(self, ranges: Any) -> int:
        """How many of these hashes the ranges hold."""
        return routable_count(ranges, low=self.low, high=self.high)


def sticky_space(pulsar: PulsarLine) -> Space:
    """4.0 turns hash 0 into 1, so routes 1..65535; 3.0 routes `h31 % 65536` as it is, 0..65535
    (`core.hashing.reduction`)."""
    return Space(0 if pulsar == "3.0" else ROUTABLE_LOW, ROUTABLE_HIGH)


SPACE_4_0 = sticky_space("4.0")
