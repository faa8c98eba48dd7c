"""`key-shared-map`'s per-consumer model columns: each consumer's hashes in the model, and the
hashes where broker and model disagree about it (`drift_hashes`).

The 16-bit comparisons of every modelled subscription are made together, on flat arrays
(`narrow_wrong`): hashes of subscription `k` are keyed `k * 2**18 + hash`, the cuts of both
sides' ranges split them into segments, and each segment's owner on either side is one
`searchsorted`. A subscription whose ranges are not that simple (a range outside 0..65536 or
empty, or overlapping another on its side) is compared as before, on an owner array per hash
(`wrong_of`), whose rules for those cases (a later owner wins an overlap) it keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pulsar_lens.core.keyshared.layout import Layout
from pulsar_lens.core.keyshared.ranges import (
    I64,
    ROUTABLE_HIGH,
    ROUTABLE_LOW,
    SLOTS,
    Member,
    differing_by_owner,
    owner_array,
    routable_count,
)

Ranges = list[tuple[tuple[int, int], ...]]
_SPAN = 1 << 18  # hashes 0..SLOTS - 1 of one subscription, and room between two


def model_columns(analysis: Any, drifting: Mapping[int, Ranges]) -> tuple[list[Any], list[Any]]:
    """Per consumer: its hashes in the model and the hashes where broker and model disagree
    about it (None where the subscription is not modelled). `analysis` is
    `frames.Analysis`."""
    layout, fit = analysis.layout, analysis.fit
    count = len(layout.names)
    model_hashes: list[Any] = [None] * count
    wrong: list[Any] = [None] * count
    if len(fit.subs):
        consumer = layout.first[fit.subs[fit.model_sub]] + fit.model_owner
        sizes = (
            np.minimum(fit.model_end, ROUTABLE_HIGH) - np.maximum(fit.model_start, ROUTABLE_LOW) + 1
        )
        totals = np.bincount(consumer, np.maximum(sizes, 0), minlength=count).astype(np.int64)
        for a, b in zip(
            layout.first[fit.subs].tolist(), layout.first[fit.subs + 1].tolist(), strict=True
        ):
            model_hashes[a:b] = totals[a:b].tolist()
            wrong[a:b] = [0] * (b - a)
    modelled_of: dict[int, Ranges] = {}
    wide: set[int] = set()
    for s, model in analysis.models.items():
        modelled = analysis.model_ranges(s)
        if modelled is not None:
            modelled_of[s] = modelled
            if model.space[1] > SLOTS:
                wide.add(s)
    fitted = analysis.fitted
    narrow = [s for s in modelled_of if s not in wide]
    narrow += [s for s in drifting if s in fitted]
    found = narrow_wrong(
        layout, [(s, modelled_of[s] if s in modelled_of else drifting[s]) for s in narrow]
    )
    for s, modelled in modelled_of.items():  # in the order, and slices, they always had
        a = int(layout.first[s])
        low, high = analysis.models[s].space
        model_hashes[a : a + len(modelled)] = [
            routable_count(r, low=low, high=high) for r in modelled
        ]
        if s in wide:
            ranges = [m.ranges for m in layout.members(s)]
            wrong[a : a + len(modelled)] = differing_by_owner(ranges, modelled)[1]
        else:
            wrong[a : a + len(modelled)] = found[s]
    for s, modelled in drifting.items():
        if s in fitted:  # 4.0's consistent hashing: 16-bit
            a = int(layout.first[s])
            wrong[a : a + len(modelled)] = found[s]
    return model_hashes, wrong


def wrong_of(members: Sequence[Member], modelled: Ranges) -> list[int]:
    """Per member: the hashes 0..65536 that broker and model do not both give it, from an
    owner array per side (a later owner wins an overlap)."""
    observed = owner_array([m.ranges for m in members])
    predicted = owner_array(modelled)
    return [int(((observed == p) != (predicted == p)).sum()) for p in range(len(members))]


def narrow_wrong(layout: Layout, cases: Sequence[tuple[int, Ranges]]) -> dict[int, list[int]]:
    """`wrong_of` for each (subscription, model ranges) of `cases`: by segment, all at once,
    for the subscriptions whose ranges are simple; one by one for the others."""
    if not cases:
        return {}
    subs = np.asarray([s for s, _ in cases], np.int64)
    members = (layout.first[subs + 1] - layout.first[subs]).astype(np.int64)
    modelled = np.asarray([len(m) for _, m in cases], np.int64)
    width = np.maximum(members, modelled)
    base = np.concatenate([[0], np.cumsum(width)[:-1]]).astype(np.int64)
    observed = _observed(layout, subs, base)
    predicted = _predicted(cases, base)
    simple = _simple(observed, len(cases)) & _simple(predicted, len(cases))
    counts = _segment_counts(observed, predicted, simple, int(width.sum()))
    found: dict[int, list[int]] = {}
    for k, (s, ranges) in enumerate(cases):
        if simple[k]:
            found[s] = counts[base[k] : base[k] + members[k]].tolist()
        else:
            found[s] = wrong_of(layout.members(s), ranges)
    return found


Side = tuple[I64, I64, I64, I64]  # (case, start, end, owner) of every range


def _observed(layout: Layout, subs: I64, base: I64) -> Side:
    """The broker's ranges of the cases' consumers, owners numbered from each case's base."""
    consumers = [np.arange(layout.first[s], layout.first[s + 1]) for s in subs.tolist()]
    case = np.repeat(np.arange(len(subs)), [len(c) for c in consumers])
    consumer = np.concatenate(consumers).astype(np.int64) if consumers else np.zeros(0, np.int64)
    owner = base[case] + consumer - layout.first[subs][case]
    counts = layout.range_first[consumer + 1] - layout.range_first[consumer]
    at = np.repeat(layout.range_first[consumer], counts) + _within(counts)
    return (
        np.repeat(case, counts),
        layout.starts[at],
        layout.ends[at],
        np.repeat(owner, counts),
    )


