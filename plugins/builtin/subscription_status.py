"""`subscription-status`: Burrow-style health of every subscription over recent snapshots.

Each subscription is judged on a window of its last `window` snapshots (oldest to newest).
The first rule that matches wins:

1. **ERROR** - the broker stopped dispatching because of unacknowledged messages: in the
   newest snapshot the subscription (`blockedSubscriptionOnUnackedMsgs`) or one of its
   consumers (`blockedConsumerOnUnackedMsgs`) is blocked.
2. **OK** - the newest backlog (`msgBacklog`) is 0.
3. **STOP** - backlog and no consumer activity: the newest snapshot has no consumer, or the
   window (at least 2 snapshots) shows neither dispatch nor acknowledgement.
4. **STALL** - consumers receive messages but do not acknowledge them: over a window of at
   least 2 snapshots the backlog never reached 0, messages were dispatched, and none was
   acknowledged.
5. **WARN** - the consumers acknowledge, but not fast enough: over a window of at least 2
   snapshots the backlog never reached 0, never shrank from one snapshot to the next, and
   ended higher than it started.
6. **OK** - anything else (the backlog is shrinking or steady while consumers acknowledge).

*Dispatch* in the window means a `msgRateOut` above 0 in any snapshot after the first, or a
`lastConsumedTimestamp` that advanced; *acknowledgement* means a `messageAckRate` above 0 in any
snapshot after the first, or a `lastAckedTimestamp` that advanced. A non-durable subscription
(a reader) never acknowledges, so for it dispatch counts as acknowledgement. Time lag is the
newest `collected_at` minus `earliestMsgPublishTimeInBacklog` (unknown when the poll did not
ask the broker for it), and 0 when the backlog is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from pulsar_lens.api import (
    AnalysisPlugin,
    BaseModel,
    Chart,
    Field,
    GaugeMetricFamily,
    Inputs,
    Metric,
    MetricFamily,
    MetricsContext,
    Note,
    Page,
    Result,
    Table,
    View,
    empty_frame,
    finite,
    parse_topic_name,
)

if TYPE_CHECKING:
    import altair as alt

STATUSES = ("ERROR", "STOP", "STALL", "WARN", "OK")
STATUS_COLORS = ("#d62728", "#9467bd", "#ff7f0e", "#e7ba52", "#2ca02c")
KEY = ["topic", "subscription"]
STATUS_COLUMNS = [
    "topic",
    "subscription",
    "type",
    "status",
    "reason",
    "msg_backlog",
    "backlog_change",
    "consumer_count",
    "msg_rate_out",
    "msg_ack_rate",
    "unacked_messages",
    "time_lag_s",
    "last_acked_at",
    "snapshots",
]


class SubscriptionStatus(AnalysisPlugin):
    name = "subscription-status"
    title = "Subscription status"
    description = (
        "OK / WARN / STALL / STOP / ERROR for every subscription from its backlog, dispatch and "
        "acknowledgements over recent snapshots, with the time lag of its oldest message."
    )
    version = "1.0"
    engine = "light"
    inputs = ("subscriptions", "consumers")
    history = 30
    outputs = ("status", "backlog")
    page = Page(
        title="Subscriptions",
        icon=":material/list_alt:",
        url_path="subscriptions",
        order=50,
        caption="Every subscription with its status, backlog and time lag, worst first.",
    )

    class Params(BaseModel):
        window: int = Field(5, ge=2, le=30, description="Snapshots per evaluation window")
        include_system: bool = Field(
            False, description="Include system topics (names starting with __)"
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs = data.history("subscriptions")
        if not params.include_system:
            system = {t: is_system_topic(t) for t in subs["topic"].unique()}
            subs = subs[~subs["topic"].map(system).astype(bool)]
        subs = with_window(subs, data.snapshots, window=params.window)
        blocked = blocked_consumers(data.latest("consumers"))
        status = compute_status(subs, blocked, newest=data.latest_snapshot_id())
        backlog = subs[["collected_at", *KEY, "msg_backlog"]].reset_index(drop=True)
        counts = {s: int((status["status"] == s).sum()) for s in STATUSES}
        worst = next((s for s in STATUSES if counts[s]), "OK")
        return Result(
            frames={"status": status, "backlog": backlog},
            summary={"subscriptions": len(status), "worst": worst, "counts": counts},
        )

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        status = GaugeMetricFamily(
            "pulsar_lens_subscription_status",
            "1 for the subscription's status (OK, WARN, STALL, STOP, ERROR; "
            "subscription-status), one series per subscription; bounded like the "
            "subscription backlog.",
            labels=["topic", "subscription", "status"],
        )
        lag = GaugeMetricFamily(
            "pulsar_lens_subscription_time_lag_seconds",
            "Age of the oldest unacknowledged message when the snapshot was taken "
            "(subscription-status); bounded like the subscription backlog.",
            labels=["topic", "subscription"],
        )
        for row in result.frames["status"].to_dict("records"):
            if context.keeps(row["topic"], row["subscription"]):
                labels = [str(row["topic"]), str(row["subscription"])]
                status.add_metric([*labels, str(row["status"])], 1.0)
                seconds = finite(row["time_lag_s"])
                if seconds is not None:
                    lag.add_metric(labels, seconds)
        return [status, lag]

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        status = result.frames["status"]
        counts: Mapping[str, int] = result.summary.get("counts", {})
        views: list[View] = [Metric(label=s, value=counts.get(s, 0)) for s in STATUSES]
        if status.empty:
            return [*views, Note("No subscriptions in the stored snapshots.")]
        bad = status[status["status"] != "OK"]
        if len(bad):
            views.append(Note(f"{len(bad)} subscription(s) need attention.", level="warning"))
        views.append(Table(status, title="Subscriptions", caption="Worst first"))
        shown = min(len(status), CHART_LINES)
        views.append(
            Chart(
                chart_backlog(result.frames["backlog"], status),
                title="Backlog",
                caption=f"the {shown} worst of {len(status):,} subscriptions",
            )
        )
        return views


def is_system_topic(topic: str) -> bool:
    if "__" not in topic:  # most names: no parse needed
        return False
    try:
        return parse_topic_name(topic).local.startswith("__")
    except ValueError:
        return False


def with_window(subs: pd.DataFrame, snapshots: pd.DataFrame, *, window: int) -> pd.DataFrame:
    """Rows of the newest `window` snapshots only, oldest first."""
    if snapshots.empty:
        return subs.iloc[0:0]
    ids = list(snapshots["snapshot_id"].tail(window))
    kept = subs[subs["snapshot_id"].isin(ids)]
    return kept.sort_values(["collected_at", *KEY], kind="stable").reset_index(drop=True)


def blocked_consumers(consumers: pd.DataFrame) -> set[tuple[str, str]]:
    """(topic, subscription) pairs with a consumer blocked on unacked messages."""
    if consumers.empty:
        return set()
    blocked = consumers[consumers["blocked_on_unacked"].map(_flag).astype(bool)]
    return set(zip(blocked["topic"], blocked["subscription"], strict=True))


def compute_status(
    subs: pd.DataFrame, blocked: set[tuple[str, str]], *, newest: str | None
) -> pd.DataFrame:
    """One row per subscription of the newest snapshot, worst status first."""
    facts = compute_facts(subs)
    facts = facts[facts["snapshot_id"] == newest]  # the others are gone
    if facts.empty:
        return empty_frame(STATUS_COLUMNS)
    records = facts.to_dict("records")
    judged = [
        judge(f, consumer_blocked=(f["topic"], f["subscription"]) in blocked) for f in records
    ]
    frame = facts.assign(
        status=[j[0] for j in judged],
        reason=[j[1] for j in judged],
        backlog_change=facts["msg_backlog"] - facts["first_backlog"],
        time_lag_s=[time_lag_seconds(f) for f in records],
    )
    order = frame["status"].map({s: i for i, s in enumerate(STATUSES)})
    frame = frame.assign(_o=order).sort_values(["_o", *KEY]).reset_index(drop=True)
    return frame.reindex(columns=STATUS_COLUMNS)


def compute_facts(subs: pd.DataFrame) -> pd.DataFrame:
    """Per subscription: its newest row plus what the rules need from the whole window."""
    rows = subs.assign(msg_backlog=subs["msg_backlog"].fillna(0).astype("int64"))
    later = rows.groupby(KEY, sort=False).cumcount() > 0
    rows = rows.assign(
        _out_later=later & (rows["msg_rate_out"].fillna(0) > 0),
        _ack_later=later & (rows["msg_ack_rate"].fillna(0) > 0),
        _step=rows.groupby(KEY, sort=False)["msg_backlog"].diff().fillna(0),
    )
    grouped = rows.groupby(KEY, sort=False)
    window = grouped.agg(
        snapshots=("msg_backlog", "size"),
        first_backlog=("msg_backlog", "first"),
        min_backlog=("msg_backlog", "min"),
        min_step=("_step", "min"),
        out_later=("_out_later", "any"),
        ack_later=("_ack_later", "any"),
        consumed_first=("last_consumed_at", "first"),
        consumed_last=("last_consumed_at", "last"),
        consumed_seen=("last_consumed_at", "count"),
        acked_first=("last_acked_at", "first"),
        acked_seen=("last_acked_at", "count"),
    )
    newest = grouped.tail(1).set_index(KEY)
    return newest.join(window).reset_index()


def _int(value: Any) -> int:
    return 0 if pd.isna(value) else int(value)


def _flag(value: Any) -> bool:
    """A nullable boolean cell as a bool; unknown counts as False."""
    return False if pd.isna(value) else bool(value)


def time_lag_seconds(row: Mapping[str, Any]) -> float | None:
    """Age of the oldest unacknowledged message at the time of the snapshot, in seconds."""
    if _int(row["msg_backlog"]) == 0:
        return 0.0
    earliest = row["earliest_msg_publish_time_in_backlog"]
    if pd.isna(earliest):
        return None
    return max(0.0, float((row["collected_at"] - earliest).total_seconds()))


def _advanced(seen: int, first: Any, last: Any) -> bool:
    return seen >= 2 and bool(last > first)


def dispatched(f: Mapping[str, Any]) -> bool:
    consumed = _advanced(f["consumed_seen"], f["consumed_first"], f["consumed_last"])
    return bool(f["out_later"]) or consumed


def acknowledged(f: Mapping[str, Any]) -> bool:
    durable = f["is_durable"]
    if not pd.isna(durable) and not bool(durable):
        return dispatched(f)
    acked = _advanced(f["acked_seen"], f["acked_first"], f["last_acked_at"])
    return bool(f["ack_later"]) or acked


def judge(f: Mapping[str, Any], *, consumer_blocked: bool) -> tuple[str, str]:
    """The status of one subscription from its facts over the window."""
    backlog, first, count = int(f["msg_backlog"]), int(f["first_backlog"]), int(f["snapshots"])
    if _flag(f["blocked_on_unacked"]) or consumer_blocked:
        return "ERROR", "dispatch blocked: too many unacknowledged messages"
    if backlog == 0:
        return "OK", "no backlog"
    if _int(f["consumer_count"]) == 0:
        return "STOP", f"backlog {backlog} and no consumer"
    if count < 2:
        return "OK", "one snapshot so far; trends need two"
    moved, acked = dispatched(f), acknowledged(f)
    if not moved and not acked:
        return "STOP", f"backlog {backlog}; nothing dispatched or acknowledged"
    never_empty = int(f["min_backlog"]) > 0
    if never_empty and moved and not acked:
        return "STALL", f"messages dispatched but none acknowledged in {count} snapshots"
    if never_empty and float(f["min_step"]) >= 0 and backlog > first:
        return "WARN", f"backlog grew {first} -> {backlog} while acknowledging"
    return "OK", "consumers keep up"


CHART_LINES = 25
"""The backlog chart draws the first this many subscriptions of the status table (worst
first): a line per subscription of a whole cluster is neither readable nor cheap to send."""


def chart_backlog(backlog: pd.DataFrame, status: pd.DataFrame) -> alt.Chart:
    """Backlog over time of the CHART_LINES worst subscriptions, coloured by current status."""
    import altair as alt  # on use: discovering plugins needs no altair

    worst = status[[*KEY, "status"]].head(CHART_LINES)
    labelled = backlog.merge(worst, on=KEY, how="inner").assign(
        name=lambda f: f["topic"].str.rsplit("/", n=1).str[-1] + " / " + f["subscription"]
    )
    chart: alt.Chart = (
        alt.Chart(labelled)
        .mark_line(point=True)
        .encode(
            x=alt.X("collected_at:T", title="Collected at"),
            y=alt.Y("msg_backlog:Q", title="Backlog (messages)"),
            detail="name:N",
            color=alt.Color(
                "status:N", scale=alt.Scale(domain=list(STATUSES), range=list(STATUS_COLORS))
            ),
            tooltip=["name:N", "status:N", "msg_backlog:Q", "collected_at:T"],
        )
    )
    return chart
