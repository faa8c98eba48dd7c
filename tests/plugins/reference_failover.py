"""failover-assignment's analysis as it was before it was vectorised (plugin version 1.1):
a row loop per partition, a pandas group per Failover group, the whole window of
subscriptions read. Kept only as the reference the vectorised path must equal frame for frame
(tests/plugins/test_failover_vectorised.py, benchmarks/analyses.py); not product code. Its
timeline lists the polls where the subscription was Failover, as version 1.2's does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from pulsar_lens.api import (
    FailoverConsumer,
    Inputs,
    Result,
    active_consumer_picker,
    frame_of,
    jvm_charset,
    partition_index,
)
from pulsar_lens.plugins.builtin.failover_assignment.frames import (
    CONSUMER_COLUMNS,
    GROUP_COLUMNS,
    MATRIX_COLUMNS,
    PARTITION_COLUMNS,
    TIMELINE_COLUMNS,
    summarize,
)
from pulsar_lens.plugins.builtin.shared.failover import group_label, imbalance, overload, parent_of
from pulsar_lens.plugins.builtin.shared.versions import broker_line

Picker = Callable[[str], FailoverConsumer | None]
Names = Mapping[tuple[str, str], frozenset[str]]


def analyze(data: Inputs, params: Any) -> Result:
    subs = failover_subscriptions(data.latest("subscriptions"))
    names = consumer_names(data.latest("consumers"))
    groups = group_topics(subs, names)
    history = data.history("subscriptions")
    line = broker_line(data.latest("brokers"))
    pip_392 = line.line != "3.0"
    pickers: dict[tuple[frozenset[str], bool], Picker] = {}
    charset = jvm_charset(params.jvm_charset)
    partition_rows: list[dict[str, Any]] = []
    for label, topics in groups.items():
        rows = [
            partition_row(label, sub, names, pickers, charset)
            for sub in subs[subs["key"].isin(topics)].itertuples(index=False)
        ]
        partition_rows.extend(with_verdict(rows, pip_392=pip_392))
    partitions = with_flaps(frame_of(partition_rows, PARTITION_COLUMNS), history, params)
    frames = {
        "groups": group_frame(partitions, names),
        "partitions": partitions,
        "consumers": consumer_frame(partitions, names),
        "matrix": matrix_frame(partitions, names),
        # version 1.2: the polls where the subscription was Failover (its steps keep those)
        "timeline": timeline_frame(partitions, history[history["type"] == "Failover"]),
    }
    selected = params.subscription or (next(iter(groups)) if groups else "")
    return Result(frames=frames, summary=summarize(frames, selected, line))


def param_choices(data: Inputs) -> Mapping[str, Sequence[str]]:
    subs = failover_subscriptions(data.latest("subscriptions"))
    groups = group_topics(subs, consumer_names(data.latest("consumers")))
    return {"subscription": ["", *groups]}


def failover_subscriptions(subscriptions: pd.DataFrame) -> pd.DataFrame:
    if subscriptions.empty:
        return subscriptions.assign(key=pd.Series(dtype=object))
    subs = subscriptions[
        (subscriptions["type"] == "Failover") & (subscriptions["consumer_count"] > 0)
    ].sort_values(["subscription", "topic"])
    keys = list(zip(subs["topic"], subs["subscription"], strict=True))
    return subs.assign(key=pd.Series(keys, index=subs.index, dtype=object)).reset_index(drop=True)


def consumer_names(consumers: pd.DataFrame) -> dict[tuple[str, str], frozenset[str]]:
    if consumers.empty:
        return {}
    found: dict[tuple[str, str], set[str]] = {}
    columns = (consumers[c] for c in ("topic", "subscription", "consumer_name"))
    for topic, sub, name in zip(*columns, strict=True):
        found.setdefault((str(topic), str(sub)), set()).add(str(name))
    return {key: frozenset(found[key]) for key in sorted(found)}


def group_topics(subs: pd.DataFrame, names: Names) -> dict[str, list[tuple[str, str]]]:
    groups: dict[str, list[tuple[str, str]]] = {}
    for sub_name, subset in subs.groupby("subscription", sort=True):
        keys = list(subset["key"])
        for members in _linked(keys, names):
            grouped = [keys[i] for i in members]
            groups[_unique(group_label(str(sub_name), grouped), groups)] = grouped
    return groups


def _linked(keys: Sequence[tuple[str, str]], names: Names) -> list[list[int]]:
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, key in enumerate(keys):
        for name in names.get(key, frozenset()):
            j = first_with.setdefault(name, i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for i in range(len(keys)):
        members.setdefault(root(i), []).append(i)
    return sorted(members.values(), key=lambda group: group[-1])


def _unique(label: str, taken: Mapping[str, Any]) -> str:
    candidate, n = label, 1
    while candidate in taken:
        n += 1
        candidate = f"{label} #{n}"
    return candidate


def _picker(
    names: frozenset[str],
    consistent: bool,
    cache: dict[tuple[frozenset[str], bool], Picker],
    charset: str = "utf-8",
) -> Picker:
    key = (names, consistent)
    if key not in cache:
        group = [FailoverConsumer(n) for n in names]
        cache[key] = active_consumer_picker(group, consistent_hashing=consistent, charset=charset)
    return cache[key]


def _name(consumer: FailoverConsumer | None) -> str | None:
    return None if consumer is None else consumer.name


def partition_row(
    label: str,
    sub: Any,
    names: Names,
    cache: dict[tuple[frozenset[str], bool], Picker],
    charset: str = "utf-8",
) -> dict[str, Any]:
    connected = names.get(sub.key, frozenset())
    observed = sub.active_consumer_name
    return {
        "label": label,
        "subscription": sub.subscription,
        "topic": sub.topic,
        "parent_topic": parent_of(sub.topic),
        "partition_index": partition_index(sub.topic),
        "consumers": len(connected),
        "observed": None if pd.isna(observed) else str(observed),
        "modulo": _name(_picker(connected, False, cache, charset)(sub.topic)),
        "consistent_hashing": _name(_picker(connected, True, cache, charset)(sub.topic)),
    }


def infer_mode(rows: Sequence[Mapping[str, Any]], *, pip_392: bool = True) -> str:
    seen = [r for r in rows if r["observed"] is not None]
    modulo = all(r["observed"] == r["modulo"] for r in seen)
    ring = pip_392 and all(r["observed"] == r["consistent_hashing"] for r in seen)
    if modulo and ring:
        return "either"
    if modulo:
        return "modulo"
    return "consistent" if ring else "unexplained"


def with_verdict(rows: list[dict[str, Any]], *, pip_392: bool = True) -> list[dict[str, Any]]:
    mode = infer_mode(rows, pip_392=pip_392)
    other = "modulo" if mode == "consistent" else "consistent_hashing"
    for row in rows:
        predicted = row["consistent_hashing"] if mode == "consistent" else row["modulo"]
        current = row["observed"] if row["observed"] is not None else predicted
        row["alternative"] = row[other] if pip_392 else None
        row["explained"] = row["observed"] is None or row["observed"] == predicted
        row["moves"] = pip_392 and current != row["alternative"]
        row["mode"] = mode
    return rows


def with_flaps(partitions: pd.DataFrame, history: pd.DataFrame, params: Any) -> pd.DataFrame:
    if partitions.empty:
        return partitions
    window = history[(history["type"] == "Failover") & history["active_consumer_name"].notna()]
    window = window.sort_values("collected_at", kind="stable")
    changes: dict[tuple[str, str], int] = {}
    names: dict[tuple[str, str], dict[str, None]] = {}
    last: dict[tuple[str, str], str] = {}
    columns = (window[c] for c in ("topic", "subscription", "active_consumer_name"))
    for topic, sub, active in zip(*columns, strict=True):
        key, name = (topic, sub), str(active)
        if key in last and last[key] != name:
            changes[key] = changes.get(key, 0) + 1
        last[key] = name
        names.setdefault(key, {})[name] = None
    keys = list(zip(partitions["topic"], partitions["subscription"], strict=True))
    out = partitions.assign(
        changes=[changes.get(k, 0) for k in keys],
        seen=[", ".join(names.get(k, ())) for k in keys],
    )
    return out.assign(flapping=out["changes"] >= params.flap_changes)


def group_consumers(rows: pd.DataFrame, names: Names) -> list[str]:
    keys = zip(rows["topic"], rows["subscription"], strict=True)
    return sorted(set().union(*(names.get(k, frozenset()) for k in keys)))


def current_of(rows: pd.DataFrame) -> pd.Series:
    predicted = rows["consistent_hashing"].where(rows["mode"] == "consistent", rows["modulo"])
    return rows["observed"].where(rows["observed"].notna(), predicted)


def _counts(active: pd.Series, consumers: Sequence[str]) -> list[int]:
    tally = active.value_counts()
    return [int(tally.get(name, 0)) for name in consumers]


def group_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows = []
    for label, mine in partitions.groupby("label", sort=False):
        consumers = group_consumers(mine, names)
        mode = str(mine["mode"].iloc[0])
        counts = _counts(current_of(mine), consumers)
        whatif = mine["alternative"].notna().any()
        rows.append(
            {
                "label": label,
                "subscription": mine["subscription"].iloc[0],
                "topics": mine["parent_topic"].nunique(),
                "partitions": len(mine),
                "consumers": len(consumers),
                "mode": mode,
                "unexplained": int((~mine["explained"].astype(bool)).sum()),
                "imbalance": imbalance(counts, len(mine)),
                "overload": overload(counts, len(mine)),
                "alternative": ("modulo" if mode == "consistent" else "consistent")
                if whatif
                else None,
                "imbalance_alternative": imbalance(
                    _counts(mine["alternative"], consumers), len(mine)
                )
                if whatif
                else None,
                "partitions_moving": int(mine["moves"].astype(bool).sum()),
                "flapping": int(mine["flapping"].astype(bool).sum()),
            }
        )
    return frame_of(rows, GROUP_COLUMNS)


def consumer_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for label, mine in partitions.groupby("label", sort=False):
        consumers = group_consumers(mine, names)
        now = _counts(current_of(mine), consumers)
        then: list[Any] = (
            _counts(mine["alternative"], consumers)
            if mine["alternative"].notna().any()
            else [None] * len(consumers)
        )
        fair = len(mine) / len(consumers) if consumers else 0.0
        rows.extend(
            {
                "label": label,
                "consumer_name": name,
                "partitions": now[i],
                "partitions_alternative": then[i],
                "vs_fair": now[i] / fair if fair else 0.0,
            }
            for i, name in enumerate(consumers)
        )
    return frame_of(rows, CONSUMER_COLUMNS)


def matrix_frame(partitions: pd.DataFrame, names: Names) -> pd.DataFrame:
    rows = [
        {
            "label": row.label,
            "topic": row.topic,
            "consumer_name": name,
            "role": "active" if name == row.observed else "standby",
        }
        for row in partitions.itertuples(index=False)
        for name in sorted(names.get((row.topic, row.subscription), frozenset()))
    ]
    return frame_of(rows, MATRIX_COLUMNS)


def timeline_frame(partitions: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    if partitions.empty or history.empty:
        return frame_of([], TIMELINE_COLUMNS)
    keys = partitions[["label", "topic", "subscription"]]
    rows = history.merge(keys, on=["topic", "subscription"], how="inner")
    rows = rows.sort_values(["label", "topic", "collected_at"], kind="stable")
    return rows[TIMELINE_COLUMNS].reset_index(drop=True)
