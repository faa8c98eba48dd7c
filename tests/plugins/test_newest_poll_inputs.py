"""Plugins that read only the newest poll of some tables (`history_of` 1) analyse a store
exactly as when the runner read those tables over their whole window."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs
from pulsar_lens.core.model import DrainingHashRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import load_inputs, validate_params
from pulsar_lens.plugins.testing import make_snapshot
from tests.plugins.vectorised_cases import cluster_polls

PLUGINS = (FailoverAssignment, SubscriptionStatus, StickyRanges, StuckHashes)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(Path(tmp_path_factory.mktemp("store")))
    for i, poll in enumerate(cluster_polls(3, 60, 4, "4.0.7")):
        subs = poll["subscriptions"]
        draining = [
            DrainingHashRecord(s.topic, s.subscription, "w1", 7 + i, 2, i) for s in subs[:5]
        ]
        polled = {k: v for k, v in poll.items() if k != "key_samples"}  # a table of its own
        store.write(make_snapshot(i * 30.0, **polled, draining_hashes=draining))
    return store


@pytest.mark.parametrize("kind", PLUGINS, ids=[p.name for p in PLUGINS])
def test_newest_poll_of_latest_only_tables_gives_the_same_analysis(
    store: Store, kind: type[AnalysisPlugin]
) -> None:
    class Wide(kind):  # type: ignore[valid-type,misc]
        history_of: ClassVar[dict[str, int]] = {}

    plugin, wide = kind(), Wide()
    narrow_inputs, wide_inputs = load_inputs(plugin, store), load_inputs(wide, store)
    for table in plugin.history_of:
        assert len(narrow_inputs.history(table)) == len(wide_inputs.latest(table)) > 0
        assert len(wide_inputs.history(table)) > len(wide_inputs.latest(table))
    assert_analysed_alike(plugin, narrow_inputs, wide_inputs)


def assert_analysed_alike(plugin: AnalysisPlugin, narrow: Inputs, wide: Inputs) -> None:
    """`plugin` gives the same frames, summary and parameter choices on both inputs."""
    params: Any = validate_params(plugin, {})
    mine, full = plugin.analyze(narrow, params), plugin.analyze(wide, params)
    for name, frame in full.frames.items():
        pd.testing.assert_frame_equal(mine.frames[name], frame, obj=name)
    assert mine.summary == full.summary
    assert plugin.param_choices(narrow) == plugin.param_choices(wide)
