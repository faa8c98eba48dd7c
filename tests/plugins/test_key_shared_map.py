"""key-shared-map: selector and replica points read from broker ranges, drift, what-ifs, lookup."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import responses

from pulsar_lens.api import Chart, Metric, Note, Section, Table
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.assignments import merge_ranges
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.keyshared.ranges import Member, infer_selector
from pulsar_lens.core.keyshared.rebuild import name_indexes, rebuild
from pulsar_lens.core.model import (
    BrokerRecord,
    ConsumerRecord,
    HashRange,
    Snapshot,
    SubscriptionRecord,
)
from pulsar_lens.core.selectors import ConsistentHashingSelector, Consumer, make_selector
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from pulsar_lens.plugins.runner import RunOutput, run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, at, make_inputs, make_snapshot
from tests.collectors import recorded
from tests.markdown import shown

PLUGIN = KeySharedMap()
SUB = "ks"
LABEL = f"{TOPIC} | {SUB}"
GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "data" / "hashes.json").read_text())
ORDERS_KS = "persistent://public/default/orders | ks"


def consumer(name: str, ranges: Sequence[HashRange], since: float) -> ConsumerRecord:
    return ConsumerRecord(
        TOPIC, SUB, name, hash_ranges=tuple(map(tuple, ranges)), connected_since=at(since)
    )


def snapshot(
    consumers: Sequence[ConsumerRecord], *, mode: str = "AUTO_SPLIT", topic: str = TOPIC
) -> Snapshot:
    sub = SubscriptionRecord(
        topic, SUB, type="Key_Shared", key_shared_mode=mode, consumer_count=len(consumers)
    )
    return make_snapshot(0, subscriptions=(sub,), consumers=tuple(consumers))


def golden(name: str) -> list[ConsumerRecord]:
    vector = GOLDEN[name]
    return [consumer(n, vector["ranges"][n], float(i)) for i, n in enumerate(vector["consumers"])]


def analyze(snapshots: Sequence[Snapshot], **params: Any) -> RunOutput:
    return run_on_inputs(PLUGIN, make_inputs(snapshots, PLUGIN.inputs), params)


def replay(scenario: str) -> Snapshot:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        recorded.register(mock, scenario)
        return poll(AdminClient(recorded.BASE, retries=0))


def sub_row(output: RunOutput, label: str = LABEL) -> pd.Series:
    subs = output.result.frames["subscriptions"].set_index("label")
    return subs.loc[label]


def members_of_selector(selector: ConsistentHashingSelector) -> list[Member]:
    return [Member(c.name, r) for c, r in selector.ranges().items()]


def test_key_shared_map_recorded_broker_ranges_match_the_model() -> None:
    output = analyze([replay("default")])
    row = sub_row(output, ORDERS_KS)
    assert (row["selector"], row["replica_points"], row["drift"]) == ("consistent", 100, False)
    consumers = output.result.frames["consumers"]
    mine = consumers[consumers["label"] == ORDERS_KS]
    assert list(mine["consumer_name"]) == ["ks-1", "ks-2"]
    assert mine["hashes"].sum() == 65535 and abs(mine["share"].sum() - 1) < 1e-12
    assert row["imbalance"] == mine["share"].max() * 2
    assert output.result.summary["drifting"] == 0


def test_key_shared_map_infers_the_docs_nine_points() -> None:
    row = sub_row(analyze([snapshot(golden("consistent_4_0_docs_nine_points"))]))
    assert (row["replica_points"], row["drift"]) == (9, False)


def test_key_shared_map_infers_pulsar_tests_three_points() -> None:
    row = sub_row(analyze([snapshot(golden("consistent_4_0_three_points"))]))
    assert (row["selector"], row["replica_points"], row["drift"]) == ("consistent", 3, False)


def test_key_shared_map_drift_when_a_range_differs() -> None:
    c1, c2 = golden("consistent_4_0_docs_nine_points")
    cut = consumer("c1", [(2960, 5968), (22258, 43033), (49261, 54464), (55155, 61000)], 0)
    output = analyze([snapshot([cut, c2])])
    row = sub_row(output)
    assert row["drift"] and row["drift_hashes"] == 273  # 61001..61273: nobody, model says c1
    assert "reproduces" in row["drift_reason"]
    assert any(isinstance(v, Note) and v.level == "warning" for v in output.views)
    assert set(output.result.frames["ranges"]["source"]) == {"broker", "model"}
    assert c1.hash_ranges != cut.hash_ranges


def test_key_shared_map_given_points_that_do_not_fit_drift() -> None:
    row = sub_row(analyze([snapshot(golden("consistent_4_0_docs_nine_points"))], replica_points=50))
    assert row["drift"] and row["replica_points"] == 50


def test_key_shared_map_name_indexes_follow_rejoins() -> None:
    selector = ConsistentHashingSelector(points=20)
    first = Consumer("dup")
    for handle in (first, Consumer("dup"), Consumer("solo"), Consumer("dup")):
        selector.add(handle)
    selector.remove(first)
    selector.add(Consumer("dup"))  # connects last, takes the freed index 0
    members = members_of_selector(selector)
    assert name_indexes(members) == (1, 0, 2, 0)
    model = rebuild("consistent", members)
    assert (model.points, model.drift) == (20, False)


def test_key_shared_map_auto_split_and_drift_after_a_leave() -> None:
    tiles = [("c3", [(0, 16384)]), ("c2", [(16385, 32768)]), ("c1", [(32769, 65536)])]
    joined = [consumer(n, r, -i) for i, (n, r) in enumerate(tiles)]  # c1 connected first
    row = sub_row(analyze([snapshot(joined)]))
    assert (row["selector"], row["drift"]) == ("auto-split", False)
    after_leave = [consumer("c3", [(0, 16384)], -2), consumer("c1", [(16385, 65536)], 0)]
    row = sub_row(analyze([snapshot(after_leave)]))
    assert row["selector"] == "auto-split" and row["drift"]
    assert "past joins and leaves" in row["drift_reason"]


def test_key_shared_map_auto_split_what_if_splits_the_biggest_observed_range() -> None:
    after_leave = [consumer("c3", [(0, 16384)], -2), consumer("c1", [(16385, 65536)], 0)]
    output = analyze([snapshot(after_leave)], add_consumer="c4")
    ranges = output.result.frames["what_if_ranges"]
    rows = zip(ranges["consumer_name"], ranges["start"], ranges["end"], strict=True)
    got = {n: (s, e) for n, s, e in rows}
    assert got == {"c3": (0, 16384), "c4": (16385, 40960), "c1": (40961, 65536)}


def test_key_shared_map_what_if_add_equals_the_selector_after_the_join() -> None:
    consumers = golden("consistent_4_0_docs_nine_points")
    output = analyze([snapshot(consumers)], add_consumer="c3")
    expected = ConsistentHashingSelector(points=9)
    for name in ("c1", "c2", "c3"):
        expected.add(Consumer(name))
    ranges = output.result.frames["what_if_ranges"]
    got = ranges.groupby("consumer_name")[["start", "end"]].apply(
        lambda f: [tuple(map(int, r)) for r in f.to_numpy()]
    )
    assert {c.name: list(r) for c, r in expected.ranges().items()} == got.to_dict()
    what_if = output.result.frames["what_if"].set_index("consumer_name")
    moved = output.result.summary["what_if"]["moved_hashes"]
    assert what_if.loc["c3", "gained_hashes"] == moved == what_if["lost_hashes"].sum()
    assert what_if.loc["c3", "hashes_before"] == 0
    assert output.result.summary["what_if"]["losers"] == ["c1", "c2"]
    assert abs(output.result.summary["what_if"]["moved_fraction"] - moved / 65535) < 1e-12


def test_key_shared_map_what_if_remove_moves_only_the_leavers_ranges() -> None:
    output = analyze([replay("default")], subscription=ORDERS_KS, remove_consumer="ks-1")
    what_if = output.result.frames["what_if"].set_index("consumer_name")
    assert what_if.loc["ks-1", "hashes_after"] == 0
    assert what_if.loc["ks-2", "hashes_after"] == 65535
    moves = output.result.frames["moves"]
    assert set(moves["before"]) == {"ks-1#0"} and set(moves["after"]) == {"ks-2#1"}


def test_key_shared_map_what_if_replica_points_moves_most_of_the_space() -> None:
    output = analyze([snapshot(golden("consistent_4_0_docs_nine_points"))], what_if_points=100)
    facts = output.result.summary["what_if"]
    assert facts["change"] == "replica points 100"
    assert 0.1 < facts["moved_fraction"] < 0.9


def test_key_shared_map_sticky_mode_and_remove_leaves_a_gap() -> None:
    sticky = [consumer("low", [(0, 9999)], 0), consumer("high", [(10000, 65535)], 1)]
    output = analyze([snapshot(sticky, mode="STICKY")], remove_consumer="low", add_consumer="")
    row = sub_row(output)
    assert (row["selector"], row["drift"]) == ("sticky", False)
    moves = output.result.frames["moves"]
    assert moves[["start", "end", "before", "after"]].values.tolist() == [[0, 9999, "low#0", None]]
    assert output.result.summary["what_if"]["moved_hashes"] == 9999  # hash 0 is never routed


def test_key_shared_map_sticky_add_has_no_what_if() -> None:
    sticky = [consumer("low", [(0, 65535)], 0)]
    output = analyze([snapshot(sticky, mode="STICKY")], add_consumer="x")
    assert output.result.frames["what_if"].empty and "what_if" not in output.result.summary


def test_key_shared_map_lookup_names_the_receiving_consumer() -> None:
    output = analyze([replay("default")], subscription=ORDERS_KS, key="order-42", add_consumer="z")
    row = output.result.frames["lookup"].iloc[0]
    assert row["hash"] == sticky_key_hash(b"order-42")
    owner = output.result.frames["ranges"]
    hit = owner[
        (owner["label"] == ORDERS_KS)
        & (owner["start"] <= row["hash"])
        & (owner["end"] >= row["hash"])
    ]
    assert row["consumer"] == row["model_consumer"] == hit["consumer_name"].iloc[0]
    assert row["consumer_after"] in {"ks-1", "ks-2", "z"}
    assert output.result.summary["lookup"]["consumer"] == row["consumer"]


def test_key_shared_map_classic_31_bit_ranges_are_not_modelled() -> None:
    output = analyze([replay("classic-modular")])
    row = sub_row(output, ORDERS_KS)
    assert (row["selector"], row["drift"]) == ("unknown", False)
    assert "31-bit" in row["points_note"]
    consumers = output.result.frames["consumers"]
    mine = consumers[consumers["label"] == ORDERS_KS]
    assert abs(mine["share"].sum() - 1) < 1e-6 and mine["share"].max() < 0.6


def test_key_shared_map_infer_selector_rules() -> None:
    wide = [Member("a", ((0, 1_000_000),))]
    assert infer_selector(None, wide) == "unknown"
    assert infer_selector("STICKY", wide) == "sticky"
    assert infer_selector("AUTO_SPLIT", []) == "unknown"
    assert infer_selector("AUTO_SPLIT", [Member("a", ((0, 65536),))]) == "auto-split"
    assert infer_selector("AUTO_SPLIT", [Member("a", ((1, 65535),))]) == "consistent"


def test_key_shared_map_param_choices_list_subscriptions_and_consumers() -> None:
    inputs = make_inputs([replay("default")], PLUGIN.inputs)
    choices = PLUGIN.param_choices(inputs)
    assert choices["subscription"][:2] == ["", ORDERS_KS]
    assert {"ks-1", "ks-2", "pks-1"} <= set(choices["remove_consumer"])


def test_key_shared_map_finds_its_consumers_places_once_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`analyze` and `param_choices` of one run share the consumers' places among the
    Key_Shared subscriptions (one join of every consumer) and give what each gave alone."""
    import pulsar_lens.plugins.builtin.key_shared_map as module

    alone = PLUGIN.param_choices(make_inputs([replay("default")], PLUGIN.inputs))
    calls = []
    real = module.places

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(module, "places", counted)
    inputs = make_inputs([replay("default")], PLUGIN.inputs)
    result = PLUGIN.analyze(inputs, PLUGIN.Params())
    assert PLUGIN.param_choices(inputs) == alone
    assert len(calls) == 1
    assert result.frames["subscriptions"]["label"].tolist()


