"""The Spark analyses give on a real cluster exactly what they give on local[2].

A standalone master and worker, and a Spark Connect server on that master, are started from
the pyspark distribution (`tests/spark/cluster.py`). The analyses run there in a child
process (`tests/spark/run_on_master.py`): the executors read the store from its path and run
this package's Python. Their frames and summaries must equal the in-process local[2] run, and
the sticky-key hash their JVMs compute (the Java UDF, shipped by `spark.jars`/`ADD JAR` and by
`addArtifacts`) must equal `core.hashing` on random keys of every script and length, and the
parts they build of a synthetic cluster's bulk answers (`plugins.spark.parts`, the poll's
answers read on Spark) must equal those the collect process builds itself.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from pulsar_lens.collectors.events import diff
from pulsar_lens.core.bundles import bundle_name, default_boundaries, topic_bundle
from pulsar_lens.core.digest import snapshot_id
from pulsar_lens.core.failover import FailoverConsumer, partition_names, select_active_consumer
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    KeySampleRecord,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
    records_to_table,
)
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.testing import make_snapshot
from tests.spark import cluster
from tests.spark.run_on_master import load_plugin, summary_json

pytestmark = pytest.mark.spark

PLUGINS = (
    "pulsar_lens.plugins.builtin.stuck_hash_history:StuckHashHistory",
    "pulsar_lens.plugins.builtin.key_distribution:KeyDistribution",
    "pulsar_lens.plugins.builtin.bundle_load_history:BundleLoadHistory",
    "pulsar_lens.plugins.builtin.failover_history:FailoverHistory",
)
HASH_KEYS = 3000
PART_TOPICS = 2000  # the synthetic cluster whose bulk answers the executors build into parts
CHILD_TIMEOUT = 1200.0  # four analyses took ~110 s on a loaded 2-core machine, and past
# 420 s with both parts of the test run and an image build beside them (two apps at once)
POLLS = 12
NS = "public/default"
ORDERS = f"persistent://{NS}/orders"
PAYMENTS = f"persistent://{NS}/payments"
BROKERS = ("10.0.0.1:8080", "10.0.0.2:8080")
BOUNDARIES = default_boundaries(4)

Found = dict[str, tuple[dict[str, pd.DataFrame], str]]  # slug -> (frames, summary JSON)


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    write_store(Store(root), random.Random(7))
    return root


@pytest.fixture(scope="module")
def local(spark: object, store_root: Path) -> Found:
    found: Found = {}
    for spec in PLUGINS:
        output = runner.run(load_plugin(spec), Store(store_root), use_cache=False, use_stored=False)
        found[output.plugin] = (dict(output.result.frames), summary_json(output.result.summary))
    return found


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.Standalone]:
    started = cluster.start_standalone(tmp_path_factory.mktemp("standalone"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def connect(
    tmp_path_factory: pytest.TempPathFactory, standalone: cluster.Standalone
) -> Iterator[cluster.Connect]:
    started = cluster.start_connect(tmp_path_factory.mktemp("connect"), master=standalone.url)
    yield started
    started.stop()


def test_local_run_finds_something_in_every_frame(local: Found) -> None:
    assert set(local) == {load_plugin(spec).name for spec in PLUGINS}
    for slug, (frames, _) in local.items():
        empty = [name for name, frame in frames.items() if frame.empty]
        assert not empty, f"{slug}: the test store leaves {empty} empty"


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
    standalone: cluster.Standalone,
    connect: cluster.Connect,
    store_root: Path,
) -> Iterator[dict[str, Future[Path]]]:
    """The analyses on the standalone master and through Spark Connect, side by side: each
    application holds one of the worker's two cores, and most of a run is waiting."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="run-on") as pool:
        yield {
            name: pool.submit(run_on, url, store_root, tmp_path_factory.mktemp(name))
            for name, url in (("standalone", standalone.url), ("connect", connect.url))
        }


