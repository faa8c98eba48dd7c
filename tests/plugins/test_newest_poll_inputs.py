"""Plugins that read only the newest poll of some tables (`history_of` 1) analyse a store
exactly as when the runner read those tables over their whole window."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs
from pulsar_lens.core.model import DrainingHashRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin import failover_assignment
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import load_inputs, run, validate_params
from pulsar_lens.plugins.steps import with_steps
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
    if plugin.step_inputs:  # the steps, from each side's whole-window step tables
        narrow, wide = with_steps(plugin, narrow, params), with_steps(plugin, wide, params)
    mine, full = plugin.analyze(narrow, params), plugin.analyze(wide, params)
    for name, frame in full.frames.items():
        pd.testing.assert_frame_equal(mine.frames[name], frame, obj=name)
    assert mine.summary == full.summary
    assert plugin.param_choices(narrow) == plugin.param_choices(wide)


def test_inputs_latest_is_found_once_and_each_caller_gets_its_own_frame() -> None:
    """`latest` filters a table once per `Inputs`; a caller that changes what it got changes
    nothing another caller gets; a worker's pickled copy carries no kept rows."""
    snapshots = pd.DataFrame({"snapshot_id": ["a", "b"]})
    topics = pd.DataFrame(
        {"snapshot_id": pd.array(["a", "b", None, "b"], dtype="string"), "n": [1, 2, 3, 4]}
    )
    only_b = pd.DataFrame({"snapshot_id": ["b", "b"], "n": [5, 6]})
    data = Inputs({"topics": topics, "brokers": only_b}, snapshots)
    first = data.latest("topics")
    assert first["n"].tolist() == [2, 4] and list(first.index) == [0, 1]
    first["n"] = 0
    first["extra"] = 1
    again = data.latest("topics")
    assert again["n"].tolist() == [2, 4] and "extra" not in again
    assert again is not first
    assert data.latest("brokers")["n"].tolist() == [5, 6]  # every row newest: no filter
    assert set(data._latest) == {"topics", "brokers"}
    copied = pickle.loads(pickle.dumps(data))
    assert copied._latest == {} and "_latest" not in data.__getstate__()
    assert copied.latest("topics")["n"].tolist() == [2, 4]
    assert topics["n"].tolist() == [1, 2, 3, 4]
    empty = Inputs({"topics": topics}, snapshots.iloc[0:0])
    assert empty.latest("topics").empty


def test_what_analyze_and_param_choices_derive_alike_is_found_once_a_run(store: Store) -> None:
    """`Inputs.derived` computes a value once per `Inputs` and key; the runner hands analyze and
    param_choices the same `Inputs`, so failover-assignment finds its groups once a run; a
    worker's pickled copy finds them again."""
    calls: list[str] = []

    def counted(key: str) -> Any:
        calls.append(key)
        return [key]

    data = Inputs({}, pd.DataFrame({"snapshot_id": ["a"]}))
    assert data.derived("x", lambda: counted("x")) is data.derived("x", lambda: counted("x"))
    assert data.derived("y", lambda: counted("y")) == ["y"] and calls == ["x", "y"]
    copied = pickle.loads(pickle.dumps(data))
    assert copied.derived("x", lambda: counted("x")) == ["x"] and calls == ["x", "y", "x"]

    found = []
    real = failover_assignment.group_rows

    def group_rows(*args: Any) -> Any:
        found.append(1)
        return real(*args)

    plugin = FailoverAssignment()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(failover_assignment, "group_rows", group_rows)
        output = run(plugin, store, None, use_cache=False, use_stored=False, views=False)
    assert len(found) == 1 and output.choices["subscription"][1:]
    assert output.choices == plugin.param_choices(load_inputs(plugin, store))
