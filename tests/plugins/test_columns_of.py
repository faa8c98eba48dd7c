"""Plugins that name the columns they read of a table (`columns_of`) are handed only those
(and `snapshot_id`, `collected_at`), and analyse a store exactly as with every column."""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs, Result
from pulsar_lens.core.model import SCHEMAS, BundleRecord, DrainingHashRecord, TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.incident_timeline import IncidentTimeline
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.builtin.unload_latency import UnloadLatency
from pulsar_lens.plugins.runner import load_inputs, validate_params
from pulsar_lens.plugins.steps import with_steps
from pulsar_lens.plugins.testing import make_snapshot
from tests.plugins.test_newest_poll_inputs import assert_analysed_alike
from tests.plugins.vectorised_cases import cluster_polls

PLUGINS = (BundleOwnership, IncidentTimeline, FailoverAssignment, StuckHashes, SubscriptionStatus)
REQUIRED: dict[str, type[AnalysisPlugin]] = {
    p.name: p for p in (BundleOwnership, UnloadLatency, StuckHashes)
}


def inputs_of(plugin: AnalysisPlugin, store: Store) -> Inputs:
    """What the runner hands `plugin`, with the results of the plugins it requires."""
    loaded = load_inputs(plugin, store)
    results: dict[str, Result] = {}
    for slug in plugin.requires:
        other = REQUIRED[slug]()
        results[slug] = other.analyze(inputs_of(other, store), validate_params(other, {}))
    found = Inputs(loaded.tables, loaded.snapshots, results, step_tables=loaded.step_tables)
    return with_steps(plugin, found, validate_params(plugin, {}))


HALVES = (
    ("0x00000000_0x80000000", 0, 0x80000000),
    ("0x80000000_0xffffffff", 0x80000000, 0xFFFFFFFF),
)


def topics_of(subscriptions: list[Any], poll: int) -> tuple[list[TopicRecord], list[BundleRecord]]:
    """The topics of a poll's subscriptions, in two bundles a namespace whose owner moves every
    other poll, and producers that reconnect every third poll."""
    since = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=90 * (poll // 3))
    owner = [f"b{(poll // 2 + k) % 2 + 1}:8080" for k in range(2)]
    topics, namespaces = {}, set()
    for sub in subscriptions:
        tenant, local = sub.topic.split("://")[1].split("/")[:2]
        namespace, half = f"{tenant}/{local}", zlib.crc32(sub.topic.encode()) % 2
        namespaces.add((tenant, namespace))
        topics[sub.topic] = TopicRecord(
            sub.topic,
            tenant,
            namespace,
            bundle=HALVES[half][0],
            owner_broker=owner[half],
            msg_rate_in=float(poll % 5),
            msg_rate_out=float(poll % 3),
            producer_count=1,
            subscription_count=1,
            oldest_publisher_since=since,
        )
    bundles = [
        BundleRecord(namespace, tenant, name, low, high, owner_broker=owner[k])
        for tenant, namespace in sorted(namespaces)
        for k, (name, low, high) in enumerate(HALVES)
    ]
    return list(topics.values()), bundles


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Polls of consumers that come, go and reconnect (`connectedSince` moving on)."""
    store = Store(Path(tmp_path_factory.mktemp("store")))
    for i, poll in enumerate(cluster_polls(5, 60, 6, "4.0.7")):
        polled = {k: v for k, v in poll.items() if k != "key_samples"}
        subs = polled["subscriptions"]
        draining = [  # hashes that drain, some for good (stuck-hashes' rows)
            DrainingHashRecord(s.topic, s.subscription, "w1", 7 + (i % 2) * j, 2, i)
            for j, s in enumerate(subs[:6])
        ]
        topics, bundles = topics_of(polled["subscriptions"], i)
        store.write(
            make_snapshot(
                i * 30.0, **polled, draining_hashes=draining, topics=topics, bundles=bundles
            )
        )
    return store


@pytest.mark.parametrize("kind", PLUGINS, ids=[p.name for p in PLUGINS])
def test_a_plugin_reading_some_columns_analyses_as_with_all(
    store: Store, kind: type[AnalysisPlugin]
) -> None:
    class Wide(kind):  # type: ignore[valid-type,misc]
        columns_of: ClassVar[dict[str, tuple[str, ...]]] = {}

    plugin, wide = kind(), Wide()
    narrow_inputs, wide_inputs = inputs_of(plugin, store), inputs_of(wide, store)
    narrow_tables, wide_tables = load_inputs(plugin, store), load_inputs(wide, store)
    for table, columns in plugin.columns_of.items():
        handed = _read(narrow_tables, table)
        assert list(handed.columns) == [
            c for c in SCHEMAS[table].names if c in {"snapshot_id", "collected_at", *columns}
        ]
        assert len(handed) == len(_read(wide_tables, table))
        assert len(handed) > 0 or table == "events"  # this store's polls had no events
        if table == "consumers" and "connected_since" in columns:
            assert handed["connected_since"].notna().any()
    assert_analysed_alike(plugin, narrow_inputs, wide_inputs)


def _read(inputs: Inputs, table: str) -> Any:
    """The rows of `table` a plugin was handed: over its steps' window when steps read it."""
    if inputs.step_tables is not None and table in inputs.step_tables:
        return inputs.step_tables[table]
    return inputs.history(table)