@pytest.mark.timeout(CHILD_TIMEOUT + 300)
def test_standalone_cluster_gives_the_local_frames(
    runs: dict[str, Future[Path]], standalone: cluster.Standalone, local: Found
) -> None:
    out = runs["standalone"].result()
    about = json.loads((out / "session.json").read_text())
    assert (about["master"], about["connect"]) == (standalone.url, False)
    apps = cluster.completed_apps(standalone.ui)
    ours = [a for a in apps if a["name"] == "pulsar-lens"]
    assert ours and all(a["cores"] >= 1 for a in ours), apps
    assert_same(out, local)
    assert_executors_agree(out)


@pytest.mark.timeout(CHILD_TIMEOUT + 300)
def test_spark_connect_on_the_cluster_gives_the_local_frames(
    runs: dict[str, Future[Path]], standalone: cluster.Standalone, local: Found
) -> None:
    out = runs["connect"].result()
    # the server's own master: the plans ran on the standalone cluster's executors
    about = json.loads((out / "session.json").read_text())
    assert (about["master"], about["connect"]) == (standalone.url, True)
    apps = cluster.active_apps(standalone.ui)
    assert [a["cores"] for a in apps if a["name"] == "pulsar-lens-connect"] == [1], apps
    assert_same(out, local)
    assert_executors_agree(out)


def run_on(master: str, store_root: Path, folder: Path) -> Path:
    out = folder / "out"
    args = ["--master", master, "--store", str(store_root), "--out", str(out),
            "--hash-keys", str(HASH_KEYS), "--parts", str(PART_TOPICS), *PLUGINS]  # fmt: skip
    done = cluster.run_child(args, folder, timeout=CHILD_TIMEOUT)
    assert done.returncode == 0, done.stdout[-4000:]
    return out


def assert_executors_agree(out: Path) -> None:
    """The executors' sticky-key hashes and bulk-answer parts are ours."""
    hashes = json.loads((out / "hashes.json").read_text())
    assert hashes["keys"] == HASH_KEYS, hashes
    assert hashes["differing"] == 0, hashes
    parts = json.loads((out / "parts.json").read_text())  # the poll's answers read there
    assert parts == {"answers": 2, "differ": []}, parts


def assert_same(out: Path, local: Found) -> None:
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(local)
    for slug, (frames, summary) in local.items():
        folder = out / slug
        assert sorted(p.stem for p in folder.glob("*.parquet")) == sorted(frames)
        for name, frame in frames.items():
            found = pd.read_parquet(folder / f"{name}.parquet")
            pd.testing.assert_frame_equal(found, frame, obj=f"{slug} {name}")
        assert json.loads((folder / "summary.json").read_text()) == json.loads(summary)


def write_store(store: Store, rng: random.Random) -> None:
    """POLLS polls, 30 s apart, that give every analysis something to find: bundles moving
    between two brokers, a Failover subscription on four partitions whose consumers come and
    go, a Key_Shared subscription with draining hashes and sampled keys."""
    previous: Snapshot | None = None
    for poll in range(POLLS):
        polled_topics = topics(poll, rng)
        snapshot = make_snapshot(
            30.0 * poll,
            brokers=tuple(BrokerRecord(b, num_bundles=2) for b in BROKERS),
            bundles=bundles(poll, polled_topics),
            topics=polled_topics,
            subscriptions=(*failover_subscriptions(poll), keyshared_subscription(poll)),
            consumers=(*failover_consumers(poll), *keyshared_consumers(poll)),
            draining_hashes=draining(poll, rng),
        )
        store.write(snapshot, events=diff(previous, snapshot) if previous else ())
        store.write_table("key_samples", key_samples(snapshot, rng))
        previous = snapshot


