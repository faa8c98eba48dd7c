"""`key-shared-map`: who owns which sticky-key hashes in each Key_Shared subscription.

Per subscription (one per topic or partition) of the newest snapshot: every consumer's hash
ranges as the broker reports them (`keyHashRangeArrays`), its share of the routable hashes
1..65535, and the imbalance (largest share over the fair share 1/n). The selector is read from
the mode and the ranges (see `hash_ranges.infer_selector`); for consistent hashing the replica
points are inferred from the ranges (see `key_shared_rebuild`).

**Drift**: our model, rebuilt from the consumer names in connection order (`connected_since`)
with the inferred selector and points, must give the broker's ranges exactly. When it does not,
the subscription is flagged with the number of hashes that differ: a replica-points setting we
could not find, or a bug in the model.

**What-if** on one subscription (the `subscription` param, else the first): add a consumer by
name, remove the most recently connected consumer of a name, or change the replica points
(applied in that order of precedence, one at a time). It reports the fraction of the hash
space that moves, the ranges each consumer loses (on a 4.0 broker, the hashes there with
unacknowledged messages start draining) and each consumer's share before and after.

**Lookup**: a key's sticky hash (hashed as the UTF-8 bytes of a partition key) and the
consumer that receives it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from plugins.api import (
    AnalysisPlugin,
    BaseModel,
    Field,
    Inputs,
    Result,
    View,
)
from plugins.builtin.hash_ranges import (
    ROUTABLE,
    Member,
    hash_space,
    infer_selector,
    members_of,
    owner_array,
    routable_count,
)
from plugins.builtin.key_shared_rebuild import MAX_POINTS, Model, WhatIf, apply_what_if, rebuild
from plugins.builtin.key_shared_views import render_views
from plugins.builtin.key_shared_what_if import (
    LOOKUP_COLUMNS,
    State,
    frame,
    lookup_row,
    what_if_frames,
)

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


def label_of(topic: str, subscription: str) -> str:
    return f"{topic} | {subscription}"


class KeySharedMap(AnalysisPlugin):
    name = "key-shared-map"
    title = "Key_Shared hash map"
    description = (
        "Which consumer owns which sticky-key hashes in every Key_Shared subscription, the "
        "selector and replica points behind it, drift from our model, what moves when a "
        "consumer joins or leaves, and which consumer receives a given key."
    )
    version = "1.0"
    engine = "light"
    inputs = ("subscriptions", "consumers")
    history = 1
    outputs = (
        "subscriptions",
        "consumers",
        "ranges",
        "what_if",
        "moves",
        "what_if_ranges",
        "lookup",
    )

    class Params(BaseModel):
        subscription: str = Field(
            "", description="'topic | subscription' for the what-if and lookup; empty: the first"
        )
        replica_points: int = Field(
            0, ge=0, le=MAX_POINTS, description="Replica points of the model; 0 infers them"
        )
        add_consumer: str = Field("", description="What if a consumer of this name joins")
        remove_consumer: str = Field(
            "", description="What if the last connected consumer of this name leaves"
        )
        what_if_points: int = Field(
            0, ge=0, le=MAX_POINTS, description="What if the broker used this many replica points"
        )
        key: str = Field("", description="A message key to look up")

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs = key_shared_subscriptions(data.latest("subscriptions"))
        states = compute_states(subs, data.latest("consumers"), points=params.replica_points)
        frames = map_frames(subs, states)
        selected = params.subscription or (next(iter(states)) if states else "")
        state = states.get(selected)
        what_if = None
        if state is not None:
            what_if = apply_what_if(
                state[1],
                state[0],
                add=params.add_consumer.strip(),
                remove=params.remove_consumer.strip(),
                points=params.what_if_points,
            )
        frames.update(what_if_frames(selected, what_if))
        lookup = lookup_row(selected, params.key, state, what_if)
        frames["lookup"] = frame([lookup] if lookup else [], LOOKUP_COLUMNS)
        return Result(frames=frames, summary=summarize(frames, selected, what_if, lookup))

    def render(self, result: Result) -> list[View]:
        return render_views(result)

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        subs = key_shared_subscriptions(data.latest("subscriptions"))
        labels = [label_of(t, s) for t, s in zip(subs["topic"], subs["subscription"], strict=True)]
        keyed = data.latest("consumers").merge(
            subs[["topic", "subscription"]], on=["topic", "subscription"], how="inner"
        )
        names = sorted(set(keyed["consumer_name"].dropna().astype(str)))
        return {"subscription": ["", *labels], "remove_consumer": ["", *names]}


def key_shared_subscriptions(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """Key_Shared subscriptions with at least one consumer, sorted by topic and name."""
    if subscriptions.empty:
        return subscriptions
    subs = subscriptions[
        (subscriptions["type"] == "Key_Shared") & (subscriptions["consumer_count"] > 0)
    ]
    return subs.sort_values(["topic", "subscription"]).reset_index(drop=True)


def compute_states(subs: pd.DataFrame, consumers: pd.DataFrame, *, points: int) -> dict[str, State]:
    """Per subscription label: its members in connection order and our model of it."""
    by_sub = dict(iter(consumers.groupby(["topic", "subscription"], sort=False)))
    states: dict[str, State] = {}
    for sub in subs.itertuples(index=False):
        mine = by_sub.get((sub.topic, sub.subscription), consumers.iloc[0:0])
        members = members_of(mine)
        kind = infer_selector(sub.key_shared_mode, members)
        states[label_of(sub.topic, sub.subscription)] = (
            members,
            rebuild(kind, members, points=points),
        )
    return states


def map_frames(subs: pd.DataFrame, states: Mapping[str, State]) -> dict[str, pd.DataFrame]:
    rows, consumer_rows, range_rows = [], [], []
    for sub in subs.itertuples(index=False):
        label = label_of(sub.topic, sub.subscription)
        members, model = states[label]
        rows.append(subscription_row(sub, label, members, model))
        consumer_rows.extend(consumer_rows_of(label, members, model))
        range_rows.extend(range_rows_of(label, members, model))
    return {
        "subscriptions": frame(rows, SUB_COLUMNS),
        "consumers": frame(consumer_rows, CONSUMER_COLUMNS),
        "ranges": frame(range_rows, RANGE_COLUMNS),
    }


def shares_of(members: Sequence[Member]) -> list[float]:
    low, high = hash_space(members)
    return [routable_count(m.ranges, low=low, high=high) / (high - low + 1) for m in members]


def subscription_row(sub: Any, label: str, members: list[Member], model: Model) -> dict[str, Any]:
    shares = shares_of(members)
    top = max(shares) if shares else 0.0
    return {
        "label": label,
        "topic": sub.topic,
        "subscription": sub.subscription,
        "mode": sub.key_shared_mode,
        "selector": model.kind,
        "replica_points": model.points,
        "points_note": model.points_note,
        "consumers": len(members),
        "max_share": top,
        "imbalance": top * len(members),
        "drift": model.drift,
        "drift_hashes": model.drift_hashes,
        "drift_reason": model.drift_reason,
    }


def model_ranges(model: Model) -> list[tuple[tuple[int, int], ...]]:
    if model.selector is None:
        return [() for _ in model.handles]
    ranges = model.selector.assignments().by_consumer(model.handles)
    return [ranges.get(h, ()) for h in model.handles]


def consumer_rows_of(label: str, members: list[Member], model: Model) -> list[dict[str, Any]]:
    shares, modelled = shares_of(members), model_ranges(model)
    low, high = hash_space(members)
    wrong: list[int | None] = [None] * len(members)
    if model.selector is not None:
        observed = owner_array([m.ranges for m in members])
        predicted = owner_array(modelled)
        wrong = [int(((observed == p) != (predicted == p)).sum()) for p in range(len(members))]
    fair = 1 / len(members) if members else 0.0
    return [
        {
            "label": label,
            "position": position,
            "consumer_name": member.name,
            "connected_since": member.connected_since,
            "ranges": len(member.ranges),
            "hashes": routable_count(member.ranges, low=low, high=high),
            "share": shares[position],
            "fair_share": fair,
            "vs_fair": shares[position] / fair,
            "model_hashes": routable_count(modelled[position]) if model.selector else None,
            "drift_hashes": wrong[position],
        }
        for position, member in enumerate(members)
    ]


def range_rows_of(label: str, members: list[Member], model: Model) -> list[dict[str, Any]]:
    sources = [("broker", [m.ranges for m in members])]
    if model.drift and model.selector is not None:
        sources.append(("model", model_ranges(model)))
    return [
        {
            "label": label,
            "source": source,
            "position": position,
            "consumer_name": members[position].name,
            "start": start,
            "end": end,
            "size": end - start + 1,
        }
        for source, per_member in sources
        for position, ranges in enumerate(per_member)
        for start, end in ranges
    ]


def summarize(
    frames: Mapping[str, pd.DataFrame],
    selected: str,
    what_if: WhatIf | None,
    lookup: Mapping[str, Any] | None,
) -> dict[str, Any]:
    subs = frames["subscriptions"]
    summary: dict[str, Any] = {
        "subscriptions": len(subs),
        "drifting": int(subs["drift"].astype(bool).sum()) if len(subs) else 0,
        "drifting_subscriptions": sorted(subs.loc[subs["drift"].astype(bool), "label"])
        if len(subs)
        else [],
        "max_imbalance": float(subs["imbalance"].max()) if len(subs) else 0.0,
        "selected": selected,
    }
    if what_if is not None:
        losers = frames["what_if"]
        summary["what_if"] = {
            "change": what_if.change,
            "moved_hashes": what_if.moved_hashes(),
            "moved_fraction": what_if.moved_hashes() / ROUTABLE,
            "losers": sorted(set(losers.loc[losers["lost_hashes"] > 0, "consumer_name"])),
        }
    if lookup is not None:
        summary["lookup"] = {k: lookup[k] for k in ("key", "hash", "consumer", "model_consumer")}
    return summary
