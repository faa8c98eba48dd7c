"""bundle-load-history on Spark equals the same rule on pandas, and ranks what it must."""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Columns, Note, Result
from pulsar_lens.core.bundles import bundle_name, default_boundaries, topic_bundle
from pulsar_lens.core.model import BrokerRecord, BundleRecord, EventRecord, TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.bundle_load_history import BundleLoadHistory
from pulsar_lens.plugins.builtin.bundle_load_history.reference import pandas_result
from pulsar_lens.plugins.testing import at, make_snapshot

pytestmark = pytest.mark.spark

PLUGIN = BundleLoadHistory()
NS = "public/default"
IDLE = "public/idle"
FULL = (0x00000000, 0xFFFFFFFF)
QUARTERS = default_boundaries(4)


def _bundle(
    ns: str, lower: int, upper: int, owner: str | None, rate: float | None, topics: int = 0
) -> BundleRecord:
    tenant = ns.split("/")[0]
    return BundleRecord(ns, tenant, bundle_name(lower, upper), lower, upper, owner, topics, rate)


def _topic(ns: str, local: str, lower: int, upper: int, rate: float | None) -> TopicRecord:
    return TopicRecord(
        f"persistent://{ns}/{local}",
        ns.split("/")[0],
        ns,
        bundle=bundle_name(lower, upper),
        msg_rate_in=rate,
        msg_throughput_in=None if rate is None else rate * 100,
    )


def _run(store: Store, **params: Any) -> Result:
    return runner.run(PLUGIN, store, params, use_cache=False, use_stored=False).result


def _same(spark: Result, plain: Result) -> None:
    assert set(spark.frames) == set(plain.frames) == set(PLUGIN.outputs)
    for name, frame in plain.frames.items():
        pd.testing.assert_frame_equal(
            spark.frames[name].reset_index(drop=True),
            frame.reset_index(drop=True),
            check_dtype=False,
            obj=name,
        )
    assert spark.summary == pytest.approx(plain.summary)


def test_a_lopsided_pair_of_brokers_gets_the_unloads_you_would_rank_by_hand(
    spark: object, tmp_path: Path
) -> None:
    q = QUARTERS
    store = Store(tmp_path)
    # b1 owns three bundles; b2 is listed by every poll and owns nothing
    for i, first in enumerate((25.0, 35.0, 45.0)):
        store.write(
            make_snapshot(
                30.0 * i,
                bundles=[
                    _bundle(NS, q[0], q[1], "b1", first),
                    _bundle(NS, q[1], q[2], "b1", 30.0),
                    _bundle(NS, q[2], q[3], "b1", 15.0),
                ],
                brokers=[BrokerRecord("b1"), BrokerRecord("b2")],
            )
        )
    result = _run(store)
    frames = result.frames
    names = [bundle_name(q[i], q[i + 1]) for i in range(3)]
    # newest loads 90 / 0, mean 45: busiest/mean 2.0. Unloading 45 leaves 45 / 45 (1.0), 30
    # leaves 60 / 30 (60 / 45), 15 leaves 75 / 15 (75 / 45); no topics, so no split
    expected = pd.DataFrame(
        {
            "rank": [1, 2, 3],
            "action": ["unload"] * 3,
            "bundle": names,
            "from_broker": ["b1"] * 3,
            "to_broker": ["b2"] * 3,
            "moved_load": [45.0, 30.0, 15.0],
            "violation_before": [2.0] * 3,
            "violation_after": [1.0, 60 / 45, 75 / 45],
            "improvement": [1.0, 2 - 60 / 45, 2 - 75 / 45],
        }
    )
    pd.testing.assert_frame_equal(frames["candidates"][expected.columns], expected)
    brokers = pd.DataFrame(
        {
            "broker": ["b1", "b2"],
            "bundles": [3, 0],
            "load": [90.0, 0.0],
            "share": [1.0, 0.0],
            "mean_load": [80.0, 0.0],  # b1: (70 + 80 + 90) / 3 polls
        }
    )
    pd.testing.assert_frame_equal(frames["brokers"], brokers)
    hot = frames["hot"]
    assert list(hot["bundle"]) == names
    assert hot.iloc[0][["polls", "mean_load", "peak_load", "newest_load"]].tolist() == [
        3,
        35.0,
        45.0,
        45.0,
    ]
    # p95 of (25, 35, 45), linear: 35 + 0.9 * 10
    assert hot["p95_load"].iloc[0] == pytest.approx(44.0)
    assert hot["owner_share"].iloc[0] == pytest.approx(0.5)
    assert result.summary["violation"] == pytest.approx(2.0)
    assert result.summary["mean_violation"] == pytest.approx(80 / 40)
    assert result.summary["hottest"] == f"{NS}/{names[0]}"
    views = PLUGIN.render(result)
    inner = [v for c in views if isinstance(c, Columns) for column in c.columns for v in column]
    charts = [v for v in [*views, *inner] if isinstance(v, Chart)]
    assert len(charts) == 2 and all(c.chart.to_dict() for c in charts)


