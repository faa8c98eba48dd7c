"""`failover-assignment`: which consumer is active on each partition of Failover subscriptions.

A *group* is one application's Failover subscription: the topics and partitions of the newest
snapshot that carry the same subscription name and share consumer names. A partitioned topic,
or a multi-topic / regex subscription across several topics, forms one group.

Per partition the observed active consumer (`activeConsumerName`) is compared with the
broker's two rules (`core.failover`): `partitionIndex % n` over the consumers sorted by name
(the default), and the PIP-392 ring of 100 points per consumer on the full topic name (always
used for non-partitioned topics; for partitions with
`activeConsumerFailoverConsistentHashing=true`). The group's *mode* is the rule that explains
every observation ("either" when both do, "unexplained" when neither does). Partitions per
consumer give the imbalance (largest count over the fair count partitions / n); the modulo rule
puts partition 0 of every single-partition topic on the first consumer by name.

**What-if PIP-392**: the assignment under the other rule and how many partitions would change
active consumer.

**Flapping**: per partition, how often the active consumer changed over the stored snapshots
(`history` recent ones); `flap_changes` or more changes flag it.

**Priority levels**: a 4.0.7 broker's stats list consumer names but no `priorityLevel` (nor
does our consumer table keep metadata). All consumers are therefore taken as one priority
level. A consumer with a lower priority (a higher level number) than the others is never
active while they are connected, so partitions the model cannot explain ("unexplained") may
mean that priority levels differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import pandas as pd

from plugins.api import (
    AnalysisPlugin,
    BaseModel,
    FailoverConsumer,
    Field,
    GaugeMetricFamily,
    Inputs,
    MetricFamily,
    MetricsContext,
    Page,
    Result,
    View,
    active_consumer_picker,
    finite,
    jvm_charset,
    partition_index,
)
from plugins.builtin.failover_assignment.views import render_views

GROUP_COLUMNS = [
    "label",
    "subscription",
    "topics",
    "partitions",
    "consumers",
    "mode",
    "unexplained",
    "imbalance",
    "alternative",
    "imbalance_alternative",
    "partitions_moving",
    "flapping",
]
PARTITION_COLUMNS = [
    "label",
    "subscription",
    "topic",
    "parent_topic",
    "partition_index",
    "consumers",
    "observed",
    "modulo",
    "consistent_hashing",
    "mode",
    "alternative",
    "explained",
    "moves",
    "changes",
    "flapping",
    "seen",
]
CONSUMER_COLUMNS = ["label", "consumer_name", "partitions", "partitions_alternative", "vs_fair"]
MATRIX_COLUMNS = ["label", "topic", "consumer_name", "role"]
TIMELINE_COLUMNS = ["label", "topic", "collected_at", "active_consumer_name"]
Picker = Callable[[str], FailoverConsumer | None]


class FailoverAssignment(AnalysisPlugin):
    name = "failover-assignment"
    title = "Failover assignment"
    description = (
        "Active consumer per partition of every Failover subscription (also across the topics "
        "of a multi-topic subscription), partitions per consumer, flapping over time, and what "
        "PIP-392 consistent hashing would assign instead."
    )
    version = "1.0"
    engine = "light"
    inputs = ("subscriptions", "consumers")
    history = 30
    outputs = ("groups", "partitions", "consumers", "matrix", "timeline")
    page = Page(
        title="Failover",
        icon=":material/swap_horiz:",
        url_path="failover",
        order=30,
        caption="The active consumer of each partition, flapping, and what PIP-392 consistent "
        "hashing (activeConsumerFailoverConsistentHashing) would assign instead.",
        controls=("subscription",),
    )

    class Params(BaseModel):
        subscription: str = Field("", description="Group to draw; empty: the first")
        flap_changes: int = Field(
            2, ge=1, le=30, description="Active-consumer changes in the window that flag flapping"
        )
        jvm_charset: str = Field(
            "",
            description="How the broker's JVM encodes consumer names (UTF-8 or US-ASCII); "
            "empty: PULSAR_LENS_JVM_CHARSET, else UTF-8",
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs = failover_subscriptions(data.latest("subscriptions"))
        names = consumer_names(data.latest("consumers"))
        groups = group_topics(subs, names)
        history = data.history("subscriptions")
        pickers: dict[tuple[frozenset[str], bool], Picker] = {}
        charset = jvm_charset(params.jvm_charset)
        partition_rows: list[dict[str, Any]] = []
        for label, topics in groups.items():
            rows = [
                partition_row(label, sub, names, pickers, charset)
                for sub in subs[subs["key"].isin(topics)].itertuples(index=False)
            ]
            partition_rows.extend(with_verdict(rows))
        partitions = with_flaps(_frame(partition_rows, PARTITION_COLUMNS), history, params)
        frames = {
            "groups": group_frame(partitions, names),
            "partitions": partitions,
            "consumers": consumer_frame(partitions, names),
            "matrix": matrix_frame(partitions, names),
            "timeline": timeline_frame(partitions, history),
        }
        selected = params.subscription or (next(iter(groups)) if groups else "")
        return Result(frames=frames, summary=summarize(frames, selected))

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        labels = ["group", "subscription"]
        bound = f"at most {context.max_groups} groups, most imbalanced first"
        imbalance = GaugeMetricFamily(
            "pulsar_lens_failover_imbalance",
            "Largest active-partition count of a consumer over the fair count in a Failover "
            f"group (failover-assignment); {bound}.",
            labels=labels,
        )
        flapping = GaugeMetricFamily(
            "pulsar_lens_failover_flapping_partitions",
            "Partitions of a Failover group whose active consumer changed repeatedly in recent "
            f"snapshots (failover-assignment); {bound}.",
            labels=labels,
        )
        groups = result.frames["groups"]
        if len(groups):
            groups = groups.sort_values(["imbalance", "label"], ascending=[False, True])
            for row in groups.head(context.max_groups).to_dict("records"):
                key = [str(row["label"]), str(row["subscription"])]
                imbalance.add_metric(key, finite(row["imbalance"]) or 0.0)
                flapping.add_metric(key, float(row["flapping"]))
        return [imbalance, flapping]

    def render(self, result: Result) -> list[View]:
        return render_views(result)

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        subs = failover_subscriptions(data.latest("subscriptions"))
        groups = group_topics(subs, consumer_names(data.latest("consumers")))
        return {"subscription": ["", *groups]}


def _frame(rows: list[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.DataFrame(rows, columns=list(columns))


def failover_subscriptions(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """Failover subscriptions with consumers, keyed by (topic, subscription)."""
    if subscriptions.empty:
        return subscriptions.assign(key=pd.Series(dtype=object))
    subs = subscriptions[
        (subscriptions["type"] == "Failover") & (subscriptions["consumer_count"] > 0)
    ].sort_values(["subscription", "topic"])
    keys = list(zip(subs["topic"], subs["subscription"], strict=True))
    return subs.assign(key=pd.Series(keys, index=subs.index, dtype=object)).reset_index(drop=True)


def consumer_names(consumers: pd.DataFrame) -> dict[tuple[str, str], frozenset[str]]:
    """(topic, subscription) -> the names of its connected consumers."""
    if consumers.empty:
        return {}
    grouped = consumers.groupby(["topic", "subscription"])["consumer_name"]
    return {(str(t), str(s)): frozenset(map(str, v)) for (t, s), v in grouped}


def parent_of(topic: str) -> str:
    return topic.rsplit("-partition-", 1)[0] if partition_index(topic) >= 0 else topic


def group_topics(
    subs: pd.DataFrame, names: Mapping[tuple[str, str], frozenset[str]]
) -> dict[str, list[tuple[str, str]]]:
    """Label -> (topic, subscription) keys: same subscription name, linked by shared consumers."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for sub_name, subset in subs.groupby("subscription", sort=True):
        clusters: list[tuple[set[str], list[tuple[str, str]]]] = []
        for key in subset["key"]:
            own = set(names.get(key, frozenset()))
            linked = [c for c in clusters if c[0] & own]
            merged = (own.union(*(c[0] for c in linked)), [k for c in linked for k in c[1]] + [key])
            clusters = [c for c in clusters if c not in linked] + [merged]
        for _, keys in clusters:
            groups[_unique(group_label(str(sub_name), keys), groups)] = keys
    return groups