def _predicted(cases: Sequence[tuple[int, Ranges]], base: I64) -> Side:
    rows = [
        (k, start, end, int(base[k]) + p)
        for k, (_, ranges) in enumerate(cases)
        for p, owned in enumerate(ranges)
        for start, end in owned
    ]
    table = np.asarray(rows, np.int64).reshape(-1, 4)
    return table[:, 0], table[:, 1], table[:, 2], table[:, 3]


def _within(counts: I64) -> I64:
    """0..n-1 for each n of `counts`, back to back."""
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _simple(side: Side, cases: int) -> np.ndarray:
    """Per case: every range of this side within 0..65536, not empty, none overlapping."""
    case, start, end, _ = side
    bad = (start < 0) | (end < start) | (end > SLOTS - 1)
    order = np.lexsort((end, start, case))
    c, s, e = case[order], start[order], end[order]
    overlap = (c[1:] == c[:-1]) & (e[:-1] >= s[1:])
    ok = np.ones(cases, bool)
    ok[case[bad]] = False
    ok[c[1:][overlap]] = False
    return ok


def _segment_counts(observed: Side, predicted: Side, simple: np.ndarray, owners: int) -> I64:
    """Per owner: the hashes of the simple cases where the two sides' owners differ and one of
    them is this owner."""
    keyed = []
    for case, start, end, owner in (observed, predicted):
        mine = simple[case]
        order = np.argsort(case[mine] * _SPAN + start[mine], kind="stable")
        keyed.append(
            (
                (case[mine] * _SPAN + start[mine])[order],
                (case[mine] * _SPAN + end[mine])[order],
                owner[mine][order],
            )
        )
    cuts = np.unique(np.concatenate([np.concatenate([s, e + 1]) for s, e, _ in keyed]))
    if len(cuts) < 2:
        return np.zeros(owners, np.int64)
    low, sizes = cuts[:-1], np.diff(cuts)
    a, b = (_owner_at(side, low) for side in keyed)
    differs = a != b
    counts = np.zeros(owners, np.int64)
    for who in (a, b):
        hit = differs & (who >= 0)
        counts += np.bincount(who[hit], sizes[hit], minlength=owners).astype(np.int64)
    return counts


def _owner_at(side: tuple[I64, I64, I64], keys: I64) -> I64:
    """The owner of the range holding each key (-1: none); ranges sorted and disjoint."""
    starts, ends, who = side
    if not len(starts):
        return np.full(len(keys), -1, np.int64)
    at = np.searchsorted(starts, keys, side="right") - 1
    safe = np.clip(at, 0, None)
    return np.where((at >= 0) & (ends[safe] >= keys), who[safe], -1)
