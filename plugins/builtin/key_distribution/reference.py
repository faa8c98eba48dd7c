"""`key-distribution`'s rule on pandas: the whole result from a store root, without Spark.

The rule. In every poll, each Key_Shared subscription of a sampled topic has a selector in
force, inferred from its mode and its consumers' ranges in that poll as `key-shared-map`
infers it (`infer_selector`). Each key sampled from that topic in that poll (a partition's
samples go to that partition's subscription) gets the hash this selector routes it by
(`hash_selector`): the stored `sticky_hash` (4.0 consistent hashing, `h31 % 65535 + 1`), or
for auto split and sticky `h31 % 65536` with 0 -> 1. It counts for the consumer whose ranges
in that poll contain that hash, `UNCOVERED` when none does. A broker refuses overlapping
ranges within a subscription; if stale rows overlap anyway, the first consumer by name counts.

`frames` says what is counted from there and `whatif` what the what-ifs compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Result, empty_frame
from pulsar_lens.core.keyload import UNCOVERED, sample_hashes
from pulsar_lens.core.keyshared.ranges import Member, hash_selector, infer_selector, ranges_of
from pulsar_lens.plugins.builtin.key_distribution.frames import (
    BIN_WIDTH,
    COUNT_COLUMNS,
    empty_counts,
    finish,
    label_of,
)
from pulsar_lens.plugins.builtin.key_distribution.whatif import plan_frame, what_if_frame

GROUP_KEY = ["snapshot_id", "topic", "subscription"]
SELECTOR_COLUMNS = [*GROUP_KEY, "label", "collected_at", "selector", "reduction"]
DEFAULT_POINTS = (20, 100, 400)


def kind_of(mode: Any, members: Iterable[Mapping[str, Any]] | None) -> str:
    """The selector of one subscription in one poll from its mode and its consumers
    (`{consumer_name, hash_ranges}` each)."""
    listed = () if members is None else members  # a numpy array from Spark, a list on pandas
    found = [Member(str(m["consumer_name"]), ranges_of(m["hash_ranges"])) for m in listed]
    return str(infer_selector(mode, found))


def selectors_of(modes: Iterable[Any], members: Iterable[Any]) -> tuple[list[str], list[str]]:
    """Per (mode, members) of one subscription in one poll: its selector (`kind_of`), and the
    selector whose hash it routes by."""
    kinds = [kind_of(mode, listed) for mode, listed in zip(modes, members, strict=True)]
    return kinds, [hash_selector(kind) for kind in kinds]


def with_selectors(groups: pd.DataFrame) -> pd.DataFrame:
    """`groups` (one row per sampled subscription and poll, with `key_shared_mode` and
    `members`) as `SELECTOR_COLUMNS`: its selector, and the selector whose hash it routes by."""
    kinds, reductions = selectors_of(groups["key_shared_mode"], groups["members"])
    return groups.assign(selector=kinds, reduction=reductions)[SELECTOR_COLUMNS]


def members_in_order(newest: pd.DataFrame) -> dict[str, list[str]]:
    """Per label, its consumers (rows of `label, consumer_name, connected_since`) in connection
    order, as `members_of` orders them; namesakes of the same time by name."""
    if newest.empty:
        return {}
    since = pd.to_datetime(newest["connected_since"], utc=True)
    ordered = newest.assign(_since=since).sort_values(
        ["label", "_since", "consumer_name"], na_position="last", kind="stable"
    )
    out: dict[str, list[str]] = {}
    for label, name in zip(ordered["label"], ordered["consumer_name"], strict=True):
        out.setdefault(str(label), []).append(str(name))
    return out


def pandas_result(
    store_root: Any,
    *,
    subscription: str = "",
    top_keys: int = 20,
    points: Sequence[int] = DEFAULT_POINTS,
    spread: int = 2,
    plan_points: int = 100,
    charset: str = "utf-8",
) -> Result:
    """The whole analysis over every stored poll, on pandas only."""
    from pulsar_lens.core.store import Store

    store = Store(store_root)
    tables = {n: store.read(n).to_pandas() for n in ("key_samples", "consumers", "subscriptions")}
    counts = pandas_counts(
        tables["key_samples"],
        tables["consumers"],
        tables["subscriptions"],
        top_keys=top_keys,
        what_if=dict(points=points, spread=spread, charset=charset),
        plan_points=plan_points,
    )
    return finish(counts, subscription=subscription)


def pandas_counts(
    samples: pd.DataFrame,
    consumers: pd.DataFrame,
    subscriptions: pd.DataFrame,
    *,
    top_keys: int,
    what_if: Mapping[str, Any],
    plan_points: int,
) -> dict[str, pd.DataFrame]:
    """The counted frames of `frames.COUNT_COLUMNS`, on pandas."""
    subs = subscriptions[subscriptions["type"] == "Key_Shared"]
    pairs = zip(subs["topic"], subs["subscription"], strict=True)
    subs = subs.assign(label=[label_of(t, s) for t, s in pairs])
    sampled = subs.merge(samples[["snapshot_id", "topic"]].drop_duplicates(), on=GROUP_KEY[:2])
    if sampled.empty:
        return empty_counts()
    listed = consumers.merge(sampled[[*GROUP_KEY, "label"]], on=GROUP_KEY)
    selectors = with_selectors(sampled.assign(members=_members(sampled, listed)))
    rows = _assigned(samples, selectors, listed)
    members = members_in_order(_newest(consumers.merge(subs[[*GROUP_KEY, "label"]], on=GROUP_KEY)))
    members = {label: members.get(label, []) for label in rows["label"].unique()}
    return {
        "consumers": _per_consumer(rows, listed),
        "keys": rows.groupby("label", as_index=False).agg(keys=("key", "nunique")),
        "selector": _newest_selector(selectors),
        "bins": _sum(rows.assign(bin_start=rows["hash"] - rows["hash"] % BIN_WIDTH), "bin_start"),
        "hot_keys": _hot_keys(rows, top_keys),
        "what_if": _per_label(
            _sum(rows, "sticky_hash").rename(columns={"sticky_hash": "hash"}),
            lambda g: what_if_frame(g, members, **what_if),
            "what_if",
        ),
        "sticky_plan": _per_label(
            _sum(rows, "range_hash").rename(columns={"range_hash": "hash"}),
            lambda g: plan_frame(g, members, points=plan_points),
            "sticky_plan",
        ),
    }


def _members(groups: pd.DataFrame, listed: pd.DataFrame) -> list[list[dict[str, Any]]]:
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in listed.itertuples(index=False):
        key = (row.snapshot_id, row.topic, row.subscription)
        found.setdefault(key, []).append(
            {"consumer_name": row.consumer_name, "hash_ranges": row.hash_ranges}
        )
    keys = zip(groups["snapshot_id"], groups["topic"], groups["subscription"], strict=True)
    return [found.get(key, []) for key in keys]


def _assigned(samples: pd.DataFrame, selectors: pd.DataFrame, listed: pd.DataFrame) -> pd.DataFrame:
    """Sampled messages per (poll, subscription, key) with their hashes and consumer."""
    keyed = samples.assign(key=samples["key"].fillna(""))
    by = ["snapshot_id", "collected_at", "topic", "key", "sticky_hash"]
    rows = keyed.groupby(by, as_index=False).size().rename(columns={"size": "messages"})
    rows["range_hash"] = sample_hashes(rows["key"], selector="sticky")
    rows = rows.drop(columns="collected_at").merge(selectors, on=["snapshot_id", "topic"])
    consistent = rows["reduction"] == "consistent"
    rows["hash"] = np.where(consistent, rows["sticky_hash"], rows["range_hash"]).astype(np.int64)
    ranges = _ranges(listed)
    owners = rows[[*GROUP_KEY, "hash"]].reset_index().merge(ranges, on=GROUP_KEY)
    inside = (owners["hash"] >= owners["start"]) & (owners["hash"] <= owners["end"])
    owner_of = owners[inside].groupby("index")["consumer_name"].min()
    rows["consumer_name"] = rows.index.map(owner_of).fillna(UNCOVERED)
    return rows


def _ranges(listed: pd.DataFrame) -> pd.DataFrame:
    rows = [
        (snap, topic, sub, name, start, end)
        for snap, topic, sub, name, cell in zip(
            listed["snapshot_id"],
            listed["topic"],
            listed["subscription"],
            listed["consumer_name"],
            listed["hash_ranges"],
            strict=True,
        )
        for start, end in ranges_of(cell)
    ]
    return pd.DataFrame(rows, columns=[*GROUP_KEY, "consumer_name", "start", "end"])


def _newest(listed: pd.DataFrame) -> pd.DataFrame:
    """The consumers of each label's newest poll that lists any."""
    newest = listed.groupby("label")["collected_at"].transform("max")
    return listed[listed["collected_at"] == newest][["label", "consumer_name", "connected_since"]]


