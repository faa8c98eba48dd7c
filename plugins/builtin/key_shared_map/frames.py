"""`key-shared-map`'s per-subscription, per-consumer and per-range frames, built by column.

Consistent-hashing subscriptions come from one `core.keyshared.fit.Fit`; the others (auto split,
sticky, unknown) from their own `core.keyshared.rebuild.Model`. Row order: subscriptions as
given, consumers in connection order, and per subscription the broker's ranges (by consumer)
followed by the model's when it drifts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import empty_frame
from pulsar_lens.core.keyshared.fit import Fit
from pulsar_lens.core.keyshared.layout import Layout
from pulsar_lens.core.keyshared.ranges import (
    AUTO_SPLIT_TOP,
    I64,
    ROUTABLE,
    ROUTABLE_HIGH,
    ROUTABLE_LOW,
    WIDE_HIGH,
    Kind,
)
from pulsar_lens.core.keyshared.rebuild import Model
from pulsar_lens.core.legacy_selectors import LegacyConsistentSelector
from pulsar_lens.plugins.builtin.key_shared_map.drift import Ranges
from pulsar_lens.plugins.builtin.key_shared_map.drift import model_columns as _model_columns

SUB_COLUMNS = [
    "label",
    "topic",
    "subscription",
    "mode",
    "selector",
    "replica_points",
    "points_note",
    "consumers",
    "max_share",
    "imbalance",
    "drift",
    "drift_hashes",
    "drift_reason",
    "draining_hashes",
    "msg_backlog",
    "msg_in_replay",
]
CONSUMER_COLUMNS = [
    "label",
    "position",
    "consumer_name",
    "connected_since",
    "ranges",
    "hashes",
    "share",
    "fair_share",
    "vs_fair",
    "model_hashes",
    "drift_hashes",
]
RANGE_COLUMNS = ["label", "source", "position", "consumer_name", "start", "end", "size"]


@dataclass(frozen=True)
class Analysis:
    """Every subscription's layout, selector kind and model."""

    labels: list[str]
    layout: Layout
    kinds: list[Kind]
    fit: Fit  # the consistent-hashing subscriptions
    models: Mapping[int, Model]  # the others, by subscription

    @functools.cached_property
    def fitted(self) -> dict[int, int]:
        """Subscription -> its place in `fit`."""
        return {s: k for k, s in enumerate(self.fit.subs.tolist())}

    def model_ranges(self, sub: int) -> Ranges | None:
        """Each member's ranges in the model (None: not modelled)."""
        at = self.fitted.get(sub)
        if at is None:
            model = self.models[sub]
            if model.selector is None:
                return None
            if isinstance(model.selector, LegacyConsistentSelector):  # as 3.0.7 lists them
                listed = model.selector.listed_ranges()
                return [tuple(sorted(listed.get(h, ()))) for h in model.handles]
            ranges = model.selector.assignments().by_consumer(model.handles)
            return [ranges.get(h, ()) for h in model.handles]
        fit = self.fit
        low, high = np.searchsorted(fit.model_sub, [at, at + 1])
        owners, starts, ends = (a[low:high].tolist() for a in fit.model_columns())
        out: list[list[tuple[int, int]]] = [[] for _ in range(self.layout.size(sub))]
        for owner, start, end in zip(owners, starts, ends, strict=True):
            out[owner].append((start, end))
        return [tuple(r) for r in out]


def columns_frame(columns: Mapping[str, Any], names: Sequence[str], rows: int) -> pd.DataFrame:
    return pd.DataFrame(dict(columns), columns=list(names)) if rows else empty_frame(names)


def strings(values: Sequence[str], at: I64) -> pd.Series:
    """values[at] as a categorical column: each distinct string is held once, however many
    rows repeat it (a consumer's name on each of its up to 65,536 ranges)."""
    codes, uniques = pd.factorize(pd.Series(list(values), dtype=object))
    return pd.Series(pd.Categorical.from_codes(codes[at], categories=uniques))


def map_frames(subs: pd.DataFrame, analysis: Analysis) -> dict[str, pd.DataFrame]:
    layout = analysis.layout
    shares = _shares(layout)
    drifting = _drifting(analysis)
    model_hashes, wrong = _model_columns(analysis, drifting)
    return {
        "subscriptions": _subscriptions(subs, analysis, shares),
        "consumers": _consumers(analysis, shares, model_hashes, wrong),
        "ranges": _ranges(analysis, drifting),
    }


def _shares(layout: Layout) -> tuple[I64, np.ndarray]:
    """Every consumer's hashes and share of its subscription's hash space."""
    sub = layout.sub_of()
    owner = layout.range_owner()
    wide = np.zeros(layout.subscriptions, bool)
    np.logical_or.at(wide, sub[owner], layout.ends > AUTO_SPLIT_TOP)
    low = np.where(wide, 0, ROUTABLE_LOW)[sub[owner]]
    high = np.where(wide, WIDE_HIGH, ROUTABLE_HIGH)[sub[owner]]
    sizes = np.maximum(0, np.minimum(layout.ends, high) - np.maximum(layout.starts, low) + 1)
    total = np.concatenate([[0], np.cumsum(sizes)])
    hashes = total[layout.range_first[1:]] - total[layout.range_first[:-1]]
    space = np.where(wide, WIDE_HIGH + 1, ROUTABLE)[sub]
    return hashes, hashes / space