def group_label(subscription: str, keys: Sequence[tuple[str, str]]) -> str:
    parents = sorted({parent_of(t) for t, _ in keys})
    if len(parents) == 1:
        return f"{subscription} @ {parents[0]}"
    return f"{subscription} @ {len(parents)} topics ({parents[0]}, ...)"


def _unique(label: str, taken: Mapping[str, Any]) -> str:
    candidate, n = label, 1
    while candidate in taken:
        n += 1
        candidate = f"{label} #{n}"
    return candidate


def _picker(
    names: frozenset[str],
    consistent: bool,
    cache: dict[tuple[frozenset[str], bool], Picker],
    charset: str = "utf-8",
) -> Picker:
    key = (names, consistent)
    if key not in cache:
        group = [FailoverConsumer(n) for n in names]  # one priority level: stats show none
        cache[key] = active_consumer_picker(group, consistent_hashing=consistent, charset=charset)
    return cache[key]


def _name(consumer: FailoverConsumer | None) -> str | None:
    return None if consumer is None else consumer.name


def partition_row(
    label: str,
    sub: Any,
    names: Mapping[tuple[str, str], frozenset[str]],
    cache: dict[tuple[frozenset[str], bool], Picker],
    charset: str = "utf-8",
) -> dict[str, Any]:
    connected = names.get(sub.key, frozenset())
    observed = sub.active_consumer_name
    return {
        "label": label,
        "subscription": sub.subscription,
        "topic": sub.topic,
        "parent_topic": parent_of(sub.topic),
        "partition_index": partition_index(sub.topic),
        "consumers": len(connected),
        "observed": None if pd.isna(observed) else str(observed),
        "modulo": _name(_picker(connected, False, cache, charset)(sub.topic)),
        "consistent_hashing": _name(_picker(connected, True, cache, charset)(sub.topic)),
    }