def _per_consumer(rows: pd.DataFrame, listed: pd.DataFrame) -> pd.DataFrame:
    present = listed[["label", "consumer_name"]].drop_duplicates().assign(messages=0)
    both = pd.concat([rows[["label", "consumer_name", "messages"]], present])
    return _sum(both, "consumer_name")


def _newest_selector(selectors: pd.DataFrame) -> pd.DataFrame:
    ordered = selectors.sort_values(["label", "collected_at", "selector"])
    newest = ordered.drop_duplicates("label", keep="last")
    return newest.reset_index(drop=True)[COUNT_COLUMNS["selector"]]


def _sum(rows: pd.DataFrame, by: str) -> pd.DataFrame:
    return rows.groupby(["label", by], as_index=False)["messages"].sum()


def _hot_keys(rows: pd.DataFrame, top: int) -> pd.DataFrame:
    """Per (label, key): messages, and hash and consumer at its newest sample (the greatest
    (collected_at, consumer_name, hash)); the `top` keys of each label."""
    ordered = rows.sort_values(["collected_at", "consumer_name", "hash"])
    newest = ordered.drop_duplicates(["label", "key"], keep="last")[
        ["label", "key", "hash", "consumer_name"]
    ]
    real = rows["consumer_name"].where(rows["consumer_name"] != UNCOVERED)
    totals = (
        rows.assign(real=real)
        .groupby(["label", "key"], as_index=False)
        .agg(consumers_seen=("real", "nunique"), messages=("messages", "sum"))
    )
    keys = totals.merge(newest, on=["label", "key"])
    keys = keys.sort_values(["label", "messages", "key"], ascending=[True, False, True])
    return keys.groupby("label").head(top).reset_index(drop=True)[COUNT_COLUMNS["hot_keys"]]


def _per_label(rows: pd.DataFrame, shape: Any, name: str) -> pd.DataFrame:
    found = [frame for _, group in rows.groupby("label") if len(frame := shape(group))]
    return pd.concat(found, ignore_index=True) if found else empty_frame(COUNT_COLUMNS[name])
