"""`stuck-hashes`: Key_Shared hashes that keep draining without progress (PIP-379, Pulsar 4.0).

When consumers join or leave a Key_Shared subscription, hashes move between consumers. A hash
whose previous consumer (the *holder*) still has unacknowledged messages keeps *draining*:
a message with that hash that the broker tries to send to the hash's new consumer is blocked
and waits in the replay set (`msgInReplay`) until the holder acknowledges and the hash is
cleared. `blockedAttempts` counts those attempts: one per message, plus one each time the
dispatcher retries a waiting message (when new messages arrive; not while the subscription
is idle). A draining hash with `blockedAttempts > 0` therefore has a message waiting.

Rules, per (topic, subscription, holder consumer, hash) draining in the newest snapshot:

* its *streak* is the run of consecutive snapshots, ending with the newest, in which the hash
  was draining for the same holder with the same `unackMsgs` (no acknowledgement progress);
* **stuck**: the streak spans at least 2 snapshots and either at least `polls` snapshots or at
  least `seconds` seconds, and messages wait (`blockedAttempts > 0`); `blocked_growth` counts the
  attempts blocked during the streak;
* **idle**: the same, but nothing was ever blocked (no message waits for it yet);
* **draining**: anything else (recent, or the holder is acknowledging).

Invariant: a hash drains for one consumer at a time. A hash reported draining for two
consumers in the same snapshot is a broker bug; every such case in the window is listed in
`violations`.

Classic dispatcher (Pulsar 3.x, or 4.0 with
`subscriptionKeySharedUseClassicPersistentImplementation=true`): there are no draining hashes;
instead recently joined consumers are held back until the mark-delete position passes the
read position they joined at (`consumersAfterMarkDeletePosition`, `readPositionWhenJoining`).
`held_back` lists them with how long they have been held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pulsar_lens.api import (
    STEPS_API_VERSION,
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
    escape_markdown,
)
from pulsar_lens.core.secrets import clean
from pulsar_lens.plugins.builtin.shared.choices import chosen, offered
from pulsar_lens.plugins.builtin.stuck_hashes.classic import compute_held_back, marked
from pulsar_lens.plugins.builtin.stuck_hashes.violations import compute_violations, listed_names
from pulsar_lens.plugins.builtin.stuck_hashes.waiting import waiting_consumers
from pulsar_lens.plugins.builtin.stuck_hashes.windows import snapshot_order, with_positions

if TYPE_CHECKING:
    import altair as alt

HASH_KEY = ["topic", "subscription", "consumer_name", "hash"]
HASH_COLUMNS = [
    "topic",
    "subscription",
    "hash",
    "state",
    "consumer_name",
    "unack_msgs",
    "blocked_attempts",
    "blocked_growth",
    "polls_without_progress",
    "seconds_without_progress",
    "draining_since",
    "waiting_consumer",
    "holder_unacked_messages",
    "holder_last_acked_at",
    "msg_in_replay",
]
STATE_ORDER = {"stuck": 0, "idle": 1, "draining": 2}
MAX_LINES = 20
"""Stuck hashes drawn in the blocked-attempts chart (the table lists them all)."""
SHOWN_NAME = 80
"""Characters of a consumer name a chart label shows; the tables keep the whole name."""


class StuckHashes(AnalysisPlugin):
    name = "stuck-hashes"
    title = "Stuck draining hashes"
    description = (
        "Key_Shared hashes that keep draining with no acknowledgement progress while messages "
        "wait for them, who holds them, and consumers held back by the classic dispatcher."
    )
    api_version = STEPS_API_VERSION
    version = "1.3"
    engine = "light"
    inputs = ("draining_hashes", "consumers", "subscriptions")
    history = 60
    # the newest poll of consumers and subscriptions; every poll's subscriptions are read by
    # the steps, which keep the few rows the classic dispatcher marks (8 of 26 columns)
    history_of = {"consumers": 1, "subscriptions": 1}
    step_inputs = ("subscriptions",)
    step_outputs = ("marked",)
    columns_of = {
        "subscriptions": (
            "topic",
            "subscription",
            "type",
            "consumer_count",
            "unacked_messages",
            "msg_in_replay",
            "last_acked_at",
            "consumers_after_mark_delete_position",
        ),
        "consumers": (
            "topic",
            "subscription",
            "consumer_name",
            "connected_since",
            "unacked_messages",
            "read_position_when_joining",
            "last_acked_at",
            "hash_ranges",  # the newest poll's only: who would receive a waiting hash
        ),
    }
    outputs = ("hashes", "history", "violations", "held_back", "key_shared")
    page = Page(
        title="Stuck hashes",
        icon=":material/hourglass_bottom:",
        url_path="stuck-hashes",
        order=20,
        caption="A hash drains when its range moved to another consumer while the old one "
        "still held unacknowledged messages of it; new messages with that hash wait until "
        "they are acked.",
        controls=("topic", "subscription"),
    )

    class Params(BaseModel):
        topic: str = Field("", title="Topic", description="Only this topic; empty for all")
        subscription: str = Field(
            "", title="Subscription", description="Only this subscription; empty for all"
        )
        polls: int = Field(3, ge=2, le=60, description="Polls without progress before 'stuck'")
        seconds: float = Field(
            120.0,
            gt=0,
            le=7 * 86400,
            description="Seconds without progress before 'stuck' (either suffices)",
        )

    def step(self, data: Inputs, params: Params) -> Result:
        """The poll's subscriptions that name consumers after the mark-delete position."""
        return Result(frames={"marked": marked(data.latest("subscriptions"))})

    def analyze(self, data: Inputs, params: Params) -> Result:
        def only(frame: pd.DataFrame) -> pd.DataFrame:
            return chosen(frame, params.topic, params.subscription)

        order = snapshot_order(data.snapshots)
        draining = with_positions(only(data.history("draining_hashes")), order)
        consumers, subscriptions = (
            only(data.latest("consumers")),
            only(data.latest("subscriptions")),
        )
        hashes = compute_hashes(draining, order, polls=params.polls, seconds=params.seconds)
        hashes = with_holder_facts(hashes, consumers, subscriptions)
        violations = compute_violations(draining)
        held = compute_held_back(only(data.steps("marked")), consumers, order)
        history = draining[[*HASH_KEY, "collected_at", "unack_msgs", "blocked_attempts"]]
        return Result(
            frames={
                "hashes": hashes,
                "history": history.reset_index(drop=True),
                "violations": violations,
                "held_back": held,
                "key_shared": key_shared_pairs(subscriptions),
            },
            summary={
                "draining": len(hashes),
                "stuck": int((hashes["state"] == "stuck").sum()),
                "stuck_hashes": list(stuck_hash_values(hashes)),
                "violations": len(violations),
                "held_back": len(held),
            },
        )

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        gauge = GaugeMetricFamily(
            "pulsar_lens_stuck_hashes",
            "Key_Shared hashes draining without acknowledgement progress while messages wait "
            "(stuck-hashes); bounded like the subscription backlog.",
            labels=["topic", "subscription"],
        )
        hashes = result.frames["hashes"]
        stuck = hashes.loc[hashes["state"] == "stuck", ["topic", "subscription"]].astype(str)
        counts = {
            (str(t), str(s)): int(n)
            for (t, s), n in stuck.value_counts(["topic", "subscription"]).items()
        }
        pairs = result.frames["key_shared"]
        shown = set(counts) | {
            (str(t), str(s)) for t, s in zip(pairs["topic"], pairs["subscription"], strict=True)
        }
        for key in context.subscriptions:
            if key in shown:
                gauge.add_metric(list(key), float(counts.get(key, 0)))
        return [gauge]

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        hashes, summary = result.frames["hashes"], result.summary
        views: list[View] = [
            Metric("Draining hashes", summary["draining"]),
            Metric("Stuck", summary["stuck"]),
            Metric("Invariant violations", summary["violations"]),
            Metric("Consumers held back", summary["held_back"]),
        ]
        if summary["violations"]:
            views.append(
                Note(
                    "A hash is draining for two consumers at once: the broker broke its own "
                    "invariant. See the violations table.",
                    level="error",
                )
            )
        views.extend(_stuck_views(hashes, result.frames["history"]))
        if len(result.frames["violations"]):
            views.append(Table(result.frames["violations"], title="Invariant violations"))
        if len(result.frames["held_back"]):
            views.append(Table(result.frames["held_back"], title="Held back (classic dispatcher)"))
        return views

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        """The topics and names of the Key_Shared subscriptions of the newest poll."""
        subs = data.latest("subscriptions")
        return offered(subs[subs["type"] == "Key_Shared"])


