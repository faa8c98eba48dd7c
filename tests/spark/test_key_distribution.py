"""key-distribution on Spark equals the same rule on pandas, and counts what it must."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Columns, Consumer, Note, Table, Tabs
from pulsar_lens.core.digest import snapshot_id
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.keyload import UNCOVERED
from pulsar_lens.core.model import (
    BrokerRecord,
    ConsumerRecord,
    KeySampleRecord,
    SubscriptionRecord,
    records_to_table,
)
from pulsar_lens.core.selectors import ConsistentHashingSelector
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.key_distribution import KeyDistribution
from pulsar_lens.plugins.builtin.key_distribution.reference import pandas_result
from pulsar_lens.plugins.builtin.shared.sticky import plan_ranges
from pulsar_lens.plugins.testing import make_snapshot

pytestmark = pytest.mark.spark

PLUGIN = KeyDistribution()
T = "persistent://public/default/orders"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _sub(
    topic: str, name: str, consumers: int, mode: str = "AUTO_SPLIT", kind: str = "Key_Shared"
) -> SubscriptionRecord:
    return SubscriptionRecord(
        topic, name, type=kind, key_shared_mode=mode, consumer_count=consumers
    )


def _consumer(
    topic: str, sub: str, name: str, *ranges: tuple[int, int], since: int | None = None
) -> ConsumerRecord:
    joined = None if since is None else T0 + dt.timedelta(seconds=since)
    return ConsumerRecord(topic, sub, name, connected_since=joined, hash_ranges=tuple(ranges))


def _sample(topic: str, key: str) -> KeySampleRecord:
    return KeySampleRecord(topic, key, sticky_key_hash(key.encode()))


def _write(store: Store, seconds: float, samples: list[KeySampleRecord], **tables: Any) -> None:
    """One poll, and its key samples as the sampler writes them (beside the snapshot)."""
    snapshot = make_snapshot(seconds, **tables)
    store.write(snapshot)
    table = records_to_table(
        "key_samples",
        samples,
        snapshot_id=snapshot_id(snapshot),
        collected_at=snapshot.collected_at,
        cluster=snapshot.cluster,
    )
    store.write_table("key_samples", table)


def _run(store: Store, **params: Any) -> dict[str, pd.DataFrame]:
    output = runner.run(PLUGIN, store, params, use_cache=False, use_stored=False)
    return dict(output.result.frames)


def _per_consumer(frames: dict[str, pd.DataFrame], label: str) -> dict[str, int]:
    mine = frames["consumers"][frames["consumers"]["label"] == label]
    return dict(zip(mine["consumer_name"], mine["messages"].astype(int), strict=True))


def _two_hashes(prefix: str) -> tuple[str, int, int]:
    """A key whose consistent-hashing and sticky hashes differ, and both hashes."""
    for i in range(5000):
        key = f"{prefix}{i}"
        consistent = sticky_key_hash(key.encode())
        sticky = sticky_key_hash(key.encode(), selector="sticky")
        if consistent != sticky:
            return key, consistent, sticky
    raise AssertionError("no key with two different hashes")


Poll = dict[str, list[Any]]  # samples, subscriptions and consumers of one case in one poll
HAND_PARAMS = {"top_keys": 3, "points_low": 10, "points_high": 100, "spread": 1, "plan_points": 50}


def _poll(samples: list[Any], subs: list[Any], consumers: list[Any]) -> Poll:
    return {"samples": samples, "subscriptions": subs, "consumers": consumers}


def _case_moves(topic: str) -> list[Poll]:
    """Poll 1: a owns every hash; poll 2: a the low half, b the high half."""
    keys = [f"k{i}" for i in range(40)]
    return [
        _poll(
            [_sample(topic, k) for k in keys[:10]],
            [_sub(topic, "ks", 1)],
            [_consumer(topic, "ks", "a", (1, 65535))],
        ),
        _poll(
            [_sample(topic, k) for k in keys[10:]],
            [_sub(topic, "ks", 2)],
            [_consumer(topic, "ks", "a", (1, 32767)), _consumer(topic, "ks", "b", (32768, 65535))],
        ),
    ]


def _uncovered_key() -> str:
    return next(f"g{i}" for i in range(1000) if sticky_key_hash(f"g{i}".encode()) > 40000)


def _case_uncovered(topic: str) -> list[Poll]:
    return [
        _poll(
            [_sample(topic, _uncovered_key())] * 3,
            [_sub(topic, "ks", 1)],
            [_consumer(topic, "ks", "a", (1, 40000))],
        )
    ]


def _case_selectors(topic: str) -> list[Poll]:
    key, consistent, sticky = _two_hashes("s")
    cut = min(consistent, sticky)  # the two hashes fall on either side of it
    return [
        _poll(
            [_sample(topic, key)],
            [_sub(topic, "ch", 2), _sub(topic, "as", 2), _sub(topic, "st", 1, mode="STICKY")],
            [
                _consumer(topic, "ch", "low", (1, cut)),
                _consumer(topic, "ch", "high", (cut + 1, 65535)),
                _consumer(topic, "as", "low", (0, cut)),
                _consumer(topic, "as", "high", (cut + 1, 65536)),
                _consumer(topic, "st", "only", (sticky, sticky)),
            ],
        )
    ]


def _case_partitions(topic: str) -> list[Poll]:
    p0, p1 = f"{topic}-partition-0", f"{topic}-partition-1"
    return [
        _poll(
            [_sample(p0, f"k{i}") for i in range(7)],
            [_sub(p0, "ks", 1), _sub(p1, "ks", 1), _sub(p0, "shared", 1, kind="Shared")],
            [
                _consumer(p0, "ks", "zero", (1, 65535)),
                _consumer(p1, "ks", "one", (1, 65535)),
                _consumer(p0, "shared", "other"),
            ],
        )
    ]


HOT = {"d": 1, "c": 3, "b": 3, "a": 5}


def _case_hot(topic: str) -> list[Poll]:
    return [
        _poll(
            [_sample(topic, k) for k, n in HOT.items() for _ in range(n - 1)],
            [_sub(topic, "ks", 1)],
            [_consumer(topic, "ks", "old", (1, 65535))],
        ),
        _poll(
            [_sample(topic, k) for k in HOT],
            [_sub(topic, "ks", 1)],
            [_consumer(topic, "ks", "new", (1, 65535))],
        ),
    ]


RING_KEYS = [f"user-{i % 37}" for i in range(200)]


def _case_ring(topic: str) -> list[Poll]:
    members = [  # connection order: c, a, b
        _consumer(topic, "ks", "a", (1, 30000), since=20),
        _consumer(topic, "ks", "b", (30001, 50000), since=30),
        _consumer(topic, "ks", "c", (50001, 65535), since=10),
    ]
    return [_poll([_sample(topic, k) for k in RING_KEYS], [_sub(topic, "ks", 3)], members)]


PLAN_KEYS = [f"order-{i % 51}" for i in range(300)]


def _case_plan(topic: str) -> list[Poll]:
    return [
        _poll(
            [_sample(topic, k) for k in PLAN_KEYS],
            [_sub(topic, "st", 2, mode="STICKY")],
            [_consumer(topic, "st", "x", (0, 40000)), _consumer(topic, "st", "y", (40001, 65535))],
        )
    ]


CASES = {
    "moves": _case_moves,
    "uncovered": _case_uncovered,
    "selectors": _case_selectors,
    "partitions": _case_partitions,
    "hot": _case_hot,
    "ring": _case_ring,
    "plan": _case_plan,
}


def _topic(case: str) -> str:
    return f"persistent://public/default/{case}"


@pytest.fixture(scope="module")
def hand_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Every hand case, each on its own topic, in one store."""
    store = Store(tmp_path_factory.mktemp("hand"))
    polls: list[Poll] = [_poll([], [], []), _poll([], [], [])]
    for case, build in CASES.items():
        for poll, part in zip(polls, build(_topic(case)), strict=False):
            for name, rows in part.items():
                poll[name] += rows
    for i, poll in enumerate(polls):
        _write(
            store,
            30.0 * i,
            poll["samples"],
            subscriptions=poll["subscriptions"],
            consumers=poll["consumers"],
        )
    return store