def test_a_split_is_scored_from_its_topics_crc32_halves(spark: object, tmp_path: Path) -> None:
    whole = bundle_name(*FULL)
    rates = {f"t{i}": 10.0 * (i + 1) for i in range(8)}
    mid = 0x7FFFFFFF  # range_equally_divide of the full range
    lower = sum(r for t, r in rates.items() if zlib.crc32(f"persistent://{NS}/{t}".encode()) < mid)
    assert (lower, 360.0 - lower) == (220.0, 140.0)  # t2, t3, t6, t7 hash below the middle
    store = Store(tmp_path)
    store.write(
        make_snapshot(
            0,
            bundles=[_bundle(NS, *FULL, "b1", 360.0, 8), _bundle(IDLE, *FULL, "b2", 40.0, 1)],
            topics=[_topic(NS, t, *FULL, r) for t, r in rates.items()]
            + [_topic(IDLE, "x", *FULL, 40.0)],
        )
    )
    candidates = _run(store, metric="throughput").frames["candidates"]
    # bytes/s: b1 36000, b2 4000, mean 20000 (1.8). Moving b1's upper half (14000) leaves
    # 22000 / 18000 (1.1); the lower half 14000 / 26000 (1.3); the whole bundle 0 / 40000
    # (2.0): only the split of the upper half helps
    assert candidates[["action", "bundle", "to_broker"]].values.tolist() == [["split", whole, "b2"]]
    best = candidates.iloc[0]
    assert best["moved_load"] == pytest.approx(14000.0)
    assert (best["violation_before"], best["violation_after"]) == pytest.approx((1.8, 1.1))
    assert "0x7fffffff" in best["reason"] and "upper half" in best["reason"]


def test_a_move_is_seen_once_from_an_event_or_from_the_polls(spark: object, tmp_path: Path) -> None:
    name = bundle_name(*FULL)
    store = Store(tmp_path)
    store.write(make_snapshot(0, bundles=[_bundle(NS, *FULL, "b1", 5.0)]))
    # the collector reported the first move; the second shows only in the polls
    event = EventRecord(at(30), "bundle_owner_changed", f"{NS}/{name}", NS, before="b1", after="b2")
    store.write(make_snapshot(30, bundles=[_bundle(NS, *FULL, "b2", 5.0)]), events=[event])
    store.write(make_snapshot(60, bundles=[_bundle(NS, *FULL, "b1", 5.0)]))
    frames = _run(store).frames
    expected = pd.DataFrame(
        {
            "at": pd.to_datetime([at(30), at(60)], utc=True),
            "namespace": [NS, NS],
            "bundle": [name, name],
            "before": ["b1", "b2"],
            "after": ["b2", "b1"],
            "source": ["event", "polls"],
        }
    )
    pd.testing.assert_frame_equal(frames["moves"], expected, check_dtype=False)
    assert list(frames["timeline"]["owner_broker"]) == ["b1", "b2", "b1"]
    assert frames["candidates"].empty  # one broker: nowhere to move to


def _random_store(root: Path, seed: int) -> Store:
    rng = random.Random(seed)
    store = Store(root)
    brokers = ["b1", "b2", "b3"][: rng.randint(2, 3)]
    layout = {"t/a": default_boundaries(2), "t/b": default_boundaries(3)}
    owners: dict[tuple[str, int], str | None] = {
        (ns, i): rng.choice(brokers) for ns, cuts in layout.items() for i in range(len(cuts) - 1)
    }
    pools = {ns: [f"persistent://{ns}/x{k}" for k in range(7)] for ns in layout}
    for poll in range(rng.randint(2, 6)):
        bundles, topics, events = [], [], []
        for (ns, i), owner in list(owners.items()):
            lower, upper = layout[ns][i], layout[ns][i + 1]
            if rng.random() < 0.3:
                new = rng.choice([*brokers, None])
                if new != owner and rng.random() < 0.5:
                    key = f"{ns}/{bundle_name(lower, upper)}"
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
                owners[(ns, i)] = owner = new
            mine = [
                t
                for t in pools[ns]
                if topic_bundle(layout[ns], t).lower == lower and rng.random() < 0.8
            ]
            rates = [rng.choice([None, 0.0, 1.5, 7.0, 20.0]) for _ in mine]
            total = sum(r or 0.0 for r in rates)
            bundles.append(_bundle(ns, lower, upper, owner, total, len(mine)))
            topics += [
                _topic(ns, t.rsplit("/", 1)[1], lower, upper, r)
                for t, r in zip(mine, rates, strict=True)
            ]
        listed = [BrokerRecord(b) for b in brokers if rng.random() < 0.8]
        store.write(
            make_snapshot(30.0 * poll, bundles=bundles, topics=topics, brokers=listed),
            events=events,
        )
    return store


@pytest.mark.parametrize(("seed", "metric"), [(0, "msg_rate"), (1, "throughput"), (2, "msg_rate")])
def test_spark_equals_pandas_on_random_stores(
    spark: object, tmp_path: Path, seed: int, metric: str
) -> None:
    store = _random_store(tmp_path, seed)
    plain = pandas_result(store.root, metric=metric, top=3)
    assert not plain.frames["hot"].empty and not plain.frames["timeline"].empty
    _same(_run(store, metric=metric, top=3), plain)


def test_an_empty_store_gives_empty_frames(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot(0))
    result = _run(store)
    plain = pandas_result(tmp_path)
    assert all(frame.empty for frame in result.frames.values())
    assert {n: list(f.columns) for n, f in result.frames.items()} == {
        n: list(f.columns) for n, f in plain.frames.items()
    }
    assert result.summary["bundles"] == 0 and result.summary["hottest"] is None
    assert [type(v) for v in PLUGIN.render(result)] == [Note]
