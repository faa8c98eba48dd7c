"""Which topics of a poll get a per-topic stats call, chosen from the brokers' part indexes.

A topic needs one when its bulk stats lack what only per-topic stats give (`needs_details`:
hash ranges, draining hashes, the active consumer), or when it is among the `lag_topics`
with the largest backlog (its time lag). At most `detail_budget` a poll: the largest
backlogs lead, then the topics detailed longest ago (never before first), then by name
(`DetailRotation`). A topic two brokers report is asked of the first broker in id order.

At 1,000,000 topics half of them need details; the choice is made over the indexes' Arrow
columns, so that only the chosen few hundred become Python values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.collectors.partmerge import first_places

CANDIDATE_SCHEMA = pa.schema(
    [
        pa.field("broker", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("needs_details", pa.bool_(), nullable=False),
        pa.field("backlog", pa.int64(), nullable=False),
    ]
)
"""One row per topic of each broker's part index, broker by broker in id order."""


def candidates_of(indexes: Mapping[str, pa.Table | None]) -> pa.Table:
    """The topics of the brokers' part indexes (None: that broker's part failed)."""
    tables = []
    for broker, index in sorted(indexes.items()):
        if index is not None:
            brokers = pa.repeat(pa.scalar(broker, pa.string()), index.num_rows)
            columns = [brokers, *(index[name] for name in CANDIDATE_SCHEMA.names[1:])]
            tables.append(pa.Table.from_arrays(columns, schema=CANDIDATE_SCHEMA))
    return pa.concat_tables(tables) if tables else CANDIDATE_SCHEMA.empty_table()


def most_backlogged(candidates: pa.Table, limit: int) -> set[str]:
    """Those of the `limit` topics with the largest backlog (then the first by name) whose
    backlog is positive, for their time lag; a topic two brokers report takes two places."""
    positive = candidates.filter(pc.greater(candidates["backlog"], 0))
    if limit <= 0 or positive.num_rows == 0:
        return set()
    if positive.num_rows > limit:  # only those as large as the limit-th largest can rank
        backlogs = positive["backlog"].to_numpy()
        least = np.partition(backlogs, backlogs.size - limit)[backlogs.size - limit]
        positive = positive.filter(pc.greater_equal(positive["backlog"], least))
    order = pc.sort_indices(positive, [("backlog", "descending"), ("topic", "ascending")])
    return set(positive["topic"].take(order[:limit]).to_pylist())


@dataclass(frozen=True)
class Needing:
    """The topics that need a per-topic call, each once (`topics`), with the broker that
    first reported it."""

    topics: pa.Array
    brokers: pa.Array

    def broker_of(self, chosen: Sequence[str]) -> dict[str, str]:
        """The broker to ask for each of `chosen` (topics of `topics`)."""
        rows = pc.is_in(self.topics, value_set=pa.array(chosen, pa.string()))
        found = pa.table({"topic": self.topics, "broker": self.brokers}).filter(rows)
        return dict(zip(*(found[name].to_pylist() for name in ("topic", "broker")), strict=True))


def needing(candidates: pa.Table, lagging: Sequence[str]) -> Needing:
    """The candidates that need details or are `lagging`, the first row of each topic."""
    wanted = pc.or_(
        candidates["needs_details"],
        pc.is_in(candidates["topic"], value_set=pa.array(lagging, pa.string())),
    )
    kept = candidates.select(["topic", "broker"]).filter(wanted).combine_chunks()
    topics = kept["topic"].chunk(0) if kept["topic"].num_chunks else pa.array([], pa.string())
    brokers = kept["broker"].chunk(0) if kept["broker"].num_chunks else pa.array([], pa.string())
    first = pa.array(first_places(topics) == np.arange(len(topics)))  # a topic's first row
    return Needing(topics.filter(first), brokers.filter(first))


class DetailRotation:
    """Which topics get a per-topic stats call this poll: those detailed longest ago first.

    Remembers the poll in which each topic was last detailed, so a budget smaller than the
    topics that need details still covers all of them over successive polls.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._polls = 0

    def pick(
        self, topics: Sequence[str] | pa.Array, budget: int, *, first: Sequence[str] = ()
    ) -> list[str]:
        """Up to `budget` of `topics` (a list, or an Arrow array holding each topic once):
        `first` (those asked for by name) lead, then the rest by how long ago they were
        detailed (never before first), then by name."""
        self._polls += 1
        wanted = (
            topics if isinstance(topics, pa.Array) else pc.unique(pa.array(topics, pa.string()))
        )
        firsts = pa.array(list(dict.fromkeys(first)), pa.string())  # a few: hash these
        present = set(wanted.filter(pc.is_in(wanted, value_set=firsts)).to_pylist())
        leading = [t for t in firsts.to_pylist() if t in present]
        chosen = leading[: max(0, budget)]
        room = max(0, budget) - len(chosen)
        if room:
            chosen += self._longest_ago(wanted, leading, room)
        for topic in chosen:
            self._last[topic] = self._polls
        if len(self._last) > 4 * max(len(wanted), 1):  # forget topics long gone
            known = pa.array(list(self._last), pa.string())
            kept = known.filter(pc.is_in(known, value_set=wanted)).to_pylist()
            self._last = {t: self._last[t] for t in kept}
        return chosen

    def _longest_ago(self, wanted: pa.Array, leading: list[str], room: int) -> list[str]:
        """`room` of `wanted` but `leading`, by the poll they were last detailed in (never:
        -1), then by name."""
        if self._last:
            known = pa.array(list(self._last), pa.string())
            polls = pa.array(list(self._last.values()), pa.int64())
            last = polls.take(pc.index_in(wanted, value_set=known)).fill_null(-1)
        else:
            last = pa.nulls(len(wanted), pa.int64()).fill_null(-1)
        table = pa.table({"last": last, "topic": wanted})
        if leading:
            table = table.filter(pc.invert(pc.is_in(wanted, value_set=pa.array(leading))))
        keys = [("last", "ascending"), ("topic", "ascending")]
        if table.num_rows > room:
            table = table.take(pc.select_k_unstable(table, room, keys))
        found: list[str] = table.take(pc.sort_indices(table, keys))["topic"].to_pylist()
        return found