@pytest.fixture(scope="module")
def hand(spark: object, hand_store: Store) -> dict[str, pd.DataFrame]:
    """The hand cases analysed once on Spark (HAND_PARAMS)."""
    return _run(hand_store, **HAND_PARAMS)


def _mine(frames: dict[str, pd.DataFrame], name: str, case: str) -> pd.DataFrame:
    frame = frames[name]
    return frame[frame["label"].str.startswith(_topic(case))].reset_index(drop=True)


def test_each_sample_counts_for_the_consumer_whose_ranges_held_its_hash_then(
    hand: dict[str, pd.DataFrame],
) -> None:
    keys = [f"k{i}" for i in range(10, 40)]
    high = sum(1 for k in keys if sticky_key_hash(k.encode()) >= 32768)
    label = f"{_topic('moves')} | ks"
    assert _per_consumer(hand, label) == {"a": 10 + (30 - high), "b": high}
    assert _mine(hand, "skew", "moves")["selector"].tolist() == ["consistent"]


def test_an_uncovered_hash_and_an_idle_consumer_are_counted(hand: dict[str, pd.DataFrame]) -> None:
    assert _per_consumer(hand, f"{_topic('uncovered')} | ks") == {UNCOVERED: 3, "a": 0}
    skew = _mine(hand, "skew", "uncovered").iloc[0]
    assert (skew["uncovered"], skew["consumers"], skew["messages"]) == (3, 1, 3)


