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
(`history` recent ones) where its subscription was Failover; `flap_changes` or more changes
flag it. The timeline shows the active consumer in those polls. Each poll's Failover rows are
kept in a step (`failover`), so a pass reads them, not 30 polls of every subscription.

**Priority levels**: a 4.0.7 broker's stats list consumer names but no `priorityLevel` (nor
does our consumer table keep metadata). All consumers are therefore taken as one priority
level. A consumer with a lower priority (a higher level number) than the others is never
active while they are connected, so partitions the model cannot explain ("unexplained") may
mean that priority levels differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import (
    STEPS_API_VERSION,
    AnalysisPlugin,
    BaseModel,
    Field,
    GaugeMetricFamily,
    Inputs,
    JvmCharset,
    MetricFamily,
    MetricsContext,
    Page,
    Result,
    View,
    finite,
    frame_of,
    jvm_charset,
)
from pulsar_lens.plugins.builtin.failover_assignment.frames import (
    PARTITION_COLUMNS,
    consumer_frame,
    group_frame,
    matrix_frame,
    partition_history,
    summarize,
    timeline_frame,
    with_flaps,
)
from pulsar_lens.plugins.builtin.failover_assignment.rows import (
    Groups,
    Members,
    group_rows,
    members_of,
    partition_columns,
)
from pulsar_lens.plugins.builtin.shared.versions import broker_line

SUBSCRIPTION_COLUMNS = ("topic", "subscription", "type", "consumer_count", "active_consumer_name")
FAILOVER_COLUMNS = ("collected_at", "topic", "subscription", "active_consumer_name")
"""The columns a step keeps of each Failover subscription's row."""
CONSUMER_COLUMNS = ("topic", "subscription", "consumer_name")


class FailoverAssignment(AnalysisPlugin):
    name = "failover-assignment"
    title = "Failover assignment"
    description = (
        "Active consumer per partition of every Failover subscription (also across the topics "
        "of a multi-topic subscription), partitions per consumer, flapping over time, and what "
        "PIP-392 consistent hashing would assign instead."
    )
    api_version = STEPS_API_VERSION
    version = "1.2"
    engine = "light"
    inputs = ("subscriptions", "consumers", "brokers")
    history = 30
    # the newest poll of each is read; the window's Failover rows are the steps'
    history_of = {"subscriptions": 1, "consumers": 1, "brokers": 1}
    columns_of = {"subscriptions": SUBSCRIPTION_COLUMNS, "consumers": CONSUMER_COLUMNS}
    outputs = ("groups", "partitions", "consumers", "matrix", "timeline")
    step_inputs = ("subscriptions",)
    step_outputs = ("failover",)
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

    def step(self, data: Inputs, params: Params) -> Result:
        """The poll's rows of Failover subscriptions (their active consumer): a pass reads
        these of 30 polls, not 30 polls of every subscription."""
        return Result(frames={"failover": failover_rows(data.latest("subscriptions"))})

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs, members, groups = _groups(data)
        history = data.steps("failover")
        line = broker_line(data.latest("brokers"))
        columns, order = partition_columns(
            subs,
            members,
            groups,
            pip_392=line.line != "3.0",
            charset=jvm_charset(params.jvm_charset),
        )
        names = [members.names[i] for i in order.tolist()]
        partitions = _partition_frame(columns)
        window = partition_history(partitions, history)
        partitions = with_flaps(partitions, window, params)
        frames = {
            "groups": group_frame(partitions, names),
            "partitions": partitions,
            "consumers": consumer_frame(partitions, names),
            "matrix": matrix_frame(partitions, names),
            "timeline": timeline_frame(partitions, window),
        }
        selected = params.subscription or (groups.labels[0] if groups.labels else "")
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
        return {"subscription": ["", *_groups(data)[2].labels]}


def _groups(data: Inputs) -> tuple[pd.DataFrame, Members, Groups]:
    """The newest poll's Failover subscriptions, their consumers and their groups, found once
    for `analyze` and `param_choices` (a fifth of the plugin's time when found twice)."""

    def find() -> tuple[pd.DataFrame, Members, Groups]:
        subs = failover_subscriptions(data.latest("subscriptions"))
        members = members_of(data.latest("consumers"), subs)
        return subs, members, group_rows(subs, members)

    return data.derived("failover-assignment groups", find)


def _partition_frame(columns: Mapping[str, Any]) -> pd.DataFrame:
    """The partition rows as `frame_of` would make them of one dict per row."""
    if not columns["label"]:
        return frame_of([], PARTITION_COLUMNS)
    return pd.DataFrame(dict(columns), columns=PARTITION_COLUMNS)


def failover_subscriptions(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """Failover subscriptions with consumers, by subscription, then topic."""
    if subscriptions.empty:
        return subscriptions
    subs = subscriptions[
        (subscriptions["type"] == "Failover") & (subscriptions["consumer_count"] > 0)
    ].sort_values(["subscription", "topic"])
    return subs.reset_index(drop=True)


def failover_rows(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """The rows of Failover subscriptions, in their order, with what flapping and the
    timeline read of them (`FAILOVER_COLUMNS`)."""
    if "type" in subscriptions:  # an empty poll keeps the table's dtypes
        subscriptions = subscriptions[subscriptions["type"] == "Failover"]
    return subscriptions.reindex(columns=list(FAILOVER_COLUMNS)).reset_index(drop=True)


def consumer_names(consumers: pd.DataFrame) -> dict[tuple[str, str], frozenset[str]]:
    """(topic, subscription) -> the names of its connected consumers."""
    if consumers.empty:
        return {}
    found: dict[tuple[str, str], set[str]] = {}
    # a loop over the columns as lists: a pandas group per subscription costs ~50 us, and
    # iterating an Arrow-backed column ~5 us an element
    columns = (consumers[c].tolist() for c in ("topic", "subscription", "consumer_name"))
    for topic, sub, name in zip(*columns, strict=True):
        found.setdefault((str(topic), str(sub)), set()).add(str(name))
    return {key: frozenset(found[key]) for key in sorted(found)}
