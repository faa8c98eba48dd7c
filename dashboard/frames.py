"""Pure frame shaping for the dashboard pages: store tables in, small frames out.

No Streamlit here: `data.py` caches these, pages draw their results, tests call them directly.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

import pandas as pd

from core.failover import FailoverConsumer, compare_modes, partition_index

STALE_AFTER_INTERVALS = 3
"""A store is stale when its newest poll is older than this many poll intervals."""


@dataclass(frozen=True)
class PollStatus:
    """The newest poll: when, how old, whether partial, and what failed."""

    snapshot_id: str
    cluster: str
    collected_at: pd.Timestamp
    age_seconds: float
    partial: bool
    stale: bool
    requests: int
    polls: int
    errors: pd.DataFrame = field(repr=False)
    durations: dict[str, float] = field(default_factory=dict)
    row_counts: dict[str, float] = field(default_factory=dict)  # rows per table


def compute_poll_status(
    index: pd.DataFrame, *, now: dt.datetime, interval_seconds: float
) -> PollStatus | None:
    """The status of the newest row of the store's snapshot index; None when it is empty."""
    if index.empty:
        return None
    row = index.iloc[-1]
    collected = pd.Timestamp(row["collected_at"])
    age = max(0.0, (pd.Timestamp(now) - collected).total_seconds())
    return PollStatus(
        snapshot_id=str(row["snapshot_id"]),
        cluster=str(row["cluster"]),
        collected_at=collected,
        age_seconds=age,
        partial=bool(row.get("partial", False)),
        stale=age > STALE_AFTER_INTERVALS * interval_seconds,
        requests=int(row.get("requests") or 0),
        polls=len(index),
        errors=parse_errors(row.get("errors_json")),
        durations=_json_object(row.get("durations_json")),
        row_counts=_json_object(row.get("row_counts_json")),
    )


def parse_errors(errors_json: object) -> pd.DataFrame:
    """The endpoint errors of one poll as a frame: endpoint, status, message."""
    try:
        items = json.loads(str(errors_json)) if errors_json else []
    except ValueError:
        items = [{"message": str(errors_json)}]
    rows = [
        item if isinstance(item, dict) else {"message": str(item)}
        for item in (items if isinstance(items, list) else [items])
    ]
    frame = pd.DataFrame(rows, columns=["endpoint", "status", "message"])
    return frame.astype({"endpoint": "string", "message": "string"})