def test_auto_split_and_sticky_route_by_the_hash_modulo_65536(
    hand: dict[str, pd.DataFrame],
) -> None:
    _, consistent, sticky = _two_hashes("s")
    cut = min(consistent, sticky)
    topic = _topic("selectors")
    selectors = _mine(hand, "skew", "selectors").set_index("label")["selector"].to_dict()
    assert selectors == {
        f"{topic} | as": "auto-split",
        f"{topic} | ch": "consistent",
        f"{topic} | st": "sticky",
    }
    hot = _mine(hand, "hot_keys", "selectors")
    side = {True: "low", False: "high"}
    assert hot[["label", "hash", "consumer_name"]].values.tolist() == [
        [f"{topic} | as", sticky, side[sticky <= cut]],
        [f"{topic} | ch", consistent, side[consistent <= cut]],
        [f"{topic} | st", sticky, "only"],
    ]


def test_a_partitions_samples_count_for_that_partitions_subscription(
    hand: dict[str, pd.DataFrame],
) -> None:
    rows = _mine(hand, "consumers", "partitions")[["label", "consumer_name", "messages"]]
    assert rows.values.tolist() == [[f"{_topic('partitions')}-partition-0 | ks", "zero", 7]]


def test_hot_keys_are_the_most_sampled_with_their_newest_consumer(
    hand: dict[str, pd.DataFrame],
) -> None:
    hot = _mine(hand, "hot_keys", "hot")
    assert hot[["key", "messages", "consumer_name", "consumers_seen"]].values.tolist() == [
        ["a", 5, "new", 2],
        ["b", 3, "new", 2],
        ["c", 3, "new", 2],
    ]
    assert hot["hash"].tolist() == [sticky_key_hash(k.encode()) for k in "abc"]


def _ring_names(names: list[str], points: int, hashes: list[int]) -> list[str]:
    selector = ConsistentHashingSelector(points=points)
    for name in names:
        selector.add(Consumer(name))
    return [picked.name for picked in map(selector.select, hashes) if picked is not None]


