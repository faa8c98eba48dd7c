"""Frames of `key-shared-map`'s what-if and key lookup (see `key_shared` for the rules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import empty_frame, frame_of, sticky_key_hash
from pulsar_lens.core.keyshared.ranges import (
    Member,
    hash_selector,
    ranges_text,
    routable_count,
)
from pulsar_lens.core.keyshared.rebuild import Model, WhatIf

State = tuple[list[Member], Model]
WHAT_IF_COLUMNS = [
    "label",
    "change",
    "position",
    "consumer_name",
    "hashes_before",
    "hashes_after",
    "share_before",
    "share_after",
    "lost_hashes",
    "gained_hashes",
    "lost_ranges",
]
MOVE_COLUMNS = ["label", "start", "end", "size", "before", "after"]
AFTER_COLUMNS = ["label", "position", "consumer_name", "start", "end"]
LOOKUP_COLUMNS = [
    "label",
    "key",
    "hash",
    "selector",
    "consumer",
    "position",
    "model_consumer",
    "consumer_after",
    "draining_for",
]


def what_if_frames(label: str, what_if: WhatIf | None) -> dict[str, pd.DataFrame]:
    """The what-if per consumer, the moved ranges and every consumer's ranges after it."""
    if what_if is None:
        return {
            "what_if": empty_frame(WHAT_IF_COLUMNS),
            "moves": empty_frame(MOVE_COLUMNS),
            "what_if_ranges": empty_frame(AFTER_COLUMNS),
        }
    return {
        "what_if": frame_of(per_consumer_rows(label, what_if), WHAT_IF_COLUMNS),
        "moves": frame_of(move_rows(label, what_if), MOVE_COLUMNS),
        "what_if_ranges": frame_of(after_rows(label, what_if), AFTER_COLUMNS),
    }


def per_consumer_rows(label: str, what_if: WhatIf) -> list[dict[str, Any]]:
    before = what_if.before.by_consumer(what_if.handles)
    after = what_if.after.by_consumer(what_if.handles)
    low, high = what_if.space
    size = what_if.space_size()

    def count(ranges: Any) -> int:
        return routable_count(ranges, low=low, high=high)

    rows = []
    for i, handle in enumerate(what_if.handles):
        lost = [(m.start, m.end) for m in what_if.moves if m.before is handle]
        gained = [(m.start, m.end) for m in what_if.moves if m.after is handle]
        rows.append(
            {
                "label": label,
                "change": what_if.change,
                "position": i,
                "consumer_name": handle.name,
                "hashes_before": count(before.get(handle, ())),
                "hashes_after": count(after.get(handle, ())),
                "share_before": count(before.get(handle, ())) / size,
                "share_after": count(after.get(handle, ())) / size,
                "lost_hashes": count(lost),
                "gained_hashes": count(gained),
                "lost_ranges": ranges_text(lost),
            }
        )
    return rows


def move_rows(label: str, what_if: WhatIf) -> list[dict[str, Any]]:
    position = {h: i for i, h in enumerate(what_if.handles)}
    return [
        {
            "label": label,
            "start": m.start,
            "end": m.end,
            "size": m.end - m.start + 1,
            "before": _name_at(m.before, position),
            "after": _name_at(m.after, position),
        }
        for m in what_if.moves
    ]


def after_rows(label: str, what_if: WhatIf) -> list[dict[str, Any]]:
    after = what_if.after.by_consumer(what_if.handles)
    return [
        {"label": label, "position": i, "consumer_name": h.name, "start": s, "end": e}
        for i, h in enumerate(what_if.handles)
        for s, e in after.get(h, ())
    ]


def _name_at(handle: Any, position: Mapping[Any, int]) -> str | None:
    return None if handle is None else f"{handle.name}#{position[handle]}"


def lookup_row(
    label: str,
    key: str,
    state: State | None,
    what_if: WhatIf | None,
    draining: pd.DataFrame | None = None,
) -> dict[str, Any] | None:
    """Where the broker sends `key` (as a partition key): by its ranges, our model's and after
    the what-if, and the consumer its hash still drains to (`draining`: that subscription's
    draining hashes), hashed as the model's broker line does. Unknown selectors get the
    consistent-hashing hash and no consumer."""
    if not key or state is None:
        return None
    members, model = state
    kind = hash_selector(model.kind)
    value = sticky_key_hash(key.encode("utf-8"), selector=kind, pulsar=model.pulsar)
    owner = next(
        (p for p, m in enumerate(members) if any(s <= value <= e for s, e in m.ranges)), None
    )
    if model.kind == "unknown":
        owner = None
    predicted = model.selector.select(value) if model.selector is not None else None
    after = None
    if what_if is not None:
        at = int(what_if.after.owner_of(np.asarray([value], np.int64))[0])
        after = what_if.after.table[at].name if at >= 0 else None
    return {
        "label": label,
        "key": key,
        "hash": value,
        "selector": model.kind,
        "consumer": members[owner].name if owner is not None else None,
        "position": owner,
        "model_consumer": predicted.name if predicted is not None else None,
        "consumer_after": after,
        "draining_for": _holder(draining, value),
    }


def _holder(draining: pd.DataFrame | None, value: int) -> str | None:
    if draining is None or draining.empty:
        return None
    held = draining.loc[draining["hash"] == value, "consumer_name"]
    return str(held.iloc[0]) if len(held) else None