def owner(bundle: int, poll: int) -> str:
    """Bundle i moves to the other broker every 4 polls (an unload that moved it)."""
    return BROKERS[(bundle + poll // 4) % 2]


def bundles(poll: int, topics: tuple[TopicRecord, ...]) -> tuple[BundleRecord, ...]:
    """The namespace's four bundles, each with the topics and rates of its topics."""
    rows = []
    for i, (lo, hi) in enumerate(itertools.pairwise(BOUNDARIES)):
        name = bundle_name(lo, hi)
        mine = [t for t in topics if t.bundle == name]
        rows.append(
            BundleRecord(
                NS,
                "public",
                name,
                lo,
                hi,
                owner_broker=owner(i, poll),
                topic_count=len(mine),
                msg_rate_in=sum(t.msg_rate_in or 0.0 for t in mine),
                msg_rate_out=sum(t.msg_rate_out or 0.0 for t in mine),
            )
        )
    return tuple(rows)


def topics(poll: int, rng: random.Random) -> tuple[TopicRecord, ...]:
    rows = []
    for index, name in enumerate((ORDERS, *partition_names(PAYMENTS, 4))):
        bundle = topic_bundle(BOUNDARIES, name)
        rows.append(
            TopicRecord(
                name,
                "public",
                NS,
                partitioned_topic=PAYMENTS if index else None,
                partition_index=index - 1,
                bundle=bundle.name,
                owner_broker=owner(BOUNDARIES.index(bundle.lower), poll),
                msg_rate_in=float(rng.randint(10, 500)),
                msg_rate_out=float(rng.randint(10, 500)),
            )
        )
    return tuple(rows)


def failover_members(poll: int) -> tuple[FailoverConsumer, ...]:
    """f1 and f2 always; f3 for polls 3-7; f1 gone for polls 9-10."""
    names = ["f2"] + (["f1"] if poll not in (9, 10) else []) + (["f3"] if 3 <= poll <= 7 else [])
    return tuple(FailoverConsumer(n) for n in sorted(names))


def failover_subscriptions(poll: int) -> tuple[SubscriptionRecord, ...]:
    members = failover_members(poll)
    rows = []
    for partition in partition_names(PAYMENTS, 4):
        active = select_active_consumer(partition, members)
        rows.append(
            SubscriptionRecord(
                partition,
                "fo",
                type="Failover",
                msg_backlog=poll * 3,
                active_consumer_name=active.name if active else None,
                consumer_count=len(members),
            )
        )
    return tuple(rows)


def failover_consumers(poll: int) -> tuple[ConsumerRecord, ...]:
    return tuple(
        ConsumerRecord(partition, "fo", m.name)
        for partition in partition_names(PAYMENTS, 4)
        for m in failover_members(poll)
    )


def keyshared_ranges(poll: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """k1 and k2 split the hash space; k3 joins at poll 6 and takes a slice of k2's half."""
    if poll < 6:
        return {"k1": ((0, 32767),), "k2": ((32768, 65535),)}
    return {"k1": ((0, 32767),), "k2": ((32768, 49151),), "k3": ((49152, 65535),)}


def keyshared_subscription(poll: int) -> SubscriptionRecord:
    return SubscriptionRecord(
        ORDERS,
        "ks",
        type="Key_Shared",
        key_shared_mode="AUTO_SPLIT",
        consumer_count=len(keyshared_ranges(poll)),
    )


def keyshared_consumers(poll: int) -> tuple[ConsumerRecord, ...]:
    return tuple(
        ConsumerRecord(ORDERS, "ks", name, hash_ranges=ranges)
        for name, ranges in keyshared_ranges(poll).items()
    )


def draining(poll: int, rng: random.Random) -> tuple[DrainingHashRecord, ...]:
    held = [(c, h) for c in ("k1", "k2") for h in (7, 2862, 45436)]
    return tuple(
        DrainingHashRecord(ORDERS, "ks", c, h, rng.randint(1, 40), rng.randint(0, 5))
        for c, h in held
        if rng.random() < 0.5
    )


def key_samples(snapshot: Snapshot, rng: random.Random) -> pa.Table:
    """Keys sampled on orders during the poll, skewed towards a few hot keys."""
    keys = [f"customer-{min(int(rng.expovariate(0.15)), 60)}" for _ in range(80)]
    return records_to_table(
        "key_samples",
        [KeySampleRecord(ORDERS, k, sticky_key_hash(k.encode())) for k in keys],
        snapshot_id=snapshot_id(snapshot),
        collected_at=snapshot.collected_at,
        cluster=snapshot.cluster,
    )
