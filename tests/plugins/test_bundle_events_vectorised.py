"""bundle-ownership's reconnect detection for every poll at once (`Renewals`) answers exactly as
the per-poll merges it replaced (tests/plugins/reference_bundle_events.py), and its events are
the same frame: on random windows of bundles changing owner and splitting, topics moving
between bundles, consumers that reconnect (all of a bundle's at once, or some), come, go and
come back, publishers that reconnect, polls that list no bundles, rows of snapshots outside
the window, rows listed twice and null names, bundles and times."""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.plugins.builtin.bundle_ownership import events
from pulsar_lens.plugins.builtin.bundle_ownership.renewals import Renewals
from tests.plugins import reference_bundle_events as reference

START = pd.Timestamp("2026-11-20T10:00:00Z")
STEP = pd.Timedelta(seconds=30)
BROKERS = ("b1:8080", "b2:8080", "b3:8080")
NAMESPACES = ("t/a", "t/é ns", "x/y")
SUBSCRIPTIONS = ("s", "s ü")
CONSUMERS = ("c1", "c2", "😀", None)


def _namespace(topic: str) -> str:
    return "/".join(topic.split("/")[2:4])


def _name(lower: int, upper: int) -> str:
    return f"0x{lower:08x}_0x{upper:08x}"


def window(seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """bundles, topics, consumers and the index of a random window."""
    rng = random.Random(seed)
    polls = rng.randint(0, 10)
    ranges = {ns: [(0, 1 << 31), (1 << 31, (1 << 32) - 1)] for ns in NAMESPACES}
    owners = {(ns, _name(*r)): rng.choice(BROKERS) for ns, rs in ranges.items() for r in rs}
    topics = [f"persistent://{rng.choice(NAMESPACES)}/t{i}" for i in range(rng.randint(1, 12))]
    since = {t: START - STEP * rng.randint(1, 5) for t in topics}
    connected: dict[tuple[str, str, str | None], pd.Timestamp] = {}
    for topic in topics:
        for sub in rng.sample(SUBSCRIPTIONS, rng.randint(1, 2)):
            for name in rng.sample(CONSUMERS, rng.randint(1, 3)):
                connected[(topic, sub, name)] = START - STEP * rng.randint(1, 9)
    b_rows: list[dict[str, Any]] = []
    t_rows: list[dict[str, Any]] = []
    c_rows: list[dict[str, Any]] = []
    index: list[dict[str, Any]] = []
    for i in range(polls):
        sid, at = f"s{i}", START + STEP * i
        index.append({"snapshot_id": sid, "collected_at": at, "errors_json": None})
        if rng.random() < 0.2 and ranges:  # a split
            ns = rng.choice(list(ranges))
            lower, upper = ranges[ns].pop(rng.randrange(len(ranges[ns])))
            middle = (lower + upper) // 2
            ranges[ns] += [(lower, middle), (middle, upper)]
            for r in ranges[ns]:
                owners.setdefault((ns, _name(*r)), rng.choice(BROKERS))
        for key in owners:
            if rng.random() < 0.15:
                owners[key] = rng.choice((*BROKERS, None))
        reloaded = rng.choice([None, *NAMESPACES])  # its clients all reconnect
        for key in connected:
            if _namespace(key[0]) == reloaded or rng.random() < 0.1:
                connected[key] = at - STEP * rng.random()
        for topic in topics:
            if _namespace(topic) == reloaded:
                since[topic] = at - STEP * rng.random()
        listed = rng.random() >= 0.15  # else a poll that listed no bundles
        for ns, rs in ranges.items() if listed else ():
            for lower, upper in rs:
                name = _name(lower, upper)
                b_rows.append(
                    {"snapshot_id": sid, "namespace": ns, "bundle": name, "lower": lower}
                    | {"upper": upper, "owner_broker": owners[(ns, name)]}
                )
        for topic in topics:
            if rng.random() < 0.1:
                continue  # not listed this poll
            ns = _namespace(topic)
            rs = ranges[ns]
            r = rs[rng.randrange(len(rs))]
            row = {
                "snapshot_id": sid,
                "topic": None if rng.random() < 0.02 else topic,
                "namespace": None if rng.random() < 0.02 else ns,
                "bundle": None if rng.random() < 0.03 else _name(*r),
                "oldest_publisher_since": None if rng.random() < 0.3 else since[topic],
                "producer_count": rng.randint(0, 3),
            }
            t_rows += [row] * (2 if rng.random() < 0.05 else 1)
        for (topic, sub, name), when in connected.items():
            if rng.random() < 0.15:
                continue
            row = {
                "snapshot_id": sid,
                "topic": None if rng.random() < 0.01 else topic,
                "subscription": sub,
                "consumer_name": name,
                "connected_since": None if rng.random() < 0.1 else when,
            }
            c_rows += [row] * (2 if rng.random() < 0.05 else 1)
    stray = {"snapshot_id": "elsewhere"}
    if rng.random() < 0.5 and t_rows and c_rows:  # rows of a snapshot outside the window
        t_rows.insert(0, {**t_rows[-1], **stray})
        c_rows.insert(0, {**c_rows[-1], **stray})
    if rng.random() < 0.3:  # rows not in time order
        rng.shuffle(c_rows)
        rng.shuffle(t_rows)
    return (
        _frame(b_rows, ["snapshot_id", "namespace", "bundle", "lower", "upper", "owner_broker"]),
        _frame(t_rows, [*TOPIC_COLUMNS], times=["oldest_publisher_since"]),
        _frame(c_rows, [*CONSUMER_COLUMNS], times=["connected_since"]),
        _frame(index, ["snapshot_id", "collected_at", "errors_json"], times=["collected_at"]),
    )


TOPIC_COLUMNS = (
    "snapshot_id",
    "topic",
    "namespace",
    "bundle",
    "oldest_publisher_since",
    "producer_count",
)
CONSUMER_COLUMNS = ("snapshot_id", "topic", "subscription", "consumer_name", "connected_since")


def _frame(
    rows: list[dict[str, Any]], columns: list[str], times: tuple[str, ...] | list[str] = ()
) -> pd.DataFrame:
    """Rows as the store's frames hold them: text, int64 and datetime64[us, UTC] columns."""
    frame = pd.DataFrame(rows, columns=columns)
    for column in times:
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[us, UTC]")
    for column in ("lower", "upper", "producer_count"):
        if column in frame:
            frame[column] = frame[column].astype("int64")
    return frame


def old_renewals(
    topics: pd.DataFrame, consumers: pd.DataFrame, polls: list[str], ats: list[Any]
) -> list[dict[tuple[str, str], int]]:
    """What the per-poll merges said at each of `polls`."""
    topics_by = reference.snapshots_of(topics, polls)
    consumers_by = reference.snapshots_of(consumers, polls)
    seen = pd.DataFrame(columns=[*reference.CONSUMER_KEY, "connected_since"])
    found = []
    for k, sid in enumerate(polls):
        now = consumers_by.get(sid)
        if k:
            before = topics_by.get(polls[k - 1])
            found.append(
                reference.reconnected_bundles(topics_by.get(sid), seen, now, before, ats[k - 1])
            )
        else:
            found.append({})
        seen = reference._remember(seen, now)
    return found


SEEDS = range(60)


@pytest.mark.parametrize("seed", SEEDS)
def test_renewals_and_events_are_those_of_the_per_poll_merges(seed: int) -> None:
    frames = window(seed)
    bundles, topics, consumers, index = frames
    polls = [str(s) for s in index["snapshot_id"] if (bundles["snapshot_id"] == s).any()]
    ats = [
        a for s, a in zip(index["snapshot_id"], index["collected_at"], strict=True) if s in polls
    ]
    renewals = Renewals(topics, consumers, polls)
    new = [renewals.next(ats[k - 1] if k else None) for k in range(len(polls))]
    assert new == old_renewals(topics, consumers, polls, ats)
    pd.testing.assert_frame_equal(
        events.compute_events(bundles, index, events.whole_window(*frames)),
        reference.compute_events(*frames),
    )


def test_the_windows_hold_reloads() -> None:
    """The windows above are not trivial: bundles reloaded with all their clients, others
    where only some reconnected, and polls without bundles."""
    kinds: dict[str, int] = {}
    partial = 0
    for seed in SEEDS:
        bundles, topics, consumers, index = window(seed)
        for kind in reference.compute_events(bundles, topics, consumers, index)["kind"]:
            kinds[kind] = kinds.get(kind, 0) + 1
        polls = [str(s) for s in index["snapshot_id"] if (bundles["snapshot_id"] == s).any()]
        partial += len(polls) < len(index)
    assert kinds.get("reloaded", 0) >= 50, kinds
    assert {"moved", "unloaded", "split", "acquired"} <= set(kinds), kinds
    assert partial >= 10
