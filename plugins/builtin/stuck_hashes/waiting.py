"""The consumer a draining hash waits for: the one whose reported ranges now cover it.

Every hash of every subscription is looked up at once over the flat ranges of
`core.keyshared.layout`, in O((hashes + ranges) log) whatever the number of hashes, ranges
and consumers: a per-hash scan of the consumers' ranges took minutes at a few thousand
draining hashes, and a broker may report 65,535 per consumer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pulsar_lens.core.keyshared.layout import from_frame, subscription_keys
from pulsar_lens.core.keyshared.ranges import I64


def waiting_consumers(hashes: pd.DataFrame, consumers: pd.DataFrame) -> list[str | None]:
    """Per row of `hashes` (topic, subscription, hash): the consumer of that subscription
    whose ranges cover the hash, or None.

    Ranges of one subscription never overlap on a sound broker; where they do, the name is
    that of the covering range reaching furthest, followed by how many other ranges cover
    the hash, so the row stays one name long however many consumers overlap.
    """
    if hashes.empty:
        return []
    pairs = ["topic", "subscription"]
    firsts = hashes[pairs].drop_duplicates()
    keys = subscription_keys(firsts)
    hash_sub = hashes.groupby(pairs, sort=False, dropna=False).ngroup().to_numpy(np.int64)
    layout = from_frame(keys, consumers)
    owner = layout.range_owner()
    sound = layout.starts <= layout.ends  # a reversed range covers nothing
    found, others = cover(
        layout.sub_of()[owner][sound],
        layout.starts[sound],
        layout.ends[sound],
        hash_sub,
        hashes["hash"].to_numpy(np.int64),
    )
    return _names(layout.names, owner[sound], found, others)


def cover(sub: I64, starts: I64, ends: I64, hash_sub: I64, values: I64) -> tuple[I64, I64]:
    """For each query (hash_sub[k], values[k]): the range of that subscription covering the
    value that ends last (-1: none), and how many other ranges cover it.

    Values are ranked over all of them, so (subscription, value) packs into one sortable
    int64 key; ranges of other subscriptions then never reach a query's key.
    """
    if not len(starts):
        return np.full(len(values), -1, np.int64), np.zeros(len(values), np.int64)
    ranked = np.unique(np.concatenate([starts, ends, values]))
    width = len(ranked) + 1
    low = sub * width + np.searchsorted(ranked, starts)
    high = sub * width + np.searchsorted(ranked, ends)
    query = hash_sub * width + np.searchsorted(ranked, values)
    order = np.lexsort((high, low))
    low, high = low[order], high[order]
    reach = np.maximum.accumulate(high)  # the furthest end among ranges starting so far
    furthest = np.maximum.accumulate(np.where(high == reach, np.arange(len(high)), 0))
    at = np.searchsorted(low, query, side="right") - 1
    safe = np.maximum(at, 0)
    covered = (at >= 0) & (reach[safe] >= query)
    found = np.where(covered, order[furthest[safe]], -1)
    count = np.searchsorted(low, query, side="right") - np.searchsorted(np.sort(high), query)
    return found, np.where(covered, count - 1, 0)


def _names(names: Sequence[str], owner: I64, found: I64, others: I64) -> list[str | None]:
    texts: dict[tuple[int, int], str] = {}  # one string per (consumer, overlap), not per hash
    out: list[str | None] = []
    for at, more in zip(found.tolist(), others.tolist(), strict=True):
        if at < 0:
            out.append(None)
            continue
        key = (int(owner[at]), more)
        if key not in texts:
            name = names[key[0]]
            texts[key] = f"{name} (+{more} overlapping range(s))" if more else name
        out.append(texts[key])
    return out
