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
active consumer. On 3.0.x brokers (the versions in `brokers`, see `shared.versions`) there is
no such setting (3.0.7 has no `activeConsumerFailoverConsistentHashing`): partitions follow the
modulo rule only, the ring only non-partitioned topics (where both rules agree), and the page
says so instead of offering the what-if (`pip_392` false in the summary).

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
from typing import Any

import pandas as pd

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    FailoverConsumer,
    Field,
    GaugeMetricFamily,
    Inputs,
    JvmCharset,
    MetricFamily,
    MetricsContext,
    Page,
    Result,
    View,
    active_consumer_picker,
    finite,
    frame_of,
    jvm_charset,
    partition_index,
)
from pulsar_lens.plugins.builtin.failover_assignment.frames import (
    PARTITION_COLUMNS,
    consumer_frame,
    group_frame,
    matrix_frame,
    summarize,
    timeline_frame,
    with_flaps,
)
from pulsar_lens.plugins.builtin.shared.failover import group_label, parent_of
from pulsar_lens.plugins.builtin.shared.versions import broker_line

Picker = Callable[[str], FailoverConsumer | None]


class FailoverAssignment(AnalysisPlugin):
    name = "failover-assignment"
    title = "Failover assignment"
    description = (
        "Active consumer per partition of every Failover subscription (also across the topics "
        "of a multi-topic subscription), partitions per consumer, flapping over time, and what "
        "PIP-392 consistent hashing would assign instead."
    )
    version = "1.1"
    engine = "light"
    inputs = ("subscriptions", "consumers", "brokers")
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
        jvm_charset: JvmCharset = Field(
            "",
            validate_default=True,
            description="How the broker's JVM encodes consumer names (UTF-8 or US-ASCII); "
            "empty: PULSAR_LENS_JVM_CHARSET, else UTF-8",
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs = failover_subscriptions(data.latest("subscriptions"))
        names = consumer_names(data.latest("consumers"))
        groups = group_topics(subs, names)
        history = data.history("subscriptions")
        line = broker_line(data.latest("brokers"))
        pip_392 = line.line != "3.0"
        pickers: dict[tuple[frozenset[str], bool], Picker] = {}
        charset = jvm_charset(params.jvm_charset)
        partition_rows: list[dict[str, Any]] = []
        for label, topics in groups.items():
            rows = [
                partition_row(label, sub, names, pickers, charset)
                for sub in subs[subs["key"].isin(topics)].itertuples(index=False)
            ]
            partition_rows.extend(with_verdict(rows, pip_392=pip_392))
        partitions = with_flaps(frame_of(partition_rows, PARTITION_COLUMNS), history, params)
        frames = {
            "groups": group_frame(partitions, names),
            "partitions": partitions,
            "consumers": consumer_frame(partitions, names),
            "matrix": matrix_frame(partitions, names),
            "timeline": timeline_frame(partitions, history),
        }
        selected = params.subscription or (next(iter(groups)) if groups else "")
        return Result(frames=frames, summary=summarize(frames, selected, line))

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        labels = ["group", "subscription"]
        bound = f"at most {context.max_groups} groups, most overloaded first"
        imbalance = GaugeMetricFamily(
            "pulsar_lens_failover_imbalance",
            "Largest active-partition count of a consumer over the fair count in a Failover "
            f"group (failover-assignment); {bound}.",
            labels=labels,
        )
        overload = GaugeMetricFamily(
            "pulsar_lens_failover_overload",
            "Largest active-partition count of a consumer in a Failover group over the largest "
            "of the most even spread, ceil(partitions / consumers); 1 is the best possible "
            f"(failover-assignment); {bound}.",
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
            order = ["overload", "imbalance", "label"]
            groups = groups.sort_values(order, ascending=[False, False, True])
            for row in groups.head(context.max_groups).to_dict("records"):
                key = [str(row["label"]), str(row["subscription"])]
                imbalance.add_metric(key, finite(row["imbalance"]) or 0.0)
                overload.add_metric(key, finite(row["overload"]) or 0.0)
                flapping.add_metric(key, float(row["flapping"]))
        return [imbalance, overload, flapping]

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.failover_assignment.views import (
            render_views,  # altair: on use
        )

        return render_views(result)

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        subs = failover_subscriptions(data.latest("subscriptions"))
        groups = group_topics(subs, consumer_names(data.latest("consumers")))
        return {"subscription": ["", *groups]}


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
    found: dict[tuple[str, str], set[str]] = {}
    # a loop over the columns: a pandas group per subscription costs ~50 us, thousands of them
    columns = (consumers[c] for c in ("topic", "subscription", "consumer_name"))
    for topic, sub, name in zip(*columns, strict=True):
        found.setdefault((str(topic), str(sub)), set()).add(str(name))
    return {key: frozenset(found[key]) for key in sorted(found)}


def group_topics(
    subs: pd.DataFrame, names: Mapping[tuple[str, str], frozenset[str]]
) -> dict[str, list[tuple[str, str]]]:
    """Label -> (topic, subscription) keys: same subscription name, linked by shared consumers.

    Keys sharing a consumer name, directly or through other keys, form one group (union-find,
    near-linear); groups are listed in the order of their last key."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for sub_name, subset in subs.groupby("subscription", sort=True):
        keys = list(subset["key"])
        for members in _linked(keys, names):
            grouped = [keys[i] for i in members]
            groups[_unique(group_label(str(sub_name), grouped), groups)] = grouped
    return groups


def _linked(
    keys: Sequence[tuple[str, str]], names: Mapping[tuple[str, str], frozenset[str]]
) -> list[list[int]]:
    """Positions of `keys` grouped by shared consumer names, each group ordered, the groups
    ordered by their last position."""
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, key in enumerate(keys):
        for name in names.get(key, frozenset()):
            j = first_with.setdefault(name, i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for i in range(len(keys)):
        members.setdefault(root(i), []).append(i)
    return sorted(members.values(), key=lambda group: group[-1])


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


def infer_mode(rows: Sequence[Mapping[str, Any]], *, pip_392: bool = True) -> str:
    """The rule behind a group's observations: modulo, consistent, either or unexplained
    (without PIP-392, as on 3.0, only modulo can explain them)."""
    seen = [r for r in rows if r["observed"] is not None]
    modulo = all(r["observed"] == r["modulo"] for r in seen)
    ring = pip_392 and all(r["observed"] == r["consistent_hashing"] for r in seen)
    if modulo and ring:
        return "either"
    if modulo:
        return "modulo"
    return "consistent" if ring else "unexplained"


def with_verdict(rows: list[dict[str, Any]], *, pip_392: bool = True) -> list[dict[str, Any]]:
    """Add the alternative rule's choice, whether the model explains it, and what moves; a
    broker without PIP-392 (3.0) has no alternative rule, so nothing would move."""
    mode = infer_mode(rows, pip_392=pip_392)
    other = "modulo" if mode == "consistent" else "consistent_hashing"
    for row in rows:
        predicted = row["consistent_hashing"] if mode == "consistent" else row["modulo"]
        current = row["observed"] if row["observed"] is not None else predicted
        row["alternative"] = row[other] if pip_392 else None
        row["explained"] = row["observed"] is None or row["observed"] == predicted
        row["moves"] = pip_392 and current != row["alternative"]
        row["mode"] = mode
    return rows