def test_key_shared_map_consumer_choices_are_those_a_merge_with_its_subscriptions_finds() -> None:
    """The consumers offered for removal, found by the layout's join, are the consumers of
    the Key_Shared subscriptions as a pandas merge on their names finds them, on random
    clusters (names past ASCII, consumers of no subscription, counted but not listed)."""
    from pulsar_lens.plugins.builtin.key_shared_map import key_shared_subscriptions
    from tests.plugins.vectorised_cases import TABLES, cases

    compared = 0
    for _, inputs in cases(TABLES):
        subs = key_shared_subscriptions(inputs.latest("subscriptions"))
        consumers = inputs.latest("consumers")
        if subs.empty or consumers.empty:
            continue
        keyed = consumers.merge(
            subs[["topic", "subscription"]], on=["topic", "subscription"], how="inner"
        )
        merged = sorted(set(keyed["consumer_name"].dropna().astype(str)))
        assert PLUGIN.param_choices(inputs)["remove_consumer"] == ["", *merged]
        compared += len(merged)
    assert compared > 20


def test_key_shared_map_render_views() -> None:
    output = analyze([replay("default")], add_consumer="ks-3", key="k")
    kinds = {type(v) for v in output.views}
    assert {Metric, Table, Chart, Note} <= kinds
    for view in output.views:
        if isinstance(view, Chart):
            assert view.chart.to_dict()


