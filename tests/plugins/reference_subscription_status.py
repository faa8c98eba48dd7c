"""subscription-status's analysis as it was before it was vectorised (plugin version 1.0):
one dict and one `judge` call per subscription. Kept only as the reference the vectorised path
must equal frame for frame (tests/plugins/test_subscription_status_vectorised.py,
benchmarks/analyses.py); not product code. Since 1.2 the plugin's backlog frame holds only the
rows its chart draws: `analyze_charted` is the reference cut the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Inputs, Result, empty_frame, parse_topic_name
from pulsar_lens.plugins.builtin.subscription_status import (
    CHART_LINES,
    KEY,
    STATUS_COLUMNS,
    STATUSES,
)


def analyze(data: Inputs, params: Any) -> Result:
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


def analyze_charted(data: Inputs, params: Any) -> Result:
    """`analyze`, its backlog frame cut to the rows of the status table's first CHART_LINES
    subscriptions (those the chart draws), in the order they had."""
    result = analyze(data, params)
    backlog, status = result.frames["backlog"], result.frames["status"]
    shown = set(status[KEY].head(CHART_LINES).itertuples(index=False))
    keys = backlog[KEY].itertuples(index=False)
    drawn = np.fromiter((key in shown for key in keys), dtype=bool, count=len(backlog))
    result.frames["backlog"] = backlog[drawn].reset_index(drop=True)
    return result


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
