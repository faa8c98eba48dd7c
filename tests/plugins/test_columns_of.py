"""Plugins that name the columns they read of a table (`columns_of`) are handed only those
(and `snapshot_id`, `collected_at`), and analyse a store exactly as with every column."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs, Result
from pulsar_lens.core.model import SCHEMAS, DrainingHashRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.incident_timeline import IncidentTimeline
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.builtin.unload_latency import UnloadLatency
from pulsar_lens.plugins.runner import load_inputs, validate_params
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
    return Inputs(loaded.tables, loaded.snapshots, results)


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
        store.write(make_snapshot(i * 30.0, **polled, draining_hashes=draining))
    return store


@pytest.mark.parametrize("kind", PLUGINS, ids=[p.name for p in PLUGINS])
def test_a_plugin_reading_some_columns_analyses_as_with_all(
    store: Store, kind: type[AnalysisPlugin]
) -> None:
    class Wide(kind):  # type: ignore[valid-type,misc]
        columns_of: ClassVar[dict[str, tuple[str, ...]]] = {}

    plugin, wide = kind(), Wide()
    narrow_inputs, wide_inputs = inputs_of(plugin, store), inputs_of(wide, store)
    for table, columns in plugin.columns_of.items():
        handed = narrow_inputs.history(table)
        assert list(handed.columns) == [
            c for c in SCHEMAS[table].names if c in {"snapshot_id", "collected_at", *columns}
        ]
        assert len(handed) == len(wide_inputs.history(table)) > 0
        if table == "consumers" and "connected_since" in columns:
            assert handed["connected_since"].notna().any()
    assert_analysed_alike(plugin, narrow_inputs, wide_inputs)
