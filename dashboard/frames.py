"""The Overview's frames: the newest poll's status, its errors and the calls that failed.

Store facts only (when the poll ran, which calls failed): every analysis lives in its plugin,
the counts, brokers and namespaces the Overview shows in `cluster-overview`. No Streamlit
here: `data.py` caches, pages draw, tests call directly.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

import pandas as pd

from pulsar_lens.collectors.notes import ACTIONS
from pulsar_lens.core.unsure import endpoint_target

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


def answer_problems(errors: pd.DataFrame) -> pd.DataFrame:
    """The errors of a poll that are items of the answers refused, cut or stored as null
    (one row per kind, counted in its message), not calls that failed."""
    endpoints = errors.get("endpoint", pd.Series(dtype="string"))
    return errors[endpoints.isin(ACTIONS).fillna(False).astype(bool)]


BROKER_CALLS = (
    ("/broker-stats/topics", "its topics' stats (rates, backlogs, subscriptions, consumers)"),
    ("/ownedNamespaces", "which bundles it owns"),
    ("/broker-stats/load-report", "its load report (CPU, memory, message rates)"),
    ("/broker-stats/metrics", "its load manager's counters (bundles unloaded and split)"),
    ("/brokers/version", "its version"),
    ("/stats", "that topic's live stats (hash ranges, draining hashes, active consumer)"),
    ("/partitions", "that partitioned topic's partition count"),
)
"""The calls a poll sends to a broker's own URL, by how their path ends, and what a snapshot
lacks when one fails."""


def compute_broker_failures(errors: pd.DataFrame) -> pd.DataFrame:
    """One row per failed call sent to a broker's own URL rather than the admin URL: the
    broker ("host:port"), the call, and what its failure leaves out of the snapshot."""
    rows = []
    for endpoint in errors.get("endpoint", pd.Series(dtype="string")).dropna():
        host, path = endpoint_target(str(endpoint))
        if not host:
            continue
        method = str(endpoint).partition(" ")[0]
        missing = next((m for end, m in BROKER_CALLS if path.endswith(end)), "its answer")
        rows.append({"broker": host, "call": f"{method} {path}", "missing": missing})
    frame = pd.DataFrame(rows, columns=["broker", "call", "missing"], dtype="string")
    return frame.drop_duplicates().sort_values(["broker", "call"], ignore_index=True)


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
