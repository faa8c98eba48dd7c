"""Key_Shared frames for the dashboard: observed hash ranges, shares, and the key lookup.

Pure pandas on the store's `subscriptions`, `consumers` and `draining_hashes` tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from core.hashing import SelectorKind, sticky_key_hash
from core.keyload import compute_key_load

SEPARATOR = " | "
RANGE_COLUMNS = ["consumer_name", "start", "end"]


def subscription_label(topic: str, subscription: str) -> str:
    return f"{topic}{SEPARATOR}{subscription}"


def split_label(label: str) -> tuple[str, str]:
    topic, _, subscription = label.rpartition(SEPARATOR)
    return topic, subscription


def key_shared_subscriptions(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """Key_Shared subscriptions of one snapshot, the most troubled first.

    Columns: label, topic, subscription, consumer_count, draining_hashes_count, msg_backlog.
    """
    columns = ["topic", "subscription", "consumer_count", "draining_hashes_count", "msg_backlog"]
    subs = subscriptions[subscriptions["type"] == "Key_Shared"][columns].copy()
    subs["draining_hashes_count"] = subs["draining_hashes_count"].fillna(0).astype(int)
    pairs = zip(subs["topic"], subs["subscription"], strict=True)
    subs.insert(0, "label", [subscription_label(t, s) for t, s in pairs])
    order = ["draining_hashes_count", "consumer_count", "label"]
    return subs.sort_values(order, ascending=[False, False, True]).reset_index(drop=True)


def hash_ranges(consumers: pd.DataFrame, topic: str, subscription: str) -> pd.DataFrame:
    """consumer_name, start, end (inclusive) of one subscription, ordered by start."""
    rows = consumers[(consumers["topic"] == topic) & (consumers["subscription"] == subscription)]
    out = [
        (name, int(r["start"]), int(r["end"]))
        for name, ranges in zip(rows["consumer_name"], rows["hash_ranges"], strict=True)
        for r in (ranges if ranges is not None else ())
    ]
    frame = pd.DataFrame(out, columns=RANGE_COLUMNS).astype({"start": "int64", "end": "int64"})
    return frame.sort_values("start").reset_index(drop=True)


def consumers_of(consumers: pd.DataFrame, topic: str, subscription: str) -> list[str]:
    rows = consumers[(consumers["topic"] == topic) & (consumers["subscription"] == subscription)]
    return sorted(rows["consumer_name"])


def draining_of(draining: pd.DataFrame, topic: str, subscription: str) -> pd.DataFrame:
    rows = draining[(draining["topic"] == topic) & (draining["subscription"] == subscription)]
    columns = ["consumer_name", "hash", "unack_msgs", "blocked_attempts"]
    return rows[columns].sort_values("hash").reset_index(drop=True)


def compute_shares(ranges: pd.DataFrame, consumers: list[str] | None = None) -> pd.DataFrame:
    """consumer_name, hashes, share (0-1), vs_fair (share / (1/n)); a rangeless consumer gets 0."""
    widths = (ranges["end"] - ranges["start"] + 1).groupby(ranges["consumer_name"]).sum()
    names = sorted(set(consumers or []) | set(widths.index))
    hashes = pd.Series({n: int(widths.get(n, 0)) for n in names}, dtype="int64")
    total = int(hashes.sum())
    share = hashes / total if total else hashes.astype(float)
    fair = 1.0 / len(names) if names else 0.0
    frame = pd.DataFrame(
        {
            "consumer_name": names,
            "hashes": hashes.to_numpy(),
            "share": share.to_numpy(),
            "vs_fair": (share / fair).to_numpy() if fair else share.to_numpy(),
        }
    )
    return frame.sort_values("share", ascending=False).reset_index(drop=True)


def imbalance(shares: pd.DataFrame) -> float:
    """The largest share over the fair share: 1.0 is perfectly even, 2.0 is twice its due."""
    if shares.empty:
        return 0.0
    return float(shares["vs_fair"].max())


def selector_kind(ranges: pd.DataFrame, key_shared_mode: str | None) -> SelectorKind:
    """Which 4.0 selector produced these ranges, read from the mode and the range bounds.

    STICKY mode uses the consumer's own ranges; AUTO_SPLIT without consistent hashing ends its
    top range at 65536 (HashRangeAutoSplit); otherwise consistent hashing over [1, 65535].
    """
    if (key_shared_mode or "").upper() == "STICKY":
        return "sticky"
    if len(ranges) and int(ranges["end"].max()) >= 65536:
        return "auto-split"
    return "consistent"


def sticky_hash(key: str, kind: SelectorKind) -> int:
    """The 4.0 sticky-key hash of a message key (its UTF-8 bytes) for the given selector."""
    return sticky_key_hash(key.encode("utf-8"), selector=kind)


@dataclass(frozen=True, slots=True)
class KeyLookup:
    key: str
    hash: int
    consumer: str | None  # None: no consumer covers the hash (sticky gaps, no consumers)
    draining_for: str | None  # a consumer that still holds unacked messages of this hash


def lookup_key(
    key: str, ranges: pd.DataFrame, draining: pd.DataFrame, kind: SelectorKind
) -> KeyLookup:
    """Which consumer the broker sends `key` to, from the observed ranges."""
    value = sticky_hash(key, kind)
    hit = ranges[(ranges["start"] <= value) & (ranges["end"] >= value)]
    consumer = str(hit["consumer_name"].iloc[0]) if len(hit) else None
    held = draining[draining["hash"] == value]
    holder = str(held["consumer_name"].iloc[0]) if len(held) else None
    return KeyLookup(key=key, hash=value, consumer=consumer, draining_for=holder)


@dataclass(frozen=True)
class KeySharedView:
    """Everything the Key_Shared page draws for one subscription of one snapshot."""

    topic: str
    subscription: str
    kind: SelectorKind
    consumers: list[str]
    ranges: pd.DataFrame
    draining: pd.DataFrame
    shares: pd.DataFrame
    imbalance: float
    msg_backlog: int
    msg_in_replay: int


def compute_view(
    subscriptions: pd.DataFrame, consumers: pd.DataFrame, draining: pd.DataFrame, label: str
) -> KeySharedView:
    topic, subscription = split_label(label)
    sub = subscriptions[
        (subscriptions["topic"] == topic) & (subscriptions["subscription"] == subscription)
    ]
    mode = sub["key_shared_mode"].iloc[0] if len(sub) else None
    ranges = hash_ranges(consumers, topic, subscription)
    names = consumers_of(consumers, topic, subscription)
    shares = compute_shares(ranges, names)
    return KeySharedView(
        topic=topic,
        subscription=subscription,
        kind=selector_kind(ranges, mode if isinstance(mode, str) else None),
        consumers=names,
        ranges=ranges,
        draining=draining_of(draining, topic, subscription),
        shares=shares,
        imbalance=imbalance(shares),
        msg_backlog=_int(sub, "msg_backlog"),
        msg_in_replay=_int(sub, "msg_in_replay"),
    )


TRAFFIC_COLUMNS = ["consumer_name", "sampled_messages", "distinct_keys", "share", "vs_fair"]


def compute_traffic(samples: pd.DataFrame, view: KeySharedView) -> pd.DataFrame:
    """Sampled messages per consumer of the subscription (`key_samples` of its topic against
    the broker's ranges), with vs_fair = share / (1/n); empty without samples for the topic.

    The hash space can be split evenly while the traffic is not: a few hot keys load whichever
    consumer owns their hashes.
    """
    mine = samples[samples["topic"] == view.topic] if len(samples) else samples
    if mine.empty or view.ranges.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in TRAFFIC_COLUMNS})
    ranges = {
        name: list(zip(group["start"].astype(int), group["end"].astype(int), strict=True))
        for name, group in view.ranges.groupby("consumer_name", sort=False)
    }
    for name in view.consumers:
        ranges.setdefault(name, [])
    load = compute_key_load(mine, ranges, selector=view.kind)
    fair = 1.0 / len(ranges)
    load["vs_fair"] = load["share"].astype(float) / fair
    return load.sort_values("share", ascending=False).reset_index(drop=True)[TRAFFIC_COLUMNS]


def _int(frame: pd.DataFrame, column: str) -> int:
    if frame.empty or pd.isna(frame[column].iloc[0]):
        return 0
    return int(frame[column].iloc[0])


def what_if_lanes(now: pd.DataFrame, after: pd.DataFrame, moves: pd.DataFrame) -> pd.DataFrame:
    """lane ("now", "what-if", "moves"), consumer_name, start, end for `charts.chart_what_if`.

    `after`: consumer_name, start, end under the what-if; `moves`: start, end, after (the
    receiving consumer as "name#position", None when nobody receives the hashes).
    """
    receiver = moves["after"].astype("string").str.rsplit("#", n=1).str[0].fillna("(nobody)")
    parts = [
        now[RANGE_COLUMNS].assign(lane="now"),
        after[RANGE_COLUMNS].assign(lane="what-if"),
        pd.DataFrame(
            {"consumer_name": receiver, "start": moves["start"], "end": moves["end"]}
        ).assign(lane="moves"),
    ]
    lanes = pd.concat([p for p in parts if len(p)], ignore_index=True)
    if lanes.empty:
        return pd.DataFrame(columns=["lane", *RANGE_COLUMNS])
    return lanes.astype({"start": "int64", "end": "int64", "consumer_name": "string"})[
        ["lane", *RANGE_COLUMNS]
    ]


@dataclass(frozen=True)
class WhatIfView:
    """A what-if on one subscription: what moved and each consumer's share before and after."""

    change: str
    moved_fraction: float
    losers: list[str]
    lanes: pd.DataFrame  # see what_if_lanes
    per_consumer: pd.DataFrame
