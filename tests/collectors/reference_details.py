"""The choice of a poll's per-topic calls as it was made topic by topic in Python (before
`collectors.detailchoice` made it over the part indexes' columns), kept to compare with
(tests/collectors/test_detailchoice.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from pulsar_lens.core.tablerows import table_columns

Candidate = tuple[str, str, bool, int]
"""(broker, topic, whether its stats lack what only per-topic stats give, its backlog)"""


class DetailRotation:
    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._polls = 0

    def pick(self, topics: Sequence[str], budget: int, *, first: Sequence[str] = ()) -> list[str]:
        self._polls += 1
        wanted = set(topics)
        leading = [t for t in dict.fromkeys(first) if t in wanted]
        rest = sorted(wanted - set(leading), key=lambda t: (self._last.get(t, -1), t))
        chosen = (leading + rest)[: max(0, budget)]
        for topic in chosen:
            self._last[topic] = self._polls
        if len(self._last) > 4 * max(len(wanted), 1):
            self._last = {t: n for t, n in self._last.items() if t in wanted}
        return chosen


def candidates(indexes: Mapping[str, pa.Table | None]) -> list[Candidate]:
    found: list[Candidate] = []
    for broker, index in sorted(indexes.items()):
        if index is not None:
            columns = table_columns(index, ("topic", "needs_details", "backlog"))
            found.extend((broker, *row) for row in zip(*columns, strict=True))
    return found


def most_backlogged(candidates: Sequence[Candidate], limit: int) -> set[str]:
    ranked = sorted(((c[3], c[1]) for c in candidates), key=lambda x: (-x[0], x[1]))
    return {topic for backlog, topic in ranked[:limit] if backlog > 0}


def needing(candidates: Sequence[Candidate], lagging: set[str]) -> dict[str, str]:
    """Each topic that needs a per-topic call, with the broker to ask."""
    found: dict[str, str] = {}
    for b, topic, needs, _ in candidates:  # a topic two brokers report is asked of the first
        if needs or topic in lagging:
            found.setdefault(topic, b)
    return found
