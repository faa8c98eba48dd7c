"""The classic Key_Shared dispatcher's recently joined consumers, held back until the
mark-delete position passes the read position they joined at (Pulsar 3.x, or 4.0 with
`subscriptionKeySharedUseClassicPersistentImplementation=true`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pulsar_lens.api import empty_frame
from pulsar_lens.plugins.builtin.stuck_hashes.windows import run_start, with_positions

HELD_COLUMNS = [
    "topic",
    "subscription",
    "consumer_name",
    "read_position_when_joining",
    "held_since",
    "held_for_s",
    "connected_since",
]
KEY = ["topic", "subscription", "consumer_name"]


def parse_positions(text: Any) -> Mapping[str, str]:
    """`consumersAfterMarkDeletePosition` as stored (JSON object text) -> {consumer: position}."""
    if text is None or (not isinstance(text, str) and pd.isna(text)) or not str(text).strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


MARKED: Mapping[str, str] = {
    "snapshot_id": "object",
    "topic": "object",
    "subscription": "object",
    "consumers_after_mark_delete_position": "object",
}
"""The columns and dtypes of `marked`, the step frame of each poll."""


def marked(subs: pd.DataFrame) -> pd.DataFrame:
    """The rows that name consumers after the mark-delete position (Key_Shared subscriptions
    of the classic dispatcher), with the columns `compute_held_back` reads: a few rows of a
    poll, kept per poll (`StuckHashes.step`) instead of reading the window's every row."""
    if subs.empty:
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in MARKED.items()})
    text = subs["consumers_after_mark_delete_position"]
    kept = subs[text.notna() & ~text.astype(str).str.strip().isin(["", "{}"])]
    return kept[list(MARKED)].astype(dict(MARKED)).reset_index(drop=True)


def compute_held_back(
    marked_rows: pd.DataFrame, consumers: pd.DataFrame, order: pd.DataFrame
) -> pd.DataFrame:
    """Consumers held back in the newest snapshot, and since when (consecutive polls), from
    the window's `marked` rows."""
    held = _held_rows(with_positions(marked_rows, order))
    if held.empty:
        return empty_frame(HELD_COLUMNS)
    newest = int(order["position"].iloc[-1])
    times = dict(zip(order["position"], order["collected_at"], strict=True))
    rows = []
    for (topic, sub, name), group in held.groupby(KEY):
        positions = sorted(group["position"])
        if positions[-1] != newest:
            continue
        since = times[positions[run_start(positions)]]
        rows.append(
            {
                "topic": topic,
                "subscription": sub,
                "consumer_name": name,
                "read_position_when_joining": group["position_text"].iloc[-1],
                "held_since": since,
                "held_for_s": (times[newest] - since).total_seconds(),
            }
        )
    if not rows:
        return empty_frame(HELD_COLUMNS)
    return _with_connected_since(pd.DataFrame(rows), consumers)


def _held_rows(subs: pd.DataFrame) -> pd.DataFrame:
    rows = [
        {
            "topic": row.topic,
            "subscription": row.subscription,
            "consumer_name": name,
            "position_text": position,
            "position": row.position,
        }
        for row in subs.itertuples(index=False)
        for name, position in parse_positions(row.consumers_after_mark_delete_position).items()
    ]
    return pd.DataFrame(rows, columns=[*KEY, "position_text", "position"])


def _with_connected_since(held: pd.DataFrame, consumers: pd.DataFrame) -> pd.DataFrame:
    """Add when each held consumer connected; its own readPositionWhenJoining wins if known."""
    facts = consumers.groupby(KEY, as_index=False).agg(
        connected_since=("connected_since", "min"),
        joined_at=("read_position_when_joining", "first"),
    )
    out = held.merge(facts, on=KEY, how="left")
    out["read_position_when_joining"] = out["joined_at"].where(
        out["joined_at"].notna(), out["read_position_when_joining"]
    )
    return out.reindex(columns=HELD_COLUMNS)
