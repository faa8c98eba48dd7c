"""`subscription-status`: Burrow-style health of every subscription over recent snapshots.

Each subscription is judged on a window of its last `window` snapshots (oldest to newest);
`topic` and `subscription` (empty: all) keep the subscriptions of one topic or of one name.
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

Frames: `status`, a row per subscription of the newest snapshot, worst first; `backlog`, the
backlog over the window of the `CHART_LINES` first of them, which the chart draws (choose a
topic or a subscription to chart others).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
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
)
from pulsar_lens.plugins.builtin.shared.choices import chosen, offered, without_system

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
    version = "1.2"
    engine = "light"
    inputs = ("subscriptions", "consumers")
    history = 30  # the longest `window`
    history_param = "window"  # its newest `window` polls of subscriptions are read, 5 by default
    history_of = {"consumers": 1}  # only the newest poll of consumers is read
    columns_of = {  # what the status reads of 30 polls of subscriptions (15 of 26 columns)
        "subscriptions": (
            "topic",
            "subscription",
            "type",
            "msg_backlog",
            "unacked_messages",
            "msg_rate_out",
            "msg_ack_rate",
            "blocked_on_unacked",
            "consumer_count",
            "is_durable",
            "last_consumed_at",
            "last_acked_at",
            "earliest_msg_publish_time_in_backlog",
        ),
        "consumers": (
            "topic",
            "subscription",
            "unacked_messages",
            "blocked_on_unacked",
            "msg_rate_out",
            "msg_ack_rate",
            "last_acked_at",
            "last_consumed_at",
        ),
    }
    outputs = ("status", "backlog")
    page = Page(
        title="Subscriptions",
        icon=":material/list_alt:",
        url_path="subscriptions",
        order=50,
        caption="Every subscription with its status, backlog and time lag, worst first.",
        controls=("topic", "subscription"),
    )

    class Params(BaseModel):
        topic: str = Field("", title="Topic", description="Only this topic; empty for all")
        subscription: str = Field(
            "", title="Subscription", description="Only this subscription; empty for all"
        )
        window: int = Field(5, ge=2, le=30, description="Snapshots per evaluation window")
        include_system: bool = Field(
            False, description="Include system topics (names starting with __)"
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs = chosen(data.history("subscriptions"), params.topic, params.subscription)
        subs = with_window(subs, data.snapshots, window=params.window)
        if not params.include_system:
            subs = without_system(subs)
        blocked = blocked_consumers(data.latest("consumers"))
        status = compute_status(subs, blocked, newest=data.latest_snapshot_id())
        backlog = backlog_of(subs, status.head(CHART_LINES))
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
        for row in context.kept_rows(result.frames["status"]):
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

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        """The topics and subscription names of the newest poll."""
        return offered(data.latest("subscriptions"))


def with_window(subs: pd.DataFrame, snapshots: pd.DataFrame, *, window: int) -> pd.DataFrame:
    """Rows of the newest `window` snapshots only, in the order read."""
    if snapshots.empty:
        return subs.iloc[0:0]
    ids = list(snapshots["snapshot_id"].tail(window))
    return subs[subs["snapshot_id"].isin(ids)].reset_index(drop=True)


def backlog_of(subs: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """The backlog over the window of the subscriptions in `shown` (the chart's), oldest
    first: a few rows, not the window's every row."""
    columns = ["collected_at", *KEY, "msg_backlog"]
    if shown.empty:
        return subs.loc[[], columns].reset_index(drop=True)
    near = subs.loc[subs["topic"].isin(shown["topic"].unique()), columns]
    rows = near.merge(shown[KEY].drop_duplicates(), on=KEY, how="inner")
    return rows.sort_values(["collected_at", *KEY], kind="stable").reset_index(drop=True)


def blocked_consumers(consumers: pd.DataFrame) -> set[tuple[str, str]]:
    """(topic, subscription) pairs with a consumer blocked on unacked messages."""
    if consumers.empty:
        return set()
    blocked = consumers[_flags(consumers["blocked_on_unacked"])]
    return set(zip(blocked["topic"].tolist(), blocked["subscription"].tolist(), strict=True))


def _flags(column: pd.Series) -> np.ndarray:
    """A nullable boolean column as bools; unknown counts as False."""
    flags: np.ndarray = column.astype("boolean").fillna(False).to_numpy(dtype=bool)
    return flags


def compute_status(
    subs: pd.DataFrame, blocked: set[tuple[str, str]], *, newest: str | None
) -> pd.DataFrame:
    """One row per subscription of the newest snapshot, worst status first."""
    if subs.empty:
        return empty_frame(STATUS_COLUMNS)
    facts = compute_facts(subs)
    facts = facts[facts["snapshot_id"] == newest]  # the others are gone
    if facts.empty:
        return empty_frame(STATUS_COLUMNS)
    keys = zip(facts["topic"].tolist(), facts["subscription"].tolist(), strict=True)
    consumer_blocked = np.array([k in blocked for k in keys] if blocked else [False] * len(facts))
    status, reason = judge_all(facts, consumer_blocked)
    frame = facts.assign(
        status=status,
        reason=reason,
        backlog_change=facts["msg_backlog"] - facts["first_backlog"],
        time_lag_s=time_lags(facts),
    )
    order = pd.Categorical(status, categories=STATUSES).codes
    frame = frame.assign(_o=order).sort_values(["_o", *KEY]).reset_index(drop=True)
    return frame.reindex(columns=STATUS_COLUMNS)


def compute_facts(subs: pd.DataFrame) -> pd.DataFrame:
    """Per subscription: its newest row plus what the rules need from the whole window (rows
    in any order), in the order of the subscriptions' first rows."""
    rows = subs.assign(msg_backlog=subs["msg_backlog"].fillna(0).astype("int64"))
    group = rows.groupby(KEY, sort=False).ngroup().to_numpy()
    when = rows["collected_at"].to_numpy(dtype="datetime64[us]")
    order = np.lexsort((when, group))  # each subscription's rows together, oldest first
    group = group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], len(group)] - 1
    backlog = rows["msg_backlog"].to_numpy()[order]
    later = np.r_[False, group[1:] == group[:-1]]
    step = np.where(later, backlog - np.r_[0, backlog[:-1]], 0)

    def any_later(column: str) -> np.ndarray:
        hit = later & (rows[column].fillna(0).to_numpy(dtype=float)[order] > 0)
        return np.logical_or.reduceat(hit, starts)

    newest = rows.iloc[order[ends]].reset_index(drop=True)
    facts = {
        "snapshots": np.diff(np.r_[starts, len(group)]),
        "first_backlog": backlog[starts],
        "min_backlog": np.minimum.reduceat(backlog, starts),
        "min_step": np.minimum.reduceat(step, starts),
        "out_later": any_later("msg_rate_out"),
        "ack_later": any_later("msg_ack_rate"),
    }
    for name, column in (("consumed", "last_consumed_at"), ("acked", "last_acked_at")):
        first, last, seen = _known(rows[column].to_numpy(dtype="datetime64[us]")[order], group)
        facts |= {f"{name}_first": first, f"{name}_last": last, f"{name}_seen": seen}
    return newest.assign(**facts)


