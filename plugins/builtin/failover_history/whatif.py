"""The PIP-392 what-if of one failover group, the same function on both engines.

Given a group's partitions at the newest poll and the consumers connected to each, the broker's
own picker (`pulsar_lens.api.active_consumer_picker`, proven against a 4.0 broker) assigns every
partition twice: by `partitionIndex % n` (modulo, the default) and on the PIP-392 ring
(consistent hashing). Scenarios:

- `now`: the consumers as they are; `moved_*` counts the partitions that switching
  `activeConsumerFailoverConsistentHashing` would hand to another consumer (the same number
  in both columns).
- `leave`: one row per connected consumer, as if it left every partition of the group;
  `moved_*` counts partitions whose active consumer changes under that rule.
- `join`: a new consumer (`JOINER`) joins every partition of the group.

`spread_*` is the busiest minus the idlest consumer's partitions afterwards, `ratio_*` the
busiest over the fair share (`failover-assignment`'s imbalance). The Spark plan calls
`what_if_group` once per group through `applyInPandas`; the pandas twin calls it in a loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import FailoverConsumer, active_consumer_picker, frame_of
from pulsar_lens.plugins.builtin.failover_history.frames import RAW_WHAT_IF_COLUMNS
from pulsar_lens.plugins.builtin.shared.failover import imbalance

WHAT_IF_INPUT = ["parent_topic", "subscription", "topic", "consumer_name"]
"""One row per (partition, connected consumer); `consumer_name` is null for a partition
whose stats list no consumer."""
WHAT_IF_SCHEMA = (
    "parent_topic string, subscription string, scenario string, consumer string, "
    "consumers long, partitions long, moved_modulo long, moved_consistent long, "
    "spread_modulo long, spread_consistent long, ratio_modulo double, ratio_consistent double"
)
JOINER = "what-if-joiner"
"""The name of the consumer the `join` scenario adds (the ring places a consumer by its name)."""

Members = Mapping[str, frozenset[str]]
Assignment = dict[str, str | None]
Picker = Callable[[str], FailoverConsumer | None]


def members_of(rows: pd.DataFrame) -> dict[str, frozenset[str]]:
    """Partition -> the names of the consumers connected to it."""
    members: dict[str, set[str]] = {str(t): set() for t in rows["topic"]}
    for topic, name in zip(rows["topic"], rows["consumer_name"], strict=True):
        if not pd.isna(name):
            members[str(topic)].add(str(name))
    return {t: frozenset(names) for t, names in members.items()}


def what_if_group(rows: pd.DataFrame, charset: str = "utf-8") -> pd.DataFrame:
    """The scenarios of one group (rows of `WHAT_IF_INPUT`), as `RAW_WHAT_IF_COLUMNS`."""
    members = members_of(rows)
    everyone = sorted(set().union(*members.values())) if members else []
    if not everyone:
        return frame_of([], RAW_WHAT_IF_COLUMNS)
    group = {"parent_topic": str(rows["parent_topic"].iloc[0])}
    group["subscription"] = str(rows["subscription"].iloc[0])
    assign = _assigner(charset)
    now = (assign(members, False), assign(members, True))
    switched = _moved(now[0], now[1])
    scenarios = [{**group, **_scenario("now", "", everyone, now, (switched, switched))}]
    for name in everyone:
        after = {t: names - {name} for t, names in members.items()}
        left = (assign(after, False), assign(after, True))
        stay = [c for c in everyone if c != name]
        moved = (_moved(now[0], left[0]), _moved(now[1], left[1]))
        scenarios.append({**group, **_scenario("leave", name, stay, left, moved)})
    joiner = _fresh(JOINER, everyone)
    after = {t: names | {joiner} for t, names in members.items()}
    joined = (assign(after, False), assign(after, True))
    moved = (_moved(now[0], joined[0]), _moved(now[1], joined[1]))
    scenarios.append({**group, **_scenario("join", joiner, [*everyone, joiner], joined, moved)})
    return frame_of(scenarios, RAW_WHAT_IF_COLUMNS)


def _assigner(charset: str) -> Callable[[Members, bool], Assignment]:
    """Partition -> active consumer for given members, one picker per distinct consumer set."""
    pickers: dict[tuple[frozenset[str], bool], Picker] = {}

    def assign(members: Members, consistent: bool) -> Assignment:
        out: Assignment = {}
        for topic, names in members.items():
            key = (names, consistent)
            if key not in pickers:
                group = [FailoverConsumer(n) for n in names]
                pickers[key] = active_consumer_picker(
                    group, consistent_hashing=consistent, charset=charset
                )
            chosen = pickers[key](topic)
            out[topic] = None if chosen is None else chosen.name
        return out

    return assign


def _moved(before: Assignment, after: Assignment) -> int:
    return sum(before[t] != after[t] for t in before)


def _fresh(name: str, taken: Sequence[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def _scenario(
    scenario: str,
    consumer: str,
    consumers: Sequence[str],
    assigned: tuple[Assignment, Assignment],
    moved: tuple[int, int],
) -> dict[str, Any]:
    partitions = len(assigned[0])
    spread, ratio = zip(*(_balance(a, consumers, partitions) for a in assigned), strict=True)
    return {
        "scenario": scenario,
        "consumer": consumer,
        "consumers": len(consumers),
        "partitions": partitions,
        "moved_modulo": moved[0],
        "moved_consistent": moved[1],
        "spread_modulo": spread[0],
        "spread_consistent": spread[1],
        "ratio_modulo": ratio[0],
        "ratio_consistent": ratio[1],
    }


def _balance(assigned: Assignment, consumers: Sequence[str], partitions: int) -> tuple[int, float]:
    """(busiest - idlest, busiest over fair) over `consumers`."""
    tally = Counter(assigned.values())
    counts = [tally[name] for name in consumers]
    return (max(counts) - min(counts) if counts else 0), imbalance(counts, partitions)