def test_key_shared_map_empty_inputs() -> None:
    output = analyze([])
    assert all(frame.empty for frame in output.result.frames.values())
    assert output.result.summary["subscriptions"] == 0
    assert any(isinstance(v, Note) for v in output.views)


def test_key_shared_map_classic_ranges_are_a_31_bit_ring_shifted_by_one() -> None:
    # Why the classic dispatcher's ranges stay unmodelled: 4.0.7 reports them in 31 bits, as the
    # 3.0.7 ring of the same names would list them with every bound one higher (from 1).
    snapshot = replay("classic-modular")
    ks = [c for c in snapshot.consumers if c.subscription == "ks"]
    ring = make_selector("consistent", pulsar="3.0", variant="3.0.7")
    handles = [Consumer(c.consumer_name) for c in sorted(ks, key=lambda c: c.connected_since)]
    for handle in handles:
        ring.add(handle)
    listed = ring.ranges()
    for record, handle in zip(sorted(ks, key=lambda c: c.connected_since), handles, strict=True):
        shifted = [
            (s + 1 if s else 1, min(e + 1, 2**31 - 2)) for s, e in merge_ranges(listed[handle])
        ]
        assert shifted == list(record.hash_ranges)


def test_key_shared_map_unknown_subscription_says_so() -> None:
    output = analyze([replay("default")], subscription="nope | nope", add_consumer="x")
    assert "what_if" not in output.result.summary
    notes = [v for v in output.views if isinstance(v, Note) and v.level == "warning"]
    assert notes and "nope | nope" in shown(notes[-1].markdown)


