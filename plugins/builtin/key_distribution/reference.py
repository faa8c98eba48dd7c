"""`key-distribution`'s rule on pandas: the whole result from a store root, without Spark.

The rule. The window is modelled on one broker line: that of the newest poll whose brokers
reported a version (`frames.model_of`, `shared.versions.broker_line`: all 3.0.x -> "3.0", else
"4.0"); a window spanning an upgrade says so in the summary and is counted on that newest
line. In every poll, each Key_Shared subscription of a sampled topic has a selector in force,
inferred from its mode and its consumers' ranges in that poll as `key-shared-map` infers it
(`infer_selector`, on that line). Each key sampled from that topic in that poll (a partition's
samples go to that partition's subscription) gets the hash this selector routes it by on that
line (`hash_selector`, `core.hashing.reduction`): on 4.0 the stored `sticky_hash` (consistent
hashing, `h31 % 65535 + 1`), or for auto split and sticky `h31 % 65536` with 0 -> 1; on 3.0
`h31` itself for consistent hashing, `h31 % 65536` for the others. It counts for the consumer
whose ranges in that poll contain that hash (on 3.0 STICKY also the gaps between two ranges
of one consumer, which 3.0 delivers to it: `routed_members`), `UNCOVERED` when none does. A
broker refuses overlapping ranges within a subscription; if stale rows overlap anyway, the
first consumer by name counts.

`frames` says what is counted from there and `whatif` what the what-ifs compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from pulsar_lens.api import Result, empty_frame
from pulsar_lens.core.hashing import PulsarLine, reduce_hash_array, sticky_key_hash_array
from pulsar_lens.core.keyload import UNCOVERED
from pulsar_lens.core.keyshared.ranges import Member, hash_selector, infer_selector, ranges_of
from pulsar_lens.core.keyshared.rebuild import seeded_sticky
from pulsar_lens.plugins.builtin.key_distribution.frames import (
    BIN_WIDTH,
    COUNT_COLUMNS,
    WIDE_BIN_WIDTH,
    empty_counts,
    finish,
    model_of,
)
from pulsar_lens.plugins.builtin.key_distribution.whatif import plan_frame, what_if_frame
from pulsar_lens.plugins.builtin.shared.labels import subscription_label

GROUP_KEY = ["snapshot_id", "topic", "subscription"]
SELECTOR_COLUMNS = [*GROUP_KEY, "label", "collected_at", "members", "selector", "reduction"]
DEFAULT_POINTS = (20, 100, 400)


def routed_members(kind: str, members: list[Member], pulsar: PulsarLine) -> list[Member]:
    """`members` with the ranges each one receives: on a 3.0 STICKY subscription also the
    gaps between two ranges of one consumer (`StickySelector` on 3.0); as listed otherwise, or
    when the ranges overlap (a broker refuses that; the listed ranges are counted)."""
    if pulsar != "3.0" or kind != "sticky":
        return members
    selector, handles = seeded_sticky(members, pulsar="3.0")
    if selector is None:
        return members
    owned = selector.assignments().by_consumer(handles)
    return [
        Member(m.name, tuple(owned.get(h, ())), m.connected_since)
        for m, h in zip(members, handles, strict=True)
    ]


def selectors_of(
    modes: Iterable[Any], members: Iterable[Any], *, pulsar: PulsarLine
) -> tuple[list[str], list[str], list[list[dict[str, Any]]]]:
    """Per (mode, members) of one subscription in one poll: its selector on line `pulsar`, the
    selector whose hash it routes by, and its members (`{consumer_name, hash_ranges}` each)
    with the ranges they receive (`routed_members`)."""
    kinds: list[str] = []
    reductions: list[str] = []
    routed: list[list[dict[str, Any]]] = []
    for mode, listed in zip(modes, members, strict=True):
        listed = () if listed is None else listed  # a numpy array from Spark, a list on pandas
        found = [Member(str(m["consumer_name"]), ranges_of(m["hash_ranges"])) for m in listed]
        kind = str(infer_selector(mode, found, pulsar=pulsar))
        kinds.append(kind)
        reductions.append(hash_selector(kind))
        routed.append(
            [
                {
                    "consumer_name": m.name,
                    "hash_ranges": [{"start": s, "end": e} for s, e in m.ranges],
                }
                for m in routed_members(kind, found, pulsar)
            ]
        )
    return kinds, reductions, routed


def with_selectors(groups: pd.DataFrame, *, pulsar: PulsarLine) -> pd.DataFrame:
    """`groups` (one row per sampled subscription and poll, with `key_shared_mode` and
    `members`) as `SELECTOR_COLUMNS`: its selector on line `pulsar`, the selector whose hash it
    routes by, and its routed members."""
    kinds, reductions, routed = selectors_of(
        groups["key_shared_mode"], groups["members"], pulsar=pulsar
    )
    return groups.assign(selector=kinds, reduction=reductions, members=routed)[SELECTOR_COLUMNS]


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
    names = ("key_samples", "consumers", "subscriptions", "brokers")
    tables = {n: store.read(n).to_pandas() for n in names}
    counts = pandas_counts(
        tables["key_samples"],
        tables["consumers"],
        tables["subscriptions"],
        tables["brokers"],
        top_keys=top_keys,
        what_if=dict(points=points, spread=spread, charset=charset),
        plan_points=plan_points,
    )
    return finish(counts, subscription=subscription)


def pandas_counts(
    samples: pd.DataFrame,
    consumers: pd.DataFrame,
    subscriptions: pd.DataFrame,
    brokers: pd.DataFrame,
    *,
    top_keys: int,
    what_if: Mapping[str, Any],
    plan_points: int,
) -> dict[str, pd.DataFrame]:
    """The counted frames of `frames.COUNT_COLUMNS`, on pandas."""
    subs = subscriptions[subscriptions["type"] == "Key_Shared"]
    pairs = zip(subs["topic"], subs["subscription"], strict=True)
    subs = subs.assign(label=[subscription_label(t, s) for t, s in pairs])
    sampled = subs.merge(samples[["snapshot_id", "topic"]].drop_duplicates(), on=GROUP_KEY[:2])
    lines = brokers[COUNT_COLUMNS["lines"]].reset_index(drop=True)
    if sampled.empty:
        return {**empty_counts(), "lines": lines}
    model: PulsarLine = model_of(lines)["pulsar"]
    listed = consumers.merge(sampled[[*GROUP_KEY, "label"]], on=GROUP_KEY)
    grouped = sampled.assign(members=_members(sampled, listed))
    selectors = with_selectors(grouped, pulsar=model)
    rows = _assigned(samples, selectors, pulsar=model)
    members = members_in_order(_newest(consumers.merge(subs[[*GROUP_KEY, "label"]], on=GROUP_KEY)))
    members = {label: members.get(label, []) for label in rows["label"].unique()}
    return {
        "consumers": _per_consumer(rows, listed),
        "keys": rows.groupby("label", as_index=False).agg(keys=("key", "nunique")),
        "selector": _newest_selector(selectors),
        "bins": _bins(rows),
        "lines": lines,
        "hot_keys": _hot_keys(rows, top_keys),
        "what_if": _per_label(
            _sum(rows, "sticky_hash").rename(columns={"sticky_hash": "hash"}),
            lambda g: what_if_frame(g, members, **what_if, pulsar=model),
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


def _assigned(
    samples: pd.DataFrame, selectors: pd.DataFrame, *, pulsar: PulsarLine
) -> pd.DataFrame:
    """Sampled messages per (poll, subscription, key) with their consumer and hashes on line
    `pulsar`: `hash` the one its selector routes it by, `sticky_hash` and `range_hash` the
    consistent-hashing and sticky ones (the what-ifs'), and the `bin_width` of `hash`."""
    keyed = samples.assign(key=samples["key"].fillna(""))
    by = ["snapshot_id", "collected_at", "topic", "key", "sticky_hash"]
    rows = keyed.groupby(by, as_index=False).size().rename(columns={"size": "messages"})
    keys = pa.array(rows["key"].astype(str).tolist(), pa.string())
    rows["h31"] = sticky_key_hash_array(keys, selector="consistent", pulsar="3.0")
    rows = rows.drop(columns="collected_at").merge(
        selectors.drop(columns="members"), on=["snapshot_id", "topic"]
    )
    h31 = rows["h31"].to_numpy(np.uint32)
    # 4.0's consistent-hashing hash is the one the sampler stored; 3.0's is h31 itself
    stored = rows["sticky_hash"].to_numpy(np.int64)
    consistent = h31.astype(np.int64) if pulsar == "3.0" else stored
    ranged = reduce_hash_array(h31, selector="sticky", pulsar=pulsar).astype(np.int64)
    on_ring = (rows["reduction"] == "consistent").to_numpy()
    rows["hash"] = np.where(on_ring, consistent, ranged)
    rows["sticky_hash"], rows["range_hash"] = consistent, ranged
    wide = on_ring & (pulsar == "3.0")
    rows["bin_width"] = np.where(wide, WIDE_BIN_WIDTH, BIN_WIDTH)
    owners = rows[[*GROUP_KEY, "hash"]].reset_index().merge(_ranges(selectors), on=GROUP_KEY)
    inside = (owners["hash"] >= owners["start"]) & (owners["hash"] <= owners["end"])
    owner_of = owners[inside].groupby("index")["consumer_name"].min()
    rows["consumer_name"] = rows.index.map(owner_of).fillna(UNCOVERED)
    return rows.drop(columns="h31")


def _ranges(selectors: pd.DataFrame) -> pd.DataFrame:
    """The ranges each member of each subscription and poll receives (`routed_members`)."""
    rows = [
        (snap, topic, sub, member["consumer_name"], int(r["start"]), int(r["end"]))
        for snap, topic, sub, members in zip(
            selectors["snapshot_id"],
            selectors["topic"],
            selectors["subscription"],
            selectors["members"],
            strict=True,
        )
        for member in members
        for r in member["hash_ranges"]
    ]
    return pd.DataFrame(rows, columns=[*GROUP_KEY, "consumer_name", "start", "end"])


def _bins(rows: pd.DataFrame) -> pd.DataFrame:
    start = rows["hash"] - rows["hash"] % rows["bin_width"]
    binned = rows.assign(bin_start=start, bin_end=start + rows["bin_width"] - 1)
    by = binned.groupby(["label", "bin_start"], as_index=False)
    return by.agg(bin_end=("bin_end", "max"), messages=("messages", "sum"))[COUNT_COLUMNS["bins"]]


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
