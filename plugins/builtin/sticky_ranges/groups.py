"""`sticky-ranges`' groups of the newest snapshot: each STICKY Key_Shared subscription with its
consumers in connection order, then per topic the readers (non-Key_Shared consumers) that carry
hash ranges. The consumers of every STICKY subscription are found and ordered in one pass (a
merge and one sort), not by a scan of all consumers and a frame per subscription."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import HashRange
from pulsar_lens.core.keyshared.ranges import Member, ranges_of


@dataclass(frozen=True)
class Group:
    label: str
    topic: str
    subscription: str | None  # None: the readers of a topic
    kind: str  # "sticky" or "readers"
    members: list[Member]


def sticky_groups(subscriptions: pd.DataFrame, consumers: pd.DataFrame) -> list[Group]:
    """STICKY subscriptions, then per topic the non-Key_Shared consumers that carry ranges."""
    if subscriptions.empty or consumers.empty:
        return []
    mode = subscriptions["key_shared_mode"].fillna("").astype(str).str.upper()
    sticky = subscriptions[(subscriptions["type"] == "Key_Shared") & (mode == "STICKY")]
    sticky = sticky.sort_values(["topic", "subscription"])
    topics, names = sticky["topic"].tolist(), sticky["subscription"].tolist()
    members = sticky_members(sticky, consumers)
    groups = [
        Group(f"{t} | {s}", t, s, "sticky", m)
        for t, s, m in zip(topics, names, members, strict=True)
    ]
    return groups + reader_groups(subscriptions, consumers)


def sticky_members(sticky: pd.DataFrame, consumers: pd.DataFrame) -> list[list[Member]]:
    """The members of each row of `sticky` as `core.keyshared.ranges.members_of` gives them:
    by `connected_since` (missing last), ties in the stats' order."""
    keys = pd.DataFrame(
        {"topic": sticky["topic"], "subscription": sticky["subscription"], "_g": range(len(sticky))}
    )
    rows = consumers.reset_index(drop=True)
    rows = rows.assign(_row=range(len(rows))).merge(keys, on=["topic", "subscription"])
    rows = rows.assign(_since=pd.to_datetime(rows["connected_since"], utc=True))
    rows = rows.sort_values(["_g", "_since", "_row"], kind="stable", na_position="last")
    group = rows["_g"].to_numpy()
    bounds = np.searchsorted(group, np.arange(len(sticky) + 1)).tolist()
    made = [
        Member(str(n), ranges_of(r), c)
        for n, r, c in zip(
            rows["consumer_name"].tolist(),
            rows["hash_ranges"].tolist(),
            rows["connected_since"].tolist(),
            strict=True,
        )
    ]
    return [made[bounds[i] : bounds[i + 1]] for i in range(len(sticky))]


def reader_groups(subscriptions: pd.DataFrame, consumers: pd.DataFrame) -> list[Group]:
    """Per topic, its consumers with hash ranges whose subscription (its first row) is not
    Key_Shared. Consumers without ranges (nearly all of them: the bulk answer carries none)
    are left out before their subscription's type is looked up, and only the subscriptions
    of the topics left are: at 1,000,000 topics, the merge of every consumer with every
    subscription was most of this plugin's groups."""
    ranged = consumers[
        np.array([_has_ranges(cell) for cell in consumers["hash_ranges"].tolist()], bool)
    ]
    if ranged.empty:
        return []
    listed = subscriptions[subscriptions["topic"].isin(ranged["topic"].unique())]
    kinds = listed[["topic", "subscription", "type"]].drop_duplicates(["topic", "subscription"])
    rows = ranged.merge(kinds, on=["topic", "subscription"], how="left")
    return readers_by_topic(rows[rows["type"] != "Key_Shared"])


def readers_by_topic(rows: pd.DataFrame) -> list[Group]:
    """One readers group per topic of `rows` (consumers with ranges), in topic order."""
    groups = []
    for topic, mine in rows.groupby("topic", sort=True):
        members = [
            Member(f"{m.subscription}/{m.consumer_name}", m.ranges, m.connected_since)
            for m in (_with_ranges(r) for r in mine.itertuples(index=False))
        ]
        groups.append(Group(f"{topic} | readers", str(topic), None, "readers", members))
    return groups


@dataclass(frozen=True)
class _Row:
    subscription: str
    consumer_name: str
    ranges: tuple[HashRange, ...]
    connected_since: Any


def _with_ranges(row: Any) -> _Row:
    return _Row(
        row.subscription, row.consumer_name, ranges_of(row.hash_ranges), row.connected_since
    )


def _has_ranges(cell: Any) -> bool:
    """`bool(ranges_of(cell))`, without sorting the ranges."""
    return cell is not None and not isinstance(cell, float) and len(cell) > 0