def ascii_broker_snapshot() -> Snapshot:
    """Ranges as a Java 17 broker under LANG=C makes them: non-ASCII hashed as '?'."""
    selector = ConsistentHashingSelector(points=100, name_encoding="US-ASCII")
    joined = [Consumer(name) for name in ("zé-1", "zé-2", "zü-3")]
    for c in joined:
        selector.add(c)
    ranges = selector.ranges()
    return snapshot([consumer(c.name, ranges[c], float(i)) for i, c in enumerate(joined)], mode="")


def test_key_shared_map_says_when_only_the_other_charset_fits(monkeypatch: Any) -> None:
    utf8 = sub_row(analyze([ascii_broker_snapshot()]))
    assert bool(utf8["drift"])
    assert "match consumer names hashed as US-ASCII" in utf8["drift_reason"]
    assert "PULSAR_LENS_JVM_CHARSET=US-ASCII" in utf8["drift_reason"]
    fixed = sub_row(analyze([ascii_broker_snapshot()], jvm_charset="US-ASCII"))
    assert not bool(fixed["drift"]) and int(fixed["replica_points"]) == 100
    monkeypatch.setattr("pulsar_lens.core.parts._charset", "US-ASCII")  # the setting
    assert not bool(sub_row(analyze([ascii_broker_snapshot()]))["drift"])