def _json_object(text: object) -> dict[str, float]:
    try:
        loaded = json.loads(str(text)) if text else {}
    except ValueError:
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def format_age(seconds: float) -> str:
    """A short human age: 4s, 3m 5s, 2h 10m, 3d 4h."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def compute_counts(tables: dict[str, pd.DataFrame]) -> dict[str, int]:
    """Headline counts of one snapshot."""
    subs = tables.get("subscriptions", pd.DataFrame())
    bundles = tables.get("bundles", pd.DataFrame())
    return {
        "brokers": len(tables.get("brokers", ())),
        "namespaces": int(bundles["namespace"].nunique()) if len(bundles) else 0,
        "bundles": len(bundles),
        "topics": len(tables.get("topics", ())),
        "subscriptions": len(subs),
        "consumers": len(tables.get("consumers", ())),
        "key_shared": int((subs["type"] == "Key_Shared").sum()) if len(subs) else 0,
        "draining_hashes": len(tables.get("draining_hashes", ())),
    }


def compute_namespaces(bundles: pd.DataFrame, topics: pd.DataFrame) -> pd.DataFrame:
    """Per namespace: bundles, bundles owned, owners, topics, backlog."""
    columns = ["namespace", "bundles", "owned", "owners", "topics", "backlog_bytes"]
    if bundles.empty and topics.empty:
        return pd.DataFrame(columns=columns)
    per_bundle = bundles.groupby("namespace").agg(
        bundles=("bundle", "size"),
        owned=("owner_broker", "count"),
        owners=("owner_broker", lambda s: ", ".join(sorted(set(s.dropna())))),
    )
    per_topic = topics.groupby("namespace").agg(
        topics=("topic", "size"), backlog_bytes=("backlog_size", "sum")
    )
    out = per_bundle.join(per_topic, how="outer").reset_index()
    out[["bundles", "owned", "topics"]] = out[["bundles", "owned", "topics"]].fillna(0).astype(int)
    return out[columns].sort_values("namespace").reset_index(drop=True)


def compute_brokers(brokers: pd.DataFrame, bundles: pd.DataFrame) -> pd.DataFrame:
    """Brokers with the bundles they own in this snapshot."""
    columns = ["broker_id", "version", "is_leader", "owned_bundles", "num_topics", "msg_rate_in"]
    if brokers.empty:
        return pd.DataFrame(columns=columns)
    owned = bundles.groupby("owner_broker").size() if len(bundles) else pd.Series(dtype=int)
    out = brokers.assign(owned_bundles=brokers["broker_id"].map(owned).fillna(0).astype(int))
    return out[columns].reset_index(drop=True)


# --- ownership -----------------------------------------------------------------------------


def ownership_history(bundles: pd.DataFrame) -> pd.DataFrame:
    """collected_at, bundle_key ("tenant/ns/bundle"), owner_broker for every stored poll."""
    if bundles.empty:
        return pd.DataFrame(columns=["collected_at", "bundle_key", "owner_broker"])
    out = bundles.assign(bundle_key=bundles["namespace"] + "/" + bundles["bundle"])
    return out[["collected_at", "bundle_key", "owner_broker"]].reset_index(drop=True)


def ownership_changes(ownership: pd.DataFrame) -> pd.DataFrame:
    """Owner changes seen between consecutive polls: at, bundle_key, before, after."""
    columns = ["at", "bundle_key", "before", "after"]
    if ownership.empty:
        return pd.DataFrame(columns=columns)
    ordered = ownership.sort_values(["bundle_key", "collected_at"])
    before = ordered.groupby("bundle_key")["owner_broker"].shift(1)
    first = ordered.groupby("bundle_key").cumcount() == 0
    changed = ~first & (before.fillna("") != ordered["owner_broker"].fillna(""))
    out = pd.DataFrame(
        {
            "at": ordered["collected_at"],
            "bundle_key": ordered["bundle_key"],
            "before": before,
            "after": ordered["owner_broker"],
        }
    )[changed]
    return out.sort_values("at", ascending=False).reset_index(drop=True)[columns]


# --- failover ------------------------------------------------------------------------------


def failover_subscriptions(subscriptions: pd.DataFrame) -> list[str]:
    """Labels "parent | subscription" of Failover subscriptions on partitioned topics."""
    if subscriptions.empty:
        return []
    subs = subscriptions[subscriptions["type"] == "Failover"]
    parents = subs["topic"].map(_parent_topic)
    return sorted({f"{p} | {s}" for p, s in zip(parents, subs["subscription"], strict=True)})


def _parent_topic(topic: str) -> str:
    index = partition_index(topic)
    return topic.rsplit("-partition-", 1)[0] if index >= 0 else topic


def failover_assignment(
    subscriptions: pd.DataFrame, consumers: pd.DataFrame, label: str
) -> pd.DataFrame:
    """partition, topic, consumer_name, active: one row per connected consumer per partition."""
    parent, _, subscription = label.partition(" | ")
    subs = subscriptions[
        (subscriptions["subscription"] == subscription)
        & (subscriptions["topic"].map(_parent_topic) == parent)
    ]
    cons = consumers[consumers["subscription"] == subscription]
    rows = []
    for topic, active in zip(subs["topic"], subs["active_consumer_name"], strict=True):
        names = sorted(set(cons.loc[cons["topic"] == topic, "consumer_name"]))
        for name in names:
            rows.append((partition_index(topic), topic, name, name == active))
    frame = pd.DataFrame(rows, columns=["partition", "topic", "consumer_name", "active"])
    return frame.sort_values(["partition", "consumer_name"]).reset_index(drop=True)


def partitions_per_consumer(assignment: pd.DataFrame) -> pd.DataFrame:
    active = assignment[assignment["active"]]
    counts = active.groupby("consumer_name").size().rename("partitions").reset_index()
    return counts.sort_values("partitions", ascending=False).reset_index(drop=True)


def failover_flaps(history: pd.DataFrame, label: str) -> pd.DataFrame:
    """Per partition: how often the active consumer changed over the stored polls."""
    parent, _, subscription = label.partition(" | ")
    subs = history[
        (history["subscription"] == subscription) & (history["topic"].map(_parent_topic) == parent)
    ].sort_values("collected_at")
    rows = []
    for topic, group in subs.groupby("topic"):
        names = group["active_consumer_name"].fillna("")
        changes = int((names != names.shift()).iloc[1:].sum())
        rows.append((partition_index(str(topic)), changes, len(group), names.iloc[-1] or None))
    columns = ["partition", "changes", "polls", "active_now"]
    return pd.DataFrame(rows, columns=columns).sort_values("partition").reset_index(drop=True)


def pip392_comparison(assignment: pd.DataFrame, label: str) -> pd.DataFrame:
    """Active consumer per partition as observed, with modulo, and with PIP-392 hashing."""
    parent = label.partition(" | ")[0]
    columns = ["partition", "observed", "modulo", "consistent_hashing", "moves"]
    if assignment.empty:
        return pd.DataFrame(columns=columns)
    group = [FailoverConsumer(n) for n in sorted(set(assignment["consumer_name"]))]
    partitions = int(assignment["partition"].max()) + 1
    modes = compare_modes(parent, partitions, group)
    observed = assignment[assignment["active"]].set_index("partition")["consumer_name"]
    rows = []
    for name, chosen in modes.modulo.items():
        index = partition_index(name)
        hashed = modes.consistent[name].name
        rows.append((index, observed.get(index), chosen.name, hashed, chosen.name != hashed))
    return pd.DataFrame(rows, columns=columns).sort_values("partition").reset_index(drop=True)


# --- stuck hashes --------------------------------------------------------------------------


def draining_timeline(draining: pd.DataFrame, topic: str, subscription: str) -> pd.DataFrame:
    """collected_at, hash, consumer_name, unack_msgs of one subscription over the stored polls."""
    rows = draining[(draining["topic"] == topic) & (draining["subscription"] == subscription)]
    columns = ["collected_at", "hash", "consumer_name", "unack_msgs", "blocked_attempts"]
    return rows[columns].sort_values(["collected_at", "hash"]).reset_index(drop=True)


def stuck_subscriptions(draining: pd.DataFrame) -> list[str]:
    """Labels "topic | subscription" that have draining hashes in any stored poll."""
    if draining.empty:
        return []
    pairs = draining[["topic", "subscription"]].drop_duplicates()
    return sorted(f"{t} | {s}" for t, s in zip(pairs["topic"], pairs["subscription"], strict=True))


@dataclass(frozen=True)
class FailoverView:
    assignment: pd.DataFrame  # partition, topic, consumer_name, active
    per_consumer: pd.DataFrame  # consumer_name, partitions
    flaps: pd.DataFrame  # partition, changes, polls, active_now
    pip392: pd.DataFrame  # partition, observed, modulo, consistent_hashing, moves

    @property
    def pip392_moves(self) -> int:
        """Partitions whose active consumer differs between the two rules."""
        return int(self.pip392["moves"].sum()) if len(self.pip392) else 0


def compute_failover_view(
    subscriptions: pd.DataFrame, consumers: pd.DataFrame, history: pd.DataFrame, label: str
) -> FailoverView:
    assignment = failover_assignment(subscriptions, consumers, label)
    return FailoverView(
        assignment=assignment,
        per_consumer=partitions_per_consumer(assignment),
        flaps=failover_flaps(history, label),
        pip392=pip392_comparison(assignment, label),
    )


@dataclass(frozen=True)
class OwnershipView:
    ownership: pd.DataFrame  # collected_at, bundle_key, owner_broker
    changes: pd.DataFrame  # at, bundle_key, before, after (seen between polls)
    events: pd.DataFrame  # at, kind, subject, before, after (recorded by the collector)


def compute_ownership_view(bundles: pd.DataFrame, events: pd.DataFrame) -> OwnershipView:
    ownership = ownership_history(bundles)
    columns = ["at", "kind", "subject", "before", "after"]
    bundle_events = (
        events[events["kind"].str.startswith("bundle")][columns]
        if len(events)
        else pd.DataFrame(columns=columns)
    )
    return OwnershipView(
        ownership=ownership,
        changes=ownership_changes(ownership),
        events=bundle_events.sort_values("at", ascending=False).reset_index(drop=True),
    )


SUBSCRIPTION_COLUMNS = [
    "topic",
    "subscription",
    "type",
    "consumer_count",
    "msg_backlog",
    "unacked_messages",
    "msg_in_replay",
    "msg_rate_out",
    "msg_ack_rate",
    "draining_hashes_count",
    "earliest_msg_publish_time_in_backlog",
]


def subscriptions_table(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """The subscriptions of one snapshot, largest backlog first."""
    out = subscriptions[SUBSCRIPTION_COLUMNS]
    return out.sort_values("msg_backlog", ascending=False, na_position="last").reset_index(
        drop=True
    )