def infer_mode(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rule behind a group's observations: modulo, consistent, either or unexplained."""
    seen = [r for r in rows if r["observed"] is not None]
    modulo = all(r["observed"] == r["modulo"] for r in seen)
    ring = all(r["observed"] == r["consistent_hashing"] for r in seen)
    if modulo and ring:
        return "either"
    if modulo:
        return "modulo"
    return "consistent" if ring else "unexplained"


def with_verdict(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add the alternative rule's choice, whether the model explains it, and what moves."""
    mode = infer_mode(rows)
    other = "modulo" if mode == "consistent" else "consistent_hashing"
    for row in rows:
        predicted = row["consistent_hashing"] if mode == "consistent" else row["modulo"]
        current = row["observed"] if row["observed"] is not None else predicted
        row["alternative"] = row[other]
        row["explained"] = row["observed"] is None or row["observed"] == predicted
        row["moves"] = current != row["alternative"]
        row["mode"] = mode
    return rows


def with_flaps(partitions: pd.DataFrame, history: pd.DataFrame, params: Any) -> pd.DataFrame:
    """Active-consumer changes per partition over the stored snapshots."""
    if partitions.empty:
        return partitions
    window = history[history["type"] == "Failover"].sort_values("collected_at", kind="stable")
    changes, seen = {}, {}
    for (topic, sub), rows in window.groupby(["topic", "subscription"]):
        names = [str(n) for n in rows["active_consumer_name"] if not pd.isna(n)]
        changes[(topic, sub)] = sum(a != b for a, b in pairwise(names))
        seen[(topic, sub)] = ", ".join(dict.fromkeys(names))
    keys = list(zip(partitions["topic"], partitions["subscription"], strict=True))
    out = partitions.assign(
        changes=[changes.get(k, 0) for k in keys], seen=[seen.get(k, "") for k in keys]
    )
    return out.assign(flapping=out["changes"] >= params.flap_changes)


Names = Mapping[tuple[str, str], frozenset[str]]


def imbalance(counts: Sequence[int], partitions: int) -> float:
    """The largest partition count over the fair count partitions / consumers."""
    if not counts or not partitions:
        return 0.0
    return max(counts) * len(counts) / partitions


def group_consumers(rows: pd.DataFrame, names: Names) -> list[str]:
    """Every consumer name connected to any partition of the group, sorted."""
    keys = zip(rows["topic"], rows["subscription"], strict=True)
    return sorted(set().union(*(names.get(k, frozenset()) for k in keys)))


def current_of(rows: pd.DataFrame) -> pd.Series:
    """The observed active consumer, or the model's choice where the stats have none."""
    predicted = rows["consistent_hashing"].where(rows["mode"] == "consistent", rows["modulo"])
    return rows["observed"].where(rows["observed"].notna(), predicted)


def _counts(active: pd.Series, consumers: Sequence[str]) -> list[int]:
    tally = active.value_counts()
    return [int(tally.get(name, 0)) for name in consumers]


def group_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows = []
    for label, mine in partitions.groupby("label", sort=False):
        consumers = group_consumers(mine, names)
        mode = str(mine["mode"].iloc[0])
        rows.append(
            {
                "label": label,
                "subscription": mine["subscription"].iloc[0],
                "topics": mine["parent_topic"].nunique(),
                "partitions": len(mine),
                "consumers": len(consumers),
                "mode": mode,
                "unexplained": int((~mine["explained"].astype(bool)).sum()),
                "imbalance": imbalance(_counts(current_of(mine), consumers), len(mine)),
                "alternative": "modulo" if mode == "consistent" else "consistent",
                "imbalance_alternative": imbalance(
                    _counts(mine["alternative"], consumers), len(mine)
                ),
                "partitions_moving": int(mine["moves"].astype(bool).sum()),
                "flapping": int(mine["flapping"].astype(bool).sum()),
            }
        )
    return _frame(rows, GROUP_COLUMNS)


def consumer_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for label, mine in partitions.groupby("label", sort=False):
        consumers = group_consumers(mine, names)
        now, then = _counts(current_of(mine), consumers), _counts(mine["alternative"], consumers)
        fair = len(mine) / len(consumers) if consumers else 0.0
        rows.extend(
            {
                "label": label,
                "consumer_name": name,
                "partitions": now[i],
                "partitions_alternative": then[i],
                "vs_fair": now[i] / fair if fair else 0.0,
            }
            for i, name in enumerate(consumers)
        )
    return _frame(rows, CONSUMER_COLUMNS)


def matrix_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    """Consumers x partitions: 'active' or 'standby' for every connected consumer."""
    rows = [
        {
            "label": row.label,
            "topic": row.topic,
            "consumer_name": name,
            "role": "active" if name == row.observed else "standby",
        }
        for row in partitions.itertuples(index=False)
        for name in sorted(names.get((row.topic, row.subscription), frozenset()))
    ]
    return _frame(rows, MATRIX_COLUMNS)


def timeline_frame(partitions: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """The active consumer of every partition of every group in each stored snapshot."""
    if partitions.empty or history.empty:
        return _frame([], TIMELINE_COLUMNS)
    keys = partitions[["label", "topic", "subscription"]]
    rows = history.merge(keys, on=["topic", "subscription"], how="inner")
    rows = rows.sort_values(["label", "topic", "collected_at"], kind="stable")
    return rows[TIMELINE_COLUMNS].reset_index(drop=True)


def summarize(frames: Mapping[str, pd.DataFrame], selected: str) -> dict[str, Any]:
    groups = frames["groups"]
    chosen = groups[groups["label"] == selected]
    summary: dict[str, Any] = {
        "groups": len(groups),
        "partitions": int(groups["partitions"].sum()) if len(groups) else 0,
        "unexplained": int(groups["unexplained"].sum()) if len(groups) else 0,
        "flapping": int(groups["flapping"].sum()) if len(groups) else 0,
        "max_imbalance": float(groups["imbalance"].max()) if len(groups) else 0.0,
        "selected": selected,
    }
    if len(chosen):
        row = chosen.iloc[0]
        parts = frames["partitions"]
        mine = parts[parts["label"] == selected]
        summary["selection"] = {
            "mode": row["mode"],
            "imbalance": float(row["imbalance"]),
            "alternative": row["alternative"],
            "imbalance_alternative": float(row["imbalance_alternative"]),
            "partitions_moving": int(row["partitions_moving"]),
            "observed": dict(zip(mine["topic"], mine["observed"], strict=True)),
            "alternative_assignment": dict(zip(mine["topic"], mine["alternative"], strict=True)),
        }
    return summary