# ---- which broker line the models are of ----------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "version", "selector"),
    [
        ("default", "4.0.7", "consistent"),
        ("3.0-default", "3.0.7", "consistent"),  # 3.0.7's ring, listed in 31 bits
        ("3.0-autosplit-modular", "3.0.7", "auto-split"),
    ],
)
def test_key_shared_map_says_which_broker_line_it_modelled(
    scenario: str, version: str, selector: str
) -> None:
    output = analyze([replay(scenario)], subscription=ORDERS_KS, key="order-42")
    line = version.rsplit(".", 1)[0]
    summary = output.result.summary
    assert (summary["pulsar"], summary["broker_versions"]) == (line, [version])
    captions = [v.caption for v in output.views if isinstance(v, Section) and v.title == ORDERS_KS]
    assert captions and f"Pulsar {line} model (brokers: {version})" in shown(captions[0])
    row = sub_row(output, ORDERS_KS)
    assert (row["selector"], row["drift"]) == (selector, False)
    lookup = output.result.frames["lookup"].iloc[0]
    kind = "auto-split" if selector == "auto-split" else "consistent"
    assert lookup["hash"] == sticky_key_hash(b"order-42", selector=kind, pulsar=line)  # type: ignore[arg-type]
    # the broker's ranges and the model of its line name the same consumer (3.0 auto split
    # selects by hash % 65536, 3.0 consistent hashing by the 31-bit hash itself)
    assert lookup["consumer"] == lookup["model_consumer"] is not None


def test_key_shared_map_without_broker_versions_models_4_0_and_says_so() -> None:
    output = analyze([snapshot([consumer("a", [(1, 65535)], 0)])])
    assert output.result.summary["pulsar"] == "4.0"
    assert output.result.summary["model"] == "Pulsar 4.0 model (brokers: version unknown)"


def test_key_shared_map_sticky_on_3_0_gives_a_consumer_the_gap_between_its_ranges() -> None:
    # a 3.0 broker delivers a hash between two ranges of one consumer to it; 4.0 to nobody
    mine = [consumer("a", [(0, 9999), (20000, 39999)], 0), consumer("b", [(40000, 65535)], 1)]
    key = next(
        k
        for k in (f"k{i}" for i in range(10_000))
        if 10000 <= sticky_key_hash(k.encode(), selector="sticky", pulsar="3.0") <= 19999
    )
    for version, expected in (("3.0.7", "a"), ("4.0.7", None)):
        base = snapshot(mine, mode="STICKY")
        polled = dataclasses.replace(base, brokers=(BrokerRecord("b:8080", version=version),))
        lookup = analyze([polled], key=key).result.frames["lookup"].iloc[0]
        assert lookup["consumer"] is None  # in no range the broker lists
        assert lookup["model_consumer"] == expected, version


def test_key_shared_map_models_the_recorded_3_0_consistent_ring_exactly() -> None:
    # 3.0.7's default selector: ~100 31-bit ranges per consumer, one per ring point
    output = analyze([replay("3.0-default")], subscription=ORDERS_KS, add_consumer="ks-3")
    frames = output.result.frames
    row = sub_row(output, ORDERS_KS)
    assert (row["selector"], row["replica_points"], row["drift"]) == ("consistent", 100, False)
    mine = frames["consumers"][frames["consumers"]["label"] == ORDERS_KS]
    assert list(mine["model_hashes"]) == list(mine["hashes"]) and set(mine["drift_hashes"]) == {0}
    assert abs(mine["share"].sum() - 1) < 1e-6
    facts = output.result.summary["what_if"]
    assert facts["change"] == "add ks-3" and 0.15 < facts["moved_fraction"] < 0.5
    after = frames["what_if"]
    assert after["hashes_after"].sum() == 2**31 and abs(after["share_after"].sum() - 1) < 1e-9
    for view in output.views:
        if isinstance(view, Chart):
            assert view.chart.to_dict()


def test_key_shared_map_3_0_lookup_agrees_with_the_recorded_ranges_key_for_key() -> None:
    # where the 3.0.7 broker's listed ranges send a key is where our 3.0.7 ring sends it
    snapshot = replay("3.0-default")
    row = analyze([snapshot], subscription=ORDERS_KS, key="order-7").result.frames["lookup"]
    assert row["consumer"].iloc[0] == row["model_consumer"].iloc[0] is not None
    ks = [c for c in snapshot.consumers if c.subscription == "ks" and c.topic.endswith("orders")]
    members = [Member(c.consumer_name, c.hash_ranges) for c in ks]
    members.sort(key=lambda m: next(c.connected_since for c in ks if c.consumer_name == m.name))
    model = rebuild("consistent", members, pulsar="3.0")
    assert model.selector is not None
    for i in range(2000):
        value = sticky_key_hash(f"order-{i}".encode(), pulsar="3.0")
        listed = [m.name for m in members if any(s <= value <= e for s, e in m.ranges)]
        chosen = model.selector.select(value)
        assert chosen is not None and listed == [chosen.name], value