def test_what_if_puts_the_real_keys_on_rings_of_n_consumers(
    hand: dict[str, pd.DataFrame],
) -> None:
    hashes = [sticky_key_hash(k.encode()) for k in RING_KEYS]
    rows = []
    for points in (10, 100):
        now = _ring_names(["c", "a", "b"], points, hashes)
        for names in (["c", "a"], ["c", "a", "b"], ["c", "a", "b", "extra-1"]):
            owners = _ring_names(names, points, hashes)
            busiest = max(Counter(owners).values()) / len(hashes)
            moved = sum(o != n for o, n in zip(owners, now, strict=True)) / len(hashes)
            rows.append([len(names), points, busiest, busiest * len(names), moved])
    expected = pd.DataFrame(
        rows, columns=["consumers", "points", "max_share", "max_over_fair", "moved_share"]
    )
    found = _mine(hand, "what_if", "ring").drop(columns="label")
    pd.testing.assert_frame_equal(found, expected, check_dtype=False)


def test_the_sticky_plan_is_scored_on_the_sticky_hashes(hand: dict[str, pd.DataFrame]) -> None:
    plan = _mine(hand, "sticky_plan", "plan")
    hashes = [sticky_key_hash(k.encode(), selector="sticky") for k in PLAN_KEYS]
    expected = [
        sum(1 for h in hashes if any(s <= h <= e for s, e in ranges))
        for ranges in plan_ranges(2, 50, prefix="node")
    ]
    assert plan["node"].tolist() == ["node-0", "node-1"]
    assert plan["messages"].tolist() == expected and sum(expected) == len(PLAN_KEYS)
    assert plan["over_fair"].tolist() == pytest.approx([2 * n / len(PLAN_KEYS) for n in expected])


def test_the_hand_cases_give_the_same_frames_on_pandas(
    hand: dict[str, pd.DataFrame], hand_store: Store
) -> None:
    plain = pandas_result(hand_store.root, top_keys=3, points=(10, 100), spread=1, plan_points=50)
    _same(hand, dict(plain.frames))


def _layout(rng: random.Random, n: int) -> list[tuple[tuple[int, int], ...]]:
    """Ranges for n consumers as one of the 4.0 selectors, or a 3.0 broker, would report."""
    kind = rng.choice(["consistent", "auto-split"] * 3 + ["wide", "none"])
    if kind == "none" or n == 0:
        return [() for _ in range(n)]
    low, high = {"consistent": (1, 65535), "auto-split": (0, 65536), "wide": (0, 2**31 - 1)}[kind]
    pieces = n * (rng.randint(1, 3) if kind == "consistent" else 1)
    cuts = sorted(rng.sample(range(low + 1, high), pieces - 1))
    bounds = [low, *cuts, high + 1]
    owned: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i in range(pieces):
        owned[i % n].append((bounds[i], bounds[i + 1] - 1))
    return [tuple(ranges) for ranges in owned]


def _random_store(root: Path, seed: int, versions: tuple[str, ...] = ()) -> Store:
    """Random polls; poll i's brokers report versions[i] (the last one on for the rest)."""
    rng = random.Random(seed)
    store = Store(root)
    topics = [T, f"{T}-partition-0", f"{T}-partition-1"]
    keys = [f"key-{i}" for i in range(60)] + ["", "ключ", "hot"]
    for poll in range(rng.randint(2, 4)):
        subs, consumers, samples = [], [], []
        for topic in topics:
            for sub in ("ks", "other"):
                n = rng.randint(0, 4)
                mode = rng.choice(["AUTO_SPLIT", "AUTO_SPLIT", "STICKY"])
                kind = rng.choice(["Key_Shared"] * 4 + ["Shared"])
                subs.append(_sub(topic, sub, n, mode, kind))
                for i, ranges in enumerate(_layout(rng, n)):
                    if rng.random() < 0.1:
                        continue  # a gap: that consumer is not listed
                    name = rng.choice(["c0", "c1", "c2", "c3", "c4"][: n + 1])
                    since = rng.choice([None, 5, 10 * i])
                    consumers.append(_consumer(topic, sub, name, *ranges, since=since))
            picked = rng.choices(keys, k=rng.randint(0, 80))
            samples += [_sample(topic, k) for k in picked + ["hot"] * rng.randint(0, 5)]
        reported = versions[min(poll, len(versions) - 1) :][:1]
        _write(
            store,
            30.0 * poll,
            samples,
            subscriptions=subs,
            consumers=consumers,
            brokers=[BrokerRecord("b:8080", version=v) for v in reported],
        )
    return store


