"""`key-shared-map`: who owns which sticky-key hashes in each Key_Shared subscription.

Per subscription (one per topic or partition) of the newest snapshot: every consumer's hash
ranges as the broker reports them (`keyHashRangeArrays`), its share of the routable hashes
1..65535, and the imbalance (largest share over the fair share 1/n). The selector is read
from the mode and the ranges (see `core.keyshared.ranges.infer_selector`); for consistent
hashing the replica points are inferred from the ranges (see `pulsar_lens.core.keyshared.rebuild`).

**Drift**: our model, rebuilt from the consumer names in connection order (`connected_since`)
with the inferred selector and points, must give the broker's ranges exactly. When it does not,
the subscription is flagged with the number of hashes that differ: a replica-points setting we
could not find, or a bug in the model.

**What-if** on one subscription (the `subscription` param, else the first): add a consumer by
name, remove the most recently connected consumer of a name, or change the replica points
(applied in that order of precedence, one at a time). It reports the fraction of the hash
space that moves, the ranges each consumer loses (on a 4.0 broker, the hashes there with
unacknowledged messages start draining) and each consumer's share before and after.

**Lookup**: a key's sticky hash (hashed as the UTF-8 bytes of a partition key), the
consumer that receives it and the one its hash still drains to.

**Traffic**: the sampled message keys of the selected subscription's topic (`key_samples`,
the newest 12 polls) counted against the broker's ranges: a hash space split evenly can
still load one consumer with the hot keys.

The subscription shown by default is the most troubled one: most draining hashes, then most
consumers.

**Broker line**: the versions in `brokers` pick the models (`shared.versions`): on 3.0.x
brokers the auto split and sticky models are 3.0's (auto split selects by `hash % 65536`,
sticky gives a consumer the gap between two of its ranges), its consistent hashing is 3.0.7's
ring (31-bit ranges, one per ring point; `core.keyshared.legacy`) and keys are hashed as 3.0
does. The summary (`pulsar`,
`broker_versions`) and the selected subscription's caption say which line was modelled.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import (
    OTHER_CHARSET,
    AnalysisPlugin,
    BaseModel,
    Field,
    GaugeMetricFamily,
    Inputs,
    JvmCharset,
    MetricFamily,
    MetricsContext,
    Page,
    Result,
    View,
    compute_key_load,
    finite,
    frame_of,
    jvm_charset,
)
from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.keyshared.fit import MAX_POINTS, Fit, fit_consistent
from pulsar_lens.core.keyshared.layout import (
    Layout,
    from_frame,
    infer_kinds,
    places,
    subscription_keys,
)
from pulsar_lens.core.keyshared.ranges import hash_selector
from pulsar_lens.core.keyshared.rebuild import WhatIf, apply_what_if, consistent_model, rebuild
from pulsar_lens.plugins.builtin.key_shared_map.frames import Analysis, map_frames
from pulsar_lens.plugins.builtin.key_shared_map.what_if import (
    LOOKUP_COLUMNS,
    State,
    lookup_row,
    what_if_frames,
)
from pulsar_lens.plugins.builtin.shared.labels import subscription_label
from pulsar_lens.plugins.builtin.shared.versions import BrokerLine, broker_line

KEY_SAMPLE_POLLS = 12
"""How many recent polls of key samples the traffic per consumer counts."""


class KeySharedMap(AnalysisPlugin):
    name = "key-shared-map"
    title = "Key_Shared hash map"
    description = (
        "Which consumer owns which sticky-key hashes in every Key_Shared subscription, the "
        "selector and replica points behind it, drift from our model, what moves when a "
        "consumer joins or leaves, and which consumer receives a given key."
    )
    version = "1.3"
    engine = "light"
    inputs = ("subscriptions", "consumers", "draining_hashes", "key_samples", "brokers")
    history = 1
    history_of = {"key_samples": KEY_SAMPLE_POLLS}
    outputs = (
        "subscriptions",
        "consumers",
        "ranges",
        "draining",
        "traffic",
        "what_if",
        "moves",
        "what_if_ranges",
        "lookup",
    )
    page = Page(
        title="Key_Shared",
        icon=":material/key:",
        url_path="key-shared",
        order=10,
        caption="How each Key_Shared subscription splits the hash space, what is draining, "
        "where a key goes and what a joining or leaving consumer would move.",
        controls=("subscription", "key", "add_consumer", "remove_consumer", "what_if_points"),
    )

    class Params(BaseModel):
        subscription: str = Field(
            "",
            title="Subscription",
            description="'topic | subscription' to show, look up and change; empty: the one "
            "with the most draining hashes",
        )
        replica_points: int = Field(
            0, ge=0, le=MAX_POINTS, description="Replica points of the model; 0 infers them"
        )
        add_consumer: str = Field(
            "", title="What if this consumer joins", description="A consumer name"
        )
        remove_consumer: str = Field(
            "",
            title="What if this consumer leaves",
            description="The last connected consumer of this name leaves",
        )
        what_if_points: int = Field(
            0,
            ge=0,
            le=MAX_POINTS,
            title="What if the broker used this many replica points",
            description="0: no change",
        )
        key: str = Field(
            "", title="Message key", description="Its sticky hash and the consumer it goes to"
        )
        jvm_charset: JvmCharset = Field(
            "",
            validate_default=True,
            description="How the broker's JVM encodes consumer names (UTF-8 or US-ASCII); "
            "empty: PULSAR_LENS_JVM_CHARSET, else UTF-8",
        )

    def analyze(self, data: Inputs, params: Params) -> Result:
        subs, keys, sub_of_row = laid_out(data)
        line = broker_line(data.latest("brokers"))
        analysis = analyze_subscriptions(
            subs,
            data.latest("consumers"),
            points=params.replica_points,
            charset=jvm_charset(params.jvm_charset),
            pulsar=line.line,
            found=(keys, sub_of_row),
        )
        frames = map_frames(subs, analysis)
        frames["draining"] = draining_frame(data.latest("draining_hashes"), subs)
        selected = params.subscription or most_troubled(frames["subscriptions"])
        state = state_of(analysis, selected)
        what_if = None
        if state is not None:
            what_if = apply_what_if(
                state[1],
                state[0],
                add=params.add_consumer.strip(),
                remove=params.remove_consumer.strip(),
                points=params.what_if_points,
            )
        frames.update(what_if_frames(selected, what_if))
        frames["traffic"] = traffic_frame(
            data.history("key_samples"),
            frames["subscriptions"],
            frames["ranges"],
            selected,
            pulsar=line.line,
        )
        mine = frames["draining"][frames["draining"]["label"] == selected]
        lookup = lookup_row(selected, params.key, state, what_if, mine)
        frames["lookup"] = frame_of([lookup] if lookup else [], LOOKUP_COLUMNS)
        summary = summarize(frames, selected, what_if, lookup, line)
        return Result(frames=frames, summary=summary)

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.key_shared_map.views import render_views  # altair: on use

        return render_views(result)

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        imbalance = GaugeMetricFamily(
            "pulsar_lens_key_shared_imbalance",
            "Largest consumer share of the Key_Shared hash space over the fair share 1/n "
            "(key-shared-map); bounded like the subscription backlog.",
            labels=["topic", "subscription"],
        )
        drift = GaugeMetricFamily(
            "pulsar_lens_key_shared_drift",
            "1 when the broker's Key_Shared hash ranges differ from our model of them "
            "(key-shared-map), else 0; bounded like the subscription backlog.",
            labels=["topic", "subscription"],
        )
        for row in context.kept_rows(result.frames["subscriptions"]):
            labels = [str(row["topic"]), str(row["subscription"])]
            imbalance.add_metric(labels, finite(row["imbalance"]) or 0.0)
            drift.add_metric(labels, 1.0 if bool(row["drift"]) else 0.0)
        return [imbalance, drift]

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        _, keys, sub_of_row = laid_out(data)
        labels = [subscription_label(t, s) for t, s in keys]
        # the consumers the analysis lays out, found where it found them
        members = data.latest("consumers")["consumer_name"][sub_of_row >= 0] if keys else None
        names = sorted({str(n) for n in members.dropna().tolist()} if members is not None else ())
        return {"subscription": ["", *labels], "remove_consumer": ["", *names]}


DRAINING_COLUMNS = ["label", "consumer_name", "hash", "unack_msgs", "blocked_attempts"]
TRAFFIC_COLUMNS = [
    "label",
    "consumer_name",
    "sampled_messages",
    "distinct_keys",
    "share",
    "vs_fair",
]


def most_troubled(subs: pd.DataFrame) -> str:
    """The label of the subscription with the most draining hashes, then most consumers."""
    if subs.empty:
        return ""
    ranked = subs.sort_values(
        ["draining_hashes", "consumers", "label"], ascending=[False, False, True]
    )
    return str(ranked["label"].iloc[0])


def draining_frame(draining: pd.DataFrame, subs: pd.DataFrame) -> pd.DataFrame:
    """The draining hashes of the Key_Shared subscriptions, by label and hash."""
    if draining.empty or subs.empty:
        return frame_of([], DRAINING_COLUMNS)
    keyed = draining.merge(subs[["topic", "subscription"]], on=["topic", "subscription"])
    if keyed.empty:
        return frame_of([], DRAINING_COLUMNS)
    labels = [
        subscription_label(t, s) for t, s in zip(keyed["topic"], keyed["subscription"], strict=True)
    ]
    out = keyed.assign(label=labels)[DRAINING_COLUMNS]
    return out.sort_values(["label", "hash"]).reset_index(drop=True)


def traffic_frame(
    samples: pd.DataFrame,
    subs: pd.DataFrame,
    ranges: pd.DataFrame,
    label: str,
    *,
    pulsar: PulsarLine = "4.0",
) -> pd.DataFrame:
    """Sampled messages per consumer of subscription `label`, counted against the broker's
    ranges under its selector, keys hashed as a broker of line `pulsar` does; empty without
    samples of its topic."""
    row = subs[subs["label"] == label]
    if row.empty or samples.empty:
        return frame_of([], TRAFFIC_COLUMNS)
    topic, kind = str(row["topic"].iloc[0]), str(row["selector"].iloc[0])
    mine = samples[samples["topic"] == topic]
    owned = ranges[(ranges["label"] == label) & (ranges["source"] == "broker")]
    if mine.empty or owned.empty:
        return frame_of([], TRAFFIC_COLUMNS)
    by_consumer: dict[str, list[tuple[int, int]]] = {}
    for name, start, end in zip(owned["consumer_name"], owned["start"], owned["end"], strict=True):
        by_consumer.setdefault(str(name), []).append((int(start), int(end)))
    load = compute_key_load(mine, by_consumer, selector=hash_selector(kind), pulsar=pulsar)
    load = load.assign(label=label, vs_fair=load["share"].astype(float) * len(by_consumer))
    ordered = load.sort_values("share", ascending=False).reset_index(drop=True)
    return ordered[TRAFFIC_COLUMNS]


def key_shared_subscriptions(subscriptions: pd.DataFrame) -> pd.DataFrame:
    """Key_Shared subscriptions with at least one consumer, sorted by topic and name."""
    if subscriptions.empty:
        return subscriptions
    subs = subscriptions[
        (subscriptions["type"] == "Key_Shared") & (subscriptions["consumer_count"] > 0)
    ]
    return subs.sort_values(["topic", "subscription"]).reset_index(drop=True)


def laid_out(data: Inputs) -> tuple[pd.DataFrame, list[tuple[str, str]], np.ndarray]:
    """The newest poll's Key_Shared subscriptions, their (topic, subscription) keys and each
    consumer row's place among them (`places`, -1 for none), found once per run: `analyze`
    and `param_choices` both need them (one Arrow join of every consumer, 0.2 s at 1,000,000
    topics, and a sort of the subscriptions)."""

    def find() -> tuple[pd.DataFrame, list[tuple[str, str]], np.ndarray]:
        subs = key_shared_subscriptions(data.latest("subscriptions"))
        keys = subscription_keys(subs)
        return subs, keys, places(keys, data.latest("consumers"))

    return data.derived("key-shared-map.laid-out", find)


def analyze_subscriptions(
    subs: pd.DataFrame,
    consumers: pd.DataFrame,
    *,
    points: int,
    charset: str = "utf-8",
    pulsar: PulsarLine = "4.0",
    found: tuple[list[tuple[str, str]], np.ndarray] | None = None,
) -> Analysis:
    """Every subscription's members, selector and model (consistent hashing all at once).

    Consumer names are hashed in `charset` (the broker JVM's default); a subscription whose
    ranges only the other charset reproduces says so in its drift reason. `found`: the keys
    of `subs` and each consumer row's place among them (`laid_out`), when found already."""
    keys, sub_of_row = found if found is not None else (subscription_keys(subs), None)
    layout = from_frame(keys, consumers, sub_of_row)
    modes = subs["key_shared_mode"].tolist() if len(subs) else []
    kinds = infer_kinds(layout, modes, pulsar=pulsar)
    fitted = "consistent" if pulsar == "4.0" else ""  # 3.0's ring: one subscription at a time
    consistent = [s for s, kind in enumerate(kinds) if kind == fitted]
    fit = fit_consistent(layout, np.asarray(consistent, np.int64), points=points, charset=charset)
    flag_other_charset(layout, fit, points=points)
    others = [s for s, kind in enumerate(kinds) if kind != fitted]
    models = {
        s: rebuild(kinds[s], members, points=points, pulsar=pulsar, charset=charset)
        for s, members in zip(others, layout.members_of(others), strict=True)
    }
    labels = [subscription_label(topic, sub) for topic, sub in keys]
    return Analysis(labels, layout, kinds, fit, models)


def flag_other_charset(layout: Layout, fit: Fit, *, points: int) -> None:
    """For drifting subscriptions with non-ASCII consumer names: when the other charset
    reproduces the broker's ranges exactly, the reason says which setting is wrong."""
    other = OTHER_CHARSET.get(codecs.lookup(fit.charset).name.replace("_", "-"))
    if other is None:
        return
    suspects = [
        k
        for k, s in enumerate(fit.subs.tolist())
        if fit.drift[k] > 0 and not all(m.name.isascii() for m in layout.members(s))
    ]
    if not suspects:
        return
    retry = fit_consistent(layout, fit.subs[suspects], points=points, charset=other)
    for k, again in zip(suspects, range(len(suspects)), strict=True):
        if retry.drift[again] == 0:
            fit.reasons[k] = (
                f"the broker's ranges match consumer names hashed as {other} (with "
                f"{retry.points[again]} replica points): set PULSAR_LENS_JVM_CHARSET={other}"
            )


def state_of(analysis: Analysis, label: str) -> State | None:
    """The members and model of the subscription `label` (the last one of that label)."""
    where = {name: s for s, name in enumerate(analysis.labels)}
    sub = where.get(label)
    if sub is None:
        return None
    members = analysis.layout.members(sub)
    at = analysis.fitted.get(sub)
    model = analysis.models[sub] if at is None else consistent_model(members, analysis.fit, at)
    return members, model


def summarize(
    frames: Mapping[str, pd.DataFrame],
    selected: str,
    what_if: WhatIf | None,
    lookup: Mapping[str, Any] | None,
    line: BrokerLine | None = None,
) -> dict[str, Any]:
    subs = frames["subscriptions"]
    line = line or BrokerLine("4.0", ())
    summary: dict[str, Any] = {
        "pulsar": line.line,
        "broker_versions": list(line.versions),
        "model": line.caption(),
        "subscriptions": len(subs),
        "drifting": int(subs["drift"].astype(bool).sum()) if len(subs) else 0,
        "drifting_subscriptions": sorted(subs.loc[subs["drift"].astype(bool), "label"])
        if len(subs)
        else [],
        "max_imbalance": float(subs["imbalance"].max()) if len(subs) else 0.0,
        "selected": selected,
    }
    if what_if is not None:
        losers = frames["what_if"]
        summary["what_if"] = {
            "change": what_if.change,
            "moved_hashes": what_if.moved_hashes(),
            "moved_fraction": what_if.moved_hashes() / what_if.space_size(),
            "losers": sorted(set(losers.loc[losers["lost_hashes"] > 0, "consumer_name"])),
        }
    if lookup is not None:
        summary["lookup"] = {
            k: lookup[k] for k in ("key", "hash", "consumer", "model_consumer", "draining_for")
        }
    return summary
