"""`stuck-hash-history`'s rule on pandas, and the shaping both engines share.

`episodes(draining, snapshots)` is the plain pandas statement of the rule that the Spark
plan computes at scale; `finish` turns raw episodes (either engine's) into the plugin's
output frames, so the two engines differ only in how they find the runs.
"""

from __future__ import annotations

import pandas as pd

from pulsar_lens.api import Result, empty_frame

KEY = ["topic", "subscription", "hash", "consumer_name"]
EPISODE_COLUMNS = [
    *KEY,
    "start",
    "end",
    "first_seen",
    "last_seen",
    "polls",
    "max_unack_msgs",
    "max_blocked_attempts",
]
OUTPUT_EPISODES = [
    *KEY,
    "first_seen",
    "last_seen",
    "polls",
    "seconds",
    "max_unack_msgs",
    "max_blocked_attempts",
    "open",
]


def episodes(draining: pd.DataFrame, snapshots: pd.DataFrame) -> pd.DataFrame:
    """Runs of consecutive polls per (topic, subscription, hash, consumer), on pandas."""
    position = {str(s): i for i, s in enumerate(snapshots["snapshot_id"])}
    rows = draining.assign(position=draining["snapshot_id"].astype(str).map(position))
    rows = rows.dropna(subset=["position"]).astype({"position": "int64"})
    if rows.empty:
        return empty_frame(EPISODE_COLUMNS)
    rows = rows.sort_values([*KEY, "position"])
    rows["run"] = rows["position"] - rows.groupby(KEY).cumcount()
    grouped = rows.groupby([*KEY, "run"], as_index=False).agg(
        start=("position", "min"),
        end=("position", "max"),
        first_seen=("collected_at", "min"),
        last_seen=("collected_at", "max"),
        polls=("position", "size"),
        max_unack_msgs=("unack_msgs", "max"),
        max_blocked_attempts=("blocked_attempts", "max"),
    )
    return grouped[EPISODE_COLUMNS]


def finish(raw: pd.DataFrame, *, newest: int) -> Result:
    """The output frames from raw episodes: episodes (longest first), offenders, recurrence."""
    if raw.empty:
        empty = empty_frame(OUTPUT_EPISODES)
        return Result(
            frames={
                "episodes": empty,
                "offenders": pd.DataFrame(
                    columns=["topic", "subscription", "consumer_name", "episodes", "polls"]
                ),
                "recurrence": pd.DataFrame(
                    columns=["topic", "subscription", "episodes", "hashes", "recurring"]
                ),
            },
            summary={"episodes": 0, "open": 0},
        )
    first = pd.to_datetime(raw["first_seen"], utc=True)
    last = pd.to_datetime(raw["last_seen"], utc=True)
    shaped = raw.assign(
        first_seen=first,
        last_seen=last,
        seconds=(last - first).dt.total_seconds(),
        open=raw["end"].astype("int64") == newest,
    ).astype({"hash": "int64", "polls": "int64"})
    shaped = shaped.sort_values(
        ["polls", "seconds", *KEY], ascending=[False, False, True, True, True, True]
    ).reset_index(drop=True)[OUTPUT_EPISODES]
    holders = ["topic", "subscription", "consumer_name"]
    offenders = (
        shaped.groupby(holders, as_index=False)
        .agg(episodes=("polls", "size"), polls=("polls", "sum"), longest_s=("seconds", "max"))
        .sort_values(["polls", *holders], ascending=[False, True, True, True])
        .reset_index(drop=True)
    )
    per_hash = shaped.groupby(["topic", "subscription", "hash"]).size()
    recurrence = (
        per_hash.rename("n")
        .reset_index()
        .groupby(["topic", "subscription"], as_index=False)
        .agg(episodes=("n", "sum"), hashes=("n", "size"), recurring=("n", lambda s: (s > 1).sum()))
        .sort_values(
            ["recurring", "episodes", "topic", "subscription"], ascending=[False] * 2 + [True] * 2
        )
        .reset_index(drop=True)
    )
    return Result(
        frames={"episodes": shaped, "offenders": offenders, "recurrence": recurrence},
        summary={"episodes": len(shaped), "open": int(shaped["open"].sum())},
    )