def _drifting(analysis: Analysis) -> dict[int, Ranges]:
    """Model ranges of the subscriptions whose model drifts."""
    out = {}
    for k, s in enumerate(analysis.fit.subs.tolist()):
        if analysis.fit.drift[k] > 0:
            out[s] = analysis.model_ranges(s)
    for s, model in analysis.models.items():
        if model.drift and model.selector is not None:
            out[s] = analysis.model_ranges(s)
    return {s: r for s, r in out.items() if r is not None}


def _subscriptions(
    subs: pd.DataFrame, analysis: Analysis, shares: tuple[I64, np.ndarray]
) -> pd.DataFrame:
    layout, fit = analysis.layout, analysis.fit
    counts = np.diff(layout.first)
    top = np.zeros(layout.subscriptions)
    np.maximum.at(top, layout.sub_of(), shares[1])
    facts: dict[int, tuple[int | None, str, int, str]] = {
        s: (m.points, m.points_note, m.drift_hashes, m.drift_reason)
        for s, m in analysis.models.items()
    }
    for k, s in enumerate(fit.subs.tolist()):
        facts[s] = (fit.points[k], fit.notes[k], fit.drift[k], fit.reasons[k])
    ordered = [facts[s] for s in range(len(counts))]
    drift = [f[2] for f in ordered]
    columns = {
        "label": analysis.labels,
        "topic": subs["topic"].tolist(),
        "subscription": subs["subscription"].tolist(),
        "mode": subs["key_shared_mode"].tolist(),
        "selector": analysis.kinds,
        "replica_points": [f[0] for f in ordered],
        "points_note": [f[1] for f in ordered],
        "consumers": counts.tolist(),
        "max_share": top.tolist(),
        "imbalance": (top * counts).tolist(),
        "drift": [d > 0 for d in drift],
        "drift_hashes": drift,
        "drift_reason": [f[3] for f in ordered],
        "draining_hashes": _counts(subs, "draining_hashes_count"),
        "msg_backlog": _counts(subs, "msg_backlog"),
        "msg_in_replay": _counts(subs, "msg_in_replay"),
    }
    return columns_frame(columns, SUB_COLUMNS, len(counts))


def _counts(subs: pd.DataFrame, column: str) -> list[int]:
    """A count column of the subscriptions, a missing value (3.x brokers) as 0."""
    if column not in subs:
        return [0] * len(subs)
    values = pd.to_numeric(subs[column], errors="coerce").fillna(0).astype("int64")
    return [int(v) for v in values]


def _consumers(
    analysis: Analysis, shares: tuple[I64, np.ndarray], model_hashes: list[Any], wrong: list[Any]
) -> pd.DataFrame:
    layout = analysis.layout
    sub = layout.sub_of()
    fair = 1 / np.diff(layout.first)[sub]
    columns = {
        "label": [analysis.labels[s] for s in sub.tolist()],
        "position": layout.positions().tolist(),
        "consumer_name": layout.names,
        "connected_since": layout.since,
        "ranges": np.diff(layout.range_first).tolist(),
        "hashes": shares[0].tolist(),
        "share": shares[1].tolist(),
        "fair_share": fair.tolist(),
        "vs_fair": (shares[1] / fair).tolist(),
        "model_hashes": model_hashes,
        "drift_hashes": wrong,
    }
    return columns_frame(columns, CONSUMER_COLUMNS, len(layout.names))


def _ranges(analysis: Analysis, drifting: Mapping[int, Ranges]) -> pd.DataFrame:
    """The broker's ranges of every subscription, then the model's of a drifting one."""
    layout = analysis.layout
    owner = layout.range_owner()
    parts = [(layout.sub_of()[owner] * 2, owner, layout.starts, layout.ends)]
    parts += [_model_part(layout, s, modelled) for s, modelled in drifting.items()]
    key, who, start, end = (np.concatenate(c) for c in zip(*parts, strict=True))
    if len(parts) > 1:  # each drifting model right after its subscription's broker ranges
        order = np.argsort(key, kind="stable")
        key, who, start, end = key[order], who[order], start[order], end[order]
    if not len(key):
        return empty_frame(RANGE_COLUMNS)
    columns = {
        "label": strings(analysis.labels, key // 2),
        "source": strings(["broker", "model"], key % 2),
        "position": who - layout.first[layout.sub_of()[who]],
        "consumer_name": strings(layout.names, who),
        "start": start,
        "end": end,
        "size": end - start + 1,
    }
    return pd.DataFrame(columns, columns=RANGE_COLUMNS)


def _model_part(layout: Layout, sub: int, modelled: Ranges) -> tuple[I64, I64, I64, I64]:
    """(sort key, consumer, start, end) of a subscription's model ranges."""
    first = int(layout.first[sub])
    who = [first + p for p, ranges in enumerate(modelled) for _ in ranges]
    pairs = np.asarray([r for ranges in modelled for r in ranges], np.int64).reshape(-1, 2)
    key = np.full(len(who), 2 * sub + 1, np.int64)
    return key, np.asarray(who, np.int64), pairs[:, 0], pairs[:, 1]