def _same(spark: dict[str, pd.DataFrame], plain: dict[str, pd.DataFrame]) -> None:
    assert set(spark) == set(plain)
    for name, frame in plain.items():
        pd.testing.assert_frame_equal(
            spark[name].reset_index(drop=True),
            frame.reset_index(drop=True),
            check_dtype=False,
            obj=name,
        )


OTHER_PARAMS = {"top_keys": 2, "points_low": 7, "points_high": 100, "spread": 1, "plan_points": 9}
PANDAS_OTHER = {"top_keys": 2, "points": (7, 100), "spread": 1, "plan_points": 9}


@pytest.mark.parametrize(
    ("seed", "params", "twin", "versions"),
    [(0, {}, {}, ()), (11, OTHER_PARAMS, PANDAS_OTHER, ("4.0.7", "3.0.7"))],
    ids=["defaults", "other-params-on-3.0"],
)
def test_spark_equals_pandas_on_random_stores(
    spark: object,
    tmp_path: Path,
    seed: int,
    params: dict[str, Any],
    twin: dict[str, Any],
    versions: tuple[str, ...],
) -> None:
    """Without versions every poll is modelled on 4.0; the second store's newest polls report
    3.0.7 (after a 4.0.7 one), so all of it is modelled on 3.0 (31-bit rings included)."""
    store = _random_store(tmp_path, seed, versions)
    chosen: dict[str, Any] = {"subscription": f"{T} | ks"} if params else {}
    output = runner.run(PLUGIN, store, {**params, **chosen}, use_cache=False, use_stored=False)
    plain = pandas_result(store.root, **twin, **chosen)
    _same(dict(output.result.frames), dict(plain.frames))
    assert output.result.summary == plain.summary
    assert output.result.summary["pulsar"] == ("3.0" if versions else "4.0")


RUN_JOBS = 15  # one run on the hand store, the subscription choices included (2 of them)


def test_one_run_starts_the_spark_jobs_it_did_when_this_was_written(
    spark: Any, hand_store: Store
) -> None:
    """A collect per counted frame planned and ran the whole chain of joins again: 47 jobs
    here. One query now; a change that adds jobs shows here first (a count, not a time)."""
    context = spark.sparkContext
    group = "key-distribution-job-count"
    context.setJobGroup(group, group)
    try:
        frames = _run(hand_store, **HAND_PARAMS)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    assert all(not frame.empty for frame in frames.values())
    assert len(context.statusTracker().getJobIdsForGroup(group)) == RUN_JOBS


def test_an_empty_store_gives_empty_frames(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot(0))
    frames = _run(store)
    assert all(frame.empty for frame in frames.values())
    plain = pandas_result(tmp_path).frames
    assert {n: list(f.columns) for n, f in frames.items()} == {
        n: list(f.columns) for n, f in plain.items()
    }


def _flat(views: Any) -> list[Any]:
    out = []
    for view in views:
        out.append(view)
        if isinstance(view, Columns):
            out += _flat(v for column in view.columns for v in column)
        if isinstance(view, Tabs):
            out += _flat(v for _, tab in view.tabs for v in tab)
    return out


def test_the_page_draws_the_chosen_subscription_and_every_skew(hand_store: Store) -> None:
    label = f"{_topic('ring')} | ks"
    views = _flat(PLUGIN.render(pandas_result(hand_store.root, subscription=label)))
    charts = [v for v in views if isinstance(v, Chart)]
    assert len(charts) == 4 and all(c.chart.to_dict() for c in charts)
    tables = [v for v in views if isinstance(v, Table)]
    assert {len(t.frame) for t in tables if "max_over_fair" in t.frame and "gini" in t.frame} == {
        len(CASES) + 2  # a label per case, three for the selectors case
    }
    hot = next(t.frame for t in tables if "key" in t.frame)
    assert set(hot["label"]) == {label}


def test_the_page_says_when_no_key_was_sampled(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot(0))
    (view,) = PLUGIN.render(pandas_result(tmp_path))
    assert isinstance(view, Note) and "sampling" in view.markdown
