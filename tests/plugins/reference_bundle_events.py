"""bundle-ownership's events as they were computed before the consumers' reconnects were
found for every poll at once (`plugins/builtin/bundle_ownership/renewals.py`): poll by poll,
the consumers seen so far merged into one frame again at each poll. Kept only as the
reference the new path must equal frame for frame
(tests/plugins/test_bundle_events_vectorised.py); not product code."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pulsar_lens.core.unsure import unsure_of_stored
from pulsar_lens.plugins.builtin.bundle_ownership.events import (
    EVENT_COLUMNS,
    _listing_events,
    _owner,
    _owner_events,
    _settled,
    snapshots_of,
)

CONSUMER_KEY = ["topic", "subscription", "consumer_name"]


def compute_events(
    bundles: pd.DataFrame,
    topics: pd.DataFrame,
    consumers: pd.DataFrame,
    snapshots: pd.DataFrame,
) -> pd.DataFrame:
    """Ownership events between consecutive snapshots, newest first."""
    ids = [str(s) for s in snapshots["snapshot_id"]] if len(snapshots) else []
    by_snapshot = snapshots_of(bundles, ids)
    topics_by, consumers_by = snapshots_of(topics, ids), snapshots_of(consumers, ids)
    last_owner: dict[tuple[str, str], str] = {}
    seen = pd.DataFrame(columns=[*CONSUMER_KEY, "connected_since"])
    rows: list[dict[str, Any]] = []
    previous: pd.DataFrame | None = None
    previous_poll: tuple[str, Any] | None = None
    errors = snapshots["errors_json"] if "errors_json" in snapshots else [None] * len(ids)
    for sid, at, errors_json in zip(ids, snapshots["collected_at"], errors, strict=True):
        current = by_snapshot.get(sid)
        if current is None:
            continue
        current = _settled(previous, current, unsure_of_stored(errors_json))
        now = consumers_by.get(sid)
        if previous is not None and previous_poll is not None:
            before_topics = topics_by.get(previous_poll[0])
            reconnected = reconnected_bundles(
                topics_by.get(sid), seen, now, before_topics, previous_poll[1]
            )
            rows.extend(_owner_events(previous, current, at, last_owner, reconnected))
            rows.extend(_listing_events(previous, current, at))
        for row in current.itertuples(index=False):
            owner = _owner(row.owner_broker)
            if owner is not None:
                last_owner[(row.namespace, row.bundle)] = owner
        seen = _remember(seen, now)
        previous, previous_poll = current, (sid, at)
    frame = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    return frame.sort_values("at", ascending=False, kind="stable").reset_index(drop=True)


def _remember(seen: pd.DataFrame, consumers: pd.DataFrame | None) -> pd.DataFrame:
    """The newest connectedSince seen so far for every consumer."""
    if consumers is None or consumers.empty:
        return seen
    latest = consumers[[*CONSUMER_KEY, "connected_since"]].dropna(subset=["connected_since"])
    if seen.empty:
        return latest.drop_duplicates(CONSUMER_KEY, keep="last")
    both = pd.concat([seen, latest], ignore_index=True)
    return both.drop_duplicates(CONSUMER_KEY, keep="last")


def reconnected_bundles(
    topics: pd.DataFrame | None,
    seen: pd.DataFrame,
    after: pd.DataFrame | None,
    before_topics: pd.DataFrame | None = None,
    before_at: Any = None,
) -> dict[tuple[str, str], int]:
    """Bundles whose every client seen before reconnected since: each consumer has a newer
    connectedSince than when last listed, and each topic that had publishers in the previous
    poll has none connected before that poll now. The count is of the clients compared.

    A consumer is compared with the last snapshot that listed it, so a snapshot taken while
    the clients were reconnecting (and listed none) does not hide the reload.
    """
    if topics is None:
        return {}
    votes = [
        _consumer_votes(topics, seen, after),
        _publisher_votes(topics, before_topics, before_at),
    ]
    both = (
        pd.concat([v for v in votes if not v.empty], ignore_index=True)
        if any(not v.empty for v in votes)
        else pd.DataFrame(columns=["namespace", "bundle", "renewed", "clients"])
    )
    if both.empty:
        return {}
    per_bundle = both.groupby(["namespace", "bundle"]).agg(
        all=("renewed", "all"), clients=("clients", "sum")
    )
    renewed = per_bundle[per_bundle["all"]]
    return {(str(ns), str(b)): int(n) for (ns, b), n in renewed["clients"].items()}


def _consumer_votes(
    topics: pd.DataFrame, seen: pd.DataFrame, after: pd.DataFrame | None
) -> pd.DataFrame:
    """One row per consumer listed before and now: whether it reconnected since."""
    if after is None or seen.empty or after.empty:
        return pd.DataFrame()
    both = seen.merge(
        after[[*CONSUMER_KEY, "connected_since"]], on=CONSUMER_KEY, suffixes=("_before", "_after")
    )
    both = both.dropna(subset=["connected_since_before", "connected_since_after"])
    both = both.merge(topics[["topic", "namespace", "bundle"]], on="topic", how="inner")
    if both.empty:
        return pd.DataFrame()
    renewed = both["connected_since_after"] > both["connected_since_before"]
    return both[["namespace", "bundle"]].assign(renewed=renewed, clients=1)


def _publisher_votes(
    topics: pd.DataFrame, before_topics: pd.DataFrame | None, before_at: Any
) -> pd.DataFrame:
    """One row per topic with publishers in both polls: whether all of them connected after
    the previous poll (its oldest publisher is newer than that poll)."""
    column = "oldest_publisher_since"
    if before_topics is None or before_at is None or column not in topics:
        return pd.DataFrame()
    if column not in before_topics:
        return pd.DataFrame()
    had = before_topics.loc[before_topics[column].notna(), ["topic"]]
    now = topics.loc[
        topics[column].notna(), ["topic", "namespace", "bundle", column, "producer_count"]
    ]
    both = now.merge(had, on="topic", how="inner")
    if both.empty:
        return pd.DataFrame()
    renewed = pd.to_datetime(both[column], utc=True) > pd.Timestamp(before_at)
    clients = both["producer_count"].fillna(1).astype("int64")
    return both[["namespace", "bundle"]].assign(renewed=renewed, clients=clients)