def _known(times: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group (`group` sorted, every group present): its first and last known time (NaT
    when none) and how many it has."""
    count = int(group[-1]) + 1
    known = ~np.isnat(times)
    first = np.full(count, np.datetime64("NaT"), dtype=times.dtype)
    last = first.copy()
    at, where = np.unique(group[known], return_index=True)
    first[at] = times[known][where]
    at, where = np.unique(group[known][::-1], return_index=True)
    last[at] = times[known][::-1][where]
    return first, last, np.bincount(group[known], minlength=count)


def time_lags(facts: pd.DataFrame) -> list[float | None] | np.ndarray:
    """Age of the oldest unacknowledged message at the time of the snapshot, in seconds: 0
    without a backlog, unknown (None) without its publish time."""
    seconds = (facts["collected_at"] - facts["earliest_msg_publish_time_in_backlog"]).dt
    lag: np.ndarray = np.maximum(0.0, seconds.total_seconds().to_numpy(dtype=float))
    lag[facts["msg_backlog"].to_numpy() == 0] = 0.0
    if np.isnan(lag).all():
        return [None] * len(lag)  # as a list of None: an object column, not floats
    return lag


RULES = (
    ("ERROR", "dispatch blocked: too many unacknowledged messages"),
    ("OK", "no backlog"),
    ("STOP", "backlog {backlog} and no consumer"),
    ("OK", "one snapshot so far; trends need two"),
    ("STOP", "backlog {backlog}; nothing dispatched or acknowledged"),
    ("STALL", "messages dispatched but none acknowledged in {count} snapshots"),
    ("WARN", "backlog grew {first} -> {backlog} while acknowledging"),
    ("OK", "consumers keep up"),
)
"""The rules in the order they are tried (see the module docstring): status and reason."""


def judge_all(facts: pd.DataFrame, consumer_blocked: np.ndarray) -> tuple[list[str], list[str]]:
    """The status and reason of every subscription from its facts over the window."""
    backlog = facts["msg_backlog"].to_numpy()
    first = facts["first_backlog"].to_numpy()
    count = facts["snapshots"].to_numpy()
    moved = facts["out_later"].to_numpy(bool) | _advanced(facts, "consumed", "consumed_last")
    acked = facts["ack_later"].to_numpy(bool) | _advanced(facts, "acked", "last_acked_at")
    reader = ~facts["is_durable"].astype("boolean").fillna(True).to_numpy(dtype=bool)
    acked = np.where(reader, moved, acked)  # a reader never acknowledges: dispatch counts
    never_empty = facts["min_backlog"].to_numpy() > 0
    matched = [
        _flags(facts["blocked_on_unacked"]) | consumer_blocked,
        backlog == 0,
        facts["consumer_count"].fillna(0).to_numpy() == 0,
        count < 2,
        ~moved & ~acked,
        never_empty & moved & ~acked,
        never_empty & (facts["min_step"].to_numpy() >= 0) & (backlog > first),
        np.ones(len(facts), bool),
    ]
    rule = np.argmax(np.vstack(matched), axis=0)
    statuses = np.array([status for status, _ in RULES], dtype=object)[rule]
    reasons = np.array([reason for _, reason in RULES], dtype=object)[rule]
    for r, (_, template) in enumerate(RULES):
        if "{" not in template:
            continue
        at = np.flatnonzero(rule == r)  # only the rows whose reason names a figure
        reasons[at] = [
            template.format(backlog=b, first=f, count=c)
            for b, f, c in zip(
                backlog[at].tolist(), first[at].tolist(), count[at].tolist(), strict=True
            )
        ]
    return statuses.tolist(), reasons.tolist()


def _advanced(facts: pd.DataFrame, name: str, last: str) -> np.ndarray:
    """Known twice or more in the window and later at the end than at first."""
    end = facts[last].to_numpy(dtype="datetime64[us]")
    start = facts[f"{name}_first"].to_numpy(dtype="datetime64[us]")
    advanced: np.ndarray = (facts[f"{name}_seen"].to_numpy() >= 2) & (end > start)
    return advanced


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