def key_shared_pairs(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """(topic, subscription) of the Key_Shared subscriptions with consumers: each gets a
    stuck-hash series, 0 when none is stuck."""
    columns = ["topic", "subscription"]
    if subscriptions.empty:
        return empty_frame(columns)
    keyed = subscriptions[
        (subscriptions["type"] == "Key_Shared") & (subscriptions["consumer_count"] > 0)
    ]
    return keyed[columns].drop_duplicates().sort_values(columns).reset_index(drop=True)


def _stuck_views(hashes: pd.DataFrame, history: pd.DataFrame) -> list[View]:
    if hashes.empty:
        return [Note("No hash is draining in the newest snapshot.")]
    stuck = hashes[hashes["state"] == "stuck"]
    views: list[View] = []
    if len(stuck):
        names = sorted(set(stuck["consumer_name"].astype(str)))
        holders = escape_markdown(listed_names(np.zeros(len(names), np.int64), names, 1)[0])
        views.append(
            Note(
                f"{len(stuck)} hash(es) stuck; holder(s) {holders} must acknowledge.",
                level="warning",
            )
        )
    views.append(Table(hashes, title="Draining hashes", caption="Stuck first"))
    caption = f"the {MAX_LINES} that were blocked most" if len(stuck) > MAX_LINES else ""
    chart = chart_blocked(history, stuck)
    views.append(Chart(chart, title="Blocked attempts of stuck hashes", caption=caption))
    return views


def with_runs(draining: pd.DataFrame) -> pd.DataFrame:
    """Number each row's runs: `run_present` (consecutive polls of the same key) and
    `run_same` (consecutive polls of the same key with the same unack_msgs)."""
    rows = draining.sort_values([*HASH_KEY, "position"], kind="stable").reset_index(drop=True)
    first = rows.groupby(HASH_KEY, sort=False).cumcount() == 0
    gap = first | (rows["position"].diff() != 1)
    changed = gap | (rows["unack_msgs"].diff() != 0)
    return rows.assign(run_present=gap.cumsum(), run_same=changed.cumsum())


def _times_at(times: pd.Series, positions: pd.Series) -> pd.Series:
    """collected_at of each position, aligned with `positions`."""
    return times.reindex(positions.to_numpy()).set_axis(positions.index)


def compute_hashes(
    draining: pd.DataFrame, order: pd.DataFrame, *, polls: int, seconds: float
) -> pd.DataFrame:
    """One row per hash draining in the newest snapshot, with its streak and state."""
    if draining.empty or order.empty:
        return empty_frame(HASH_COLUMNS)
    newest = int(order["position"].iloc[-1])
    times = order.set_index("position")["collected_at"]
    rows = with_runs(draining)
    since = rows.groupby("run_present")["position"].min().rename("since")
    start = rows.groupby("run_same").agg(
        still=("position", "min"), b0=("blocked_attempts", "first")
    )
    last = rows[rows["position"] == newest]
    last = last.join(since, on="run_present").join(start, on="run_same")
    if last.empty:
        return empty_frame(HASH_COLUMNS)
    count = newest - last["still"] + 1
    quiet = (times[newest] - _times_at(times, last["still"])).dt.total_seconds()
    long_enough = (count >= 2) & ((count >= polls) | (quiet >= seconds))
    waiting = last["blocked_attempts"] > 0
    state = np.where(~long_enough, "draining", np.where(waiting, "stuck", "idle"))
    frame = last.assign(
        state=state,
        unack_msgs=last["unack_msgs"].astype("int64"),
        blocked_attempts=last["blocked_attempts"].astype("int64"),
        blocked_growth=(last["blocked_attempts"] - last["b0"]).astype("int64"),
        polls_without_progress=count.astype("int64"),
        seconds_without_progress=quiet.astype("float64"),
        draining_since=_times_at(times, last["since"]),
        _o=pd.Series(state, index=last.index).map(STATE_ORDER),
    )
    frame = frame.sort_values(["_o", "topic", "subscription", "hash", "consumer_name"])
    return frame[[c for c in HASH_COLUMNS if c in frame]].reset_index(drop=True)


def with_holder_facts(
    hashes: pd.DataFrame, consumers: pd.DataFrame, subscriptions: pd.DataFrame
) -> pd.DataFrame:
    """Add the holder's unacked count and last ack, the waiting consumer and msg_in_replay."""
    if hashes.empty:
        return hashes.reindex(columns=HASH_COLUMNS)
    key = ["topic", "subscription", "consumer_name"]
    holder = consumers.groupby(key, as_index=False).agg(
        holder_unacked_messages=("unacked_messages", "sum"),
        holder_last_acked_at=("last_acked_at", "max"),
    )
    out = hashes.merge(holder, on=key, how="left")
    replay = subscriptions[["topic", "subscription", "msg_in_replay"]].drop_duplicates(
        ["topic", "subscription"]
    )
    out = out.merge(replay, on=["topic", "subscription"], how="left")
    out["waiting_consumer"] = waiting_consumers(out, consumers)
    return out.reindex(columns=HASH_COLUMNS)


def chart_blocked(history: pd.DataFrame, stuck: pd.DataFrame) -> alt.Chart:
    """Blocked attempts over time, one line per stuck hash: the MAX_LINES blocked most, so
    the chart's data stays small however many hashes are stuck."""
    import altair as alt  # on use: discovering plugins needs no altair

    top = stuck.sort_values(["blocked_growth", "hash"], ascending=[False, True], kind="stable")
    keys = top[HASH_KEY].head(MAX_LINES) if len(top) else pd.DataFrame(columns=HASH_KEY)
    lines = history.merge(keys, on=HASH_KEY, how="inner")
    holder = lines["consumer_name"].astype(str).map(lambda n: clean(n, limit=SHOWN_NAME))
    lines = lines.assign(label=lines["hash"].astype(str) + " @ " + holder)
    chart: alt.Chart = (
        alt.Chart(lines)
        .mark_line(point=True)
        .encode(
            x=alt.X("collected_at:T", title="Collected at"),
            y=alt.Y("blocked_attempts:Q", title="Blocked attempts"),
            color=alt.Color("label:N", title="Hash @ holder"),
            tooltip=["label:N", "unack_msgs:Q", "blocked_attempts:Q", "collected_at:T"],
        )
    )
    return chart


def stuck_hash_values(hashes: pd.DataFrame) -> Sequence[int]:
    """The stuck hashes of a `hashes` frame, ascending."""
    return sorted(int(h) for h in hashes.loc[hashes["state"] == "stuck", "hash"])
