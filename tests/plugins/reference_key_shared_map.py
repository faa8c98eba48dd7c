"""key-shared-map's per-consumer model columns as they were before the 16-bit comparison of
broker and model ranges was batched (plugin version 1.3): an owner array of 65,537 hashes per
side and a pass over it per consumer, for every modelled subscription. Kept only as the
reference the batched path must equal frame for frame
(tests/plugins/test_key_shared_map_vectorised.py, benchmarks/results_pass.py); not product
code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pulsar_lens.core.keyshared.ranges import (
    ROUTABLE_HIGH,
    ROUTABLE_LOW,
    SLOTS,
    Member,
    differing_by_owner,
    owner_array,
    routable_count,
)
from pulsar_lens.plugins.builtin.key_shared_map.frames import Analysis, Ranges


def model_columns(
    analysis: Analysis, drifting: Mapping[int, Ranges]
) -> tuple[list[Any], list[Any]]:
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
    for s, model in analysis.models.items():
        modelled = analysis.model_ranges(s)
        if modelled is not None:
            a = int(layout.first[s])
            low, high = model.space
            counts = [routable_count(r, low=low, high=high) for r in modelled]
            model_hashes[a : a + len(modelled)] = counts
            wrong[a : a + len(modelled)] = wrong_of(layout.members(s), modelled, wide=high > SLOTS)
    fitted = analysis.fitted
    for s, modelled in drifting.items():
        if s in fitted:  # 4.0's consistent hashing: 16-bit
            a = int(layout.first[s])
            wrong[a : a + len(modelled)] = wrong_of(layout.members(s), modelled)
    return model_hashes, wrong


def wrong_of(members: list[Member], modelled: Ranges, *, wide: bool = False) -> list[int]:
    """Per member: the hashes that broker and model do not both give it (31-bit: by range)."""
    if wide:
        return differing_by_owner([m.ranges for m in members], modelled)[1]
    observed = owner_array([m.ranges for m in members])
    predicted = owner_array(modelled)
    return [int(((observed == p) != (predicted == p)).sum()) for p in range(len(members))]
