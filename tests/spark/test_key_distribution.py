"""key-distribution on Spark equals the same rule on pandas, and counts what it must."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from core.digest import snapshot_id
from core.hashing import sticky_key_hash
from core.model import ConsumerRecord, KeySampleRecord, SubscriptionRecord, records_to_table
from core.store import Store
from plugins import runner
from plugins.builtin.key_distribution import KeyDistribution
from plugins.builtin.key_distribution.reference import UNASSIGNED, pandas_result
from plugins.testing import make_snapshot

pytestmark = pytest.mark.spark

PLUGIN = KeyDistribution()
T = "persistent://public/default/orders"


def _sub(topic: str, name: str, consumers: int, mode: str = "AUTO_SPLIT") -> SubscriptionRecord:
    return SubscriptionRecord(
        topic, name, type="Key_Shared", key_shared_mode=mode, consumer_count=consumers
    )


def _consumer(topic: str, sub: str, name: str, *ranges: tuple[int, int]) -> ConsumerRecord:
    return ConsumerRecord(topic, sub, name, hash_ranges=tuple(ranges))


def _sample(topic: str, key: str) -> KeySampleRecord:
    return KeySampleRecord(topic, key, sticky_key_hash(key.encode()))


def _write(store: Store, seconds: float, samples: list[KeySampleRecord], **tables: object) -> None:
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


def _run(store: Store) -> dict[str, pd.DataFrame]:
    output = runner.run(PLUGIN, store, use_cache=False, use_stored=False)
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


def test_each_sample_counts_for_the_consumer_whose_ranges_held_its_hash_then(
    spark: object, tmp_path: Path
) -> None:
    keys = [f"k{i}" for i in range(40)]
    hashes = {k: sticky_key_hash(k.encode()) for k in keys}
    store = Store(tmp_path)
    # poll 1: a owns all; poll 2: a the low half, b the high half
    _write(
        store,
        0,
        [_sample(T, k) for k in keys[:10]],
        subscriptions=[_sub(T, "ks", 1)],
        consumers=[_consumer(T, "ks", "a", (1, 65535))],
    )
    _write(
        store,
        30,
        [_sample(T, k) for k in keys[10:]],
        subscriptions=[_sub(T, "ks", 2)],
        consumers=[
            _consumer(T, "ks", "a", (1, 32767)),
            _consumer(T, "ks", "b", (32768, 65535)),
        ],
    )
    consumers = _run(store)["consumers"].set_index("consumer_name")["messages"]
    high = sum(1 for k in keys[10:] if hashes[k] >= 32768)
    assert consumers.to_dict() == {"a": 10 + (30 - high), "b": high}


def test_a_hash_no_range_covers_is_counted_as_no_consumer(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path)
    key = next(f"g{i}" for i in range(1000) if sticky_key_hash(f"g{i}".encode()) > 40000)
    _write(
        store,
        0,
        [_sample(T, key)] * 3,
        subscriptions=[_sub(T, "ks", 1)],
        consumers=[_consumer(T, "ks", "a", (1, 40000))],
    )
    frames = _run(store)
    assert frames["consumers"].set_index("consumer_name")["messages"].to_dict() == {UNASSIGNED: 3}
    skew = frames["skew"].iloc[0]
    assert skew["unassigned"] == 3 and skew["consumers"] == 0


def test_a_sticky_subscription_hashes_keys_modulo_65536(spark: object, tmp_path: Path) -> None:
    key = next(
        f"s{i}"
        for i in range(5000)
        if sticky_key_hash(f"s{i}".encode(), selector="sticky") != sticky_key_hash(f"s{i}".encode())
    )
    sticky = sticky_key_hash(key.encode(), selector="sticky")
    store = Store(tmp_path)
    _write(
        store,
        0,
        [_sample(T, key)],
        subscriptions=[_sub(T, "st", 1, mode="STICKY")],
        consumers=[_consumer(T, "st", "only", (sticky, sticky))],
    )
    frames = _run(store)
    assert list(frames["hot_keys"]["hash"]) == [sticky]
    assert list(frames["hot_keys"]["consumer_name"]) == ["only"]


def _random_store(root: Path, seed: int) -> Store:
    rng = random.Random(seed)
    store = Store(root)
    topics = [T, "persistent://public/default/events-partition-0"]
    for poll in range(rng.randint(1, 4)):
        subs, consumers, samples = [], [], []
        for topic in topics:
            for sub in ("ks", "other"):
                n = rng.randint(0, 3)
                mode = rng.choice(["AUTO_SPLIT", "STICKY"])
                subs.append(_sub(topic, sub, n, mode))
                cuts = sorted(rng.sample(range(2, 65535), n - 1)) if n > 1 else []
                bounds = [1, *cuts, 65536]
                for i in range(n):
                    if rng.random() < 0.15:
                        continue  # a gap: that consumer is not listed
                    span = (bounds[i], bounds[i + 1] - 1)
                    consumers.append(_consumer(topic, sub, f"c{i}", span))
            keys = [f"key-{rng.randint(0, 60)}" for _ in range(rng.randint(0, 80))]
            samples += [_sample(topic, k) for k in keys]
        _write(store, 30.0 * poll, samples, subscriptions=subs, consumers=consumers)
    return store


@pytest.mark.parametrize("seed", range(6))
def test_spark_equals_pandas_on_random_stores(spark: object, tmp_path: Path, seed: int) -> None:
    store = _random_store(tmp_path, seed)
    _same(_run(store), dict(pandas_result(store.root).frames))


def test_an_empty_store_gives_empty_frames(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot(0))
    frames = _run(store)
    assert all(frame.empty for frame in frames.values())
    assert list(frames["consumers"].columns) == list(
        pandas_result(tmp_path).frames["consumers"].columns
    )
