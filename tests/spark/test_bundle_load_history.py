"""bundle-load-history on Spark equals the same rule on pandas, and ranks what it must."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from core.bundles import topic_bundle_hash
from core.model import BundleRecord, EventRecord, TopicRecord
from core.store import Store
from plugins import runner
from plugins.builtin.bundle_load_history import BundleLoadHistory
from plugins.builtin.bundle_load_history.reference import pandas_result, violation
from plugins.testing import at, make_snapshot

pytestmark = pytest.mark.spark

PLUGIN = BundleLoadHistory()
NS = "public/default"
FULL = (0, 0xFFFFFFFF)
HALVES = ((0, 0x80000000), (0x80000000, 0xFFFFFFFF))


def _name(lower: int, upper: int) -> str:
    return f"0x{lower:08x}_0x{upper:08x}"


def _bundle(
    lower: int, upper: int, owner: str | None, rate: float, topics: int = 1
) -> BundleRecord:
    return BundleRecord(NS, "public", _name(lower, upper), lower, upper, owner, topics, rate, 0.0)


def _topic(name: str, bundle: str, rate: float, owner: str | None = None) -> TopicRecord:
    return TopicRecord(
        f"persistent://{NS}/{name}",
        "public",
        NS,
        bundle=bundle,
        owner_broker=owner,
        msg_rate_in=rate,
        msg_throughput_in=rate * 100,
    )


def _run(store: Store, **params: object) -> dict[str, pd.DataFrame]:
    output = runner.run(PLUGIN, store, params, use_cache=False, use_stored=False)
    return dict(output.result.frames)


def _same(spark: dict[str, pd.DataFrame], plain: dict[str, pd.DataFrame]) -> None:
    assert set(spark) == set(plain)
    for name, frame in plain.items():
        pd.testing.assert_frame_equal(
            spark[name].reset_index(drop=True),
            frame.reset_index(drop=True),
            check_dtype=False,
            obj=name,
        )


def test_a_lopsided_pair_of_brokers_gets_the_move_you_would_make_by_hand(
    spark: object, tmp_path: Path
) -> None:
    low, high = (_name(*h) for h in HALVES)
    store = Store(tmp_path)
    # b1 owns both halves (loads 60 and 30), b2 owns an idle third namespace bundle
    for i in range(3):
        store.write(
            make_snapshot(
                30.0 * i,
                bundles=[
                    _bundle(*HALVES[0], "b1", 60.0),
                    _bundle(*HALVES[1], "b1", 30.0),
                    BundleRecord("public/idle", "public", _name(*FULL), *FULL, "b2", 0, 0.0, 0.0),
                ],
                topics=[_topic("a", low, 60.0, "b1"), _topic("b", high, 30.0, "b1")],
            )
        )
    frames = _run(store)
    assert list(frames["brokers"]["load"]) == [90.0, 0.0]
    best = frames["candidates"].iloc[0]
    # moving the 30 msg/s bundle gives 60/30 (max/mean 1.33); the 60 one gives 30/60 (1.33)
    # too; ties break by name, and both beat splitting a one-topic bundle (not offered)
    assert best["action"] == "unload" and best["to_broker"] == "b2"
    assert best["violation_before"] == pytest.approx(violation({"b1": 90.0, "b2": 0.0}))
    assert best["violation_after"] == pytest.approx(4 / 3)
    assert set(frames["candidates"]["action"]) == {"unload"}
    hot = frames["hot"]
    assert list(hot["bundle"][:2]) == [low, high] and list(hot["mean_load"][:2]) == [60.0, 30.0]
    assert hot["owner_share"].iloc[0] == pytest.approx(60 / 90)


def test_a_split_is_scored_from_its_topics_halves(spark: object, tmp_path: Path) -> None:
    whole = _name(*FULL)
    names = [f"t{i}" for i in range(8)]
    store = Store(tmp_path)
    store.write(
        make_snapshot(
            0,
            bundles=[
                _bundle(*FULL, "b1", 80.0, topics=8),
                BundleRecord("public/idle", "public", whole, *FULL, "b2", 0, 0.0, 0.0),
            ],
            topics=[_topic(n, whole, 10.0, "b1") for n in names],
        )
    )
    candidates = _run(store)["candidates"]
    split = candidates[candidates["action"] == "split"].iloc[0]
    mid = 0x7FFFFFFF
    lower = 10.0 * sum(topic_bundle_hash(f"persistent://{NS}/{n}") < mid for n in names)
    assert split["moved_load"] in (lower, 80.0 - lower)
    # the whole bundle moved leaves b1 empty: no better than now; a split can only help
    assert list(candidates["action"]) == ["split"]


def test_an_owner_change_is_one_move_on_the_timeline(spark: object, tmp_path: Path) -> None:
    name = _name(*FULL)
    store = Store(tmp_path)
    store.write(make_snapshot(0, bundles=[_bundle(*FULL, "b1", 5.0)]))
    moved = EventRecord(at(30), "bundle_owner_changed", f"{NS}/{name}", NS, before="b1", after="b2")
    store.write(make_snapshot(30, bundles=[_bundle(*FULL, "b2", 5.0)]), events=[moved])
    frames = _run(store)
    assert frames["moves"][["bundle", "before", "after"]].values.tolist() == [[name, "b1", "b2"]]
    assert list(frames["timeline"]["owner_broker"]) == ["b1", "b2"]


def _random_store(root: Path, seed: int) -> Store:
    rng = random.Random(seed)
    store = Store(root)
    brokers = ["b1", "b2", "b3"][: rng.randint(1, 3)]
    namespaces = ["t/a", "t/b"]
    owners = {(ns, h): rng.choice(brokers) for ns in namespaces for h in HALVES}
    for poll in range(rng.randint(1, 6)):
        bundles, topics, events = [], [], []
        for (ns, half), owner in list(owners.items()):
            if rng.random() < 0.2:
                new = rng.choice(brokers)
                if new != owner:
                    key = f"{ns}/{_name(*half)}"
                    events.append(
                        EventRecord(
                            at(30.0 * poll),
                            "bundle_owner_changed",
                            key,
                            ns,
                            before=owner,
                            after=new,
                        )
                    )
                    owners[(ns, half)] = owner = new
            names = [f"x{k}" for k in range(rng.randint(0, 4))]
            rates = [rng.choice([0.0, 1.5, 7.0, 20.0]) for _ in names]
            bundles.append(
                BundleRecord(ns, "t", _name(*half), *half, owner, len(names), sum(rates), 1.0)
            )
            topics += [
                TopicRecord(
                    f"persistent://{ns}/{n}-{half[0]}",
                    "t",
                    ns,
                    bundle=_name(*half),
                    owner_broker=owner,
                    msg_rate_in=r,
                    msg_throughput_in=r * 3,
                )
                for n, r in zip(names, rates, strict=True)
            ]
        store.write(make_snapshot(30.0 * poll, bundles=bundles, topics=topics), events=events)
    return store


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("metric", ["msg_rate", "throughput"])
def test_spark_equals_pandas_on_random_stores(
    spark: object, tmp_path: Path, seed: int, metric: str
) -> None:
    store = _random_store(tmp_path, seed)
    _same(
        _run(store, metric=metric, top=3),
        dict(pandas_result(store.root, metric=metric, top=3).frames),
    )


def test_an_empty_store_gives_empty_frames(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot(0))
    frames = _run(store)
    assert all(frame.empty for frame in frames.values())
    expected = pandas_result(tmp_path).frames
    assert {n: list(f.columns) for n, f in frames.items()} == {
        n: list(f.columns) for n, f in expected.items()
    }
