"""sticky-ranges' groups as they were built before one pass found every STICKY subscription's
consumers (a scan of all consumers and `members_of` per subscription), and its readers before
the consumers without ranges were left out first (every consumer merged with every
subscription). Kept only as the reference the new path must equal
(tests/plugins/test_sticky_ranges_groups.py); not product code."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulsar_lens.core.keyshared.ranges import members_of
from pulsar_lens.plugins.builtin.sticky_ranges.groups import Group, _has_ranges, readers_by_topic


def sticky_groups(subscriptions: pd.DataFrame, consumers: pd.DataFrame) -> list[Group]:
    """STICKY subscriptions, then per topic the non-Key_Shared consumers that carry ranges."""
    groups: list[Group] = []
    if subscriptions.empty or consumers.empty:
        return groups
    mode = subscriptions["key_shared_mode"].fillna("").astype(str).str.upper()
    sticky = subscriptions[(subscriptions["type"] == "Key_Shared") & (mode == "STICKY")]
    for sub in sticky.sort_values(["topic", "subscription"]).itertuples(index=False):
        mine = consumers[
            (consumers["topic"] == sub.topic) & (consumers["subscription"] == sub.subscription)
        ]
        label = f"{sub.topic} | {sub.subscription}"
        groups.append(Group(label, sub.topic, sub.subscription, "sticky", members_of(mine)))
    return groups + reader_groups(subscriptions, consumers)


def reader_groups(subscriptions: pd.DataFrame, consumers: pd.DataFrame) -> list[Group]:
    kinds = subscriptions[["topic", "subscription", "type"]].drop_duplicates(
        ["topic", "subscription"]
    )
    rows = consumers.merge(kinds, on=["topic", "subscription"], how="left")
    rows = rows[rows["type"] != "Key_Shared"]
    rows = rows[np.array([_has_ranges(cell) for cell in rows["hash_ranges"].tolist()], bool)]
    return readers_by_topic(rows)
