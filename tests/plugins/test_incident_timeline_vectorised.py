"""incident-timeline's row builders, vectorised, give exactly what the per-group builders they
replaced gave (tests/plugins/reference_incident_timeline.py): the same rows in the same order,
and the same timeline frame and summary, on synthetic clusters of several sizes (consumers
coming, going and reconnecting, backlogs crossing thresholds, missing values, hostile names)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pulsar_lens.api import Inputs, Result
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.incident_timeline import IncidentTimeline, clients, frames
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.unload_latency import UnloadLatency
from pulsar_lens.plugins.runner import validate_params
from tests.plugins import reference_incident_timeline as reference
from tests.plugins.vectorised_cases import cases

TABLES = ("subscriptions", "consumers", "events", "bundles", "topics", "brokers", "probes")
CASES = list(cases((*TABLES, "draining_hashes")))
THRESHOLDS = (1, 10, 50, 100, 10_000)


@contextmanager
def old_builders() -> Iterator[None]:
    """incident-timeline with the row builders it had before they were vectorised."""
    saved = (clients.backlog_rows, clients.reconnect_rows, clients.NewestTypes)
    clients.backlog_rows = reference.backlog_rows  # type: ignore[assignment]
    clients.reconnect_rows = reference.reconnect_rows  # type: ignore[assignment]
    clients.NewestTypes = reference.AllTypes  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        clients.backlog_rows, clients.reconnect_rows, clients.NewestTypes = saved


def with_results(inputs: Inputs) -> Inputs:
    """`inputs` with the results of the plugins incident-timeline requires."""
    ownership = BundleOwnership().analyze(inputs, validate_params(BundleOwnership(), {}))
    latency_inputs = Inputs(inputs.tables, inputs.snapshots, {"bundle-ownership": ownership})
    latency = UnloadLatency().analyze(latency_inputs, validate_params(UnloadLatency(), {}))
    stuck = StuckHashes().analyze(inputs, validate_params(StuckHashes(), {}))
    results: dict[str, Result] = {
        "bundle-ownership": ownership,
        "unload-latency": latency,
        "stuck-hashes": stuck,
    }
    return Inputs(inputs.tables, inputs.snapshots, results)


def assert_same_rows(new: list[dict[str, Any]], old: list[dict[str, Any]]) -> None:
    assert new == old
    assert [list(map(type, r.values())) for r in new] == [list(map(type, r.values())) for r in old]
    pd.testing.assert_frame_equal(frames.to_frame(new), frames.to_frame(old))


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
def test_incident_timeline_builders_equal_the_reference(name: str, inputs: Inputs) -> None:
    subs, consumers = inputs.history("subscriptions"), inputs.history("consumers")
    types, every = clients.NewestTypes(subs), reference.types(subs)
    named = subs[subs["topic"].notna() & subs["subscription"].notna()] if len(subs) else subs
    keys = {(str(t), str(s)) for t, s in zip(named["topic"], named["subscription"], strict=True)}
    assert types.of(keys) == {k: v for k, v in every.items() if k in keys}
    assert types.of({(None, "s"), ("t", None)}) == {}
    assert_same_rows(
        clients.reconnect_rows(consumers, inputs.snapshots, types),
        reference.reconnect_rows(consumers, inputs.snapshots, every),
    )
    for threshold in THRESHOLDS:
        assert_same_rows(
            clients.backlog_rows(subs, threshold), reference.backlog_rows(subs, threshold)
        )


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
@pytest.mark.parametrize("params", [{}, {"backlog_threshold": 20}, {"window": 3}])
def test_incident_timeline_vectorised_equals_the_reference(
    name: str, inputs: Inputs, params: dict[str, Any]
) -> None:
    plugin, full = IncidentTimeline(), with_results(inputs)
    validated = validate_params(plugin, params)
    new = plugin.analyze(full, validated)
    with old_builders():
        old = plugin.analyze(full, validated)
    pd.testing.assert_frame_equal(new.frames["events"], old.frames["events"])
    assert new.summary == old.summary


def test_the_cases_reach_every_vectorised_kind() -> None:
    """Reconnects and backlogs both ways come up in the cases."""
    kinds: set[str] = set()
    for _, inputs in CASES:
        subs, consumers = inputs.history("subscriptions"), inputs.history("consumers")
        rows = clients.reconnect_rows(consumers, inputs.snapshots, clients.NewestTypes(subs))
        rows += clients.backlog_rows(subs, 50)
        kinds |= {r["kind"] for r in rows}
    assert kinds == {"consumer_reconnected", "backlog_over", "backlog_under"}


def _odd_subscriptions() -> pd.DataFrame:
    """Missing names and backlogs, a backlog as text, ties in time, rows out of time order."""
    when = pd.to_datetime(["2026-01-01T00:01Z", "2026-01-01T00:00Z"] * 4, utc=True)
    return pd.DataFrame(
        {
            "topic": ["t1", "t1", None, "t2", "t2", "t1", "t2", "t3"],
            "subscription": ["s", "s", "s", None, "s", "s", "s", "s"],
            "collected_at": when,
            "msg_backlog": pd.array([5, np.nan, 30, 40, 20, 15, None, 50], dtype=object),
            "type": ["Shared", None, "Failover", "Key_Shared", None, "Failover", "Shared", None],
        }
    )


@pytest.mark.parametrize("cast", ["object", "float", "Int64"])
def test_backlog_rows_with_missing_values_equal_the_reference(cast: str) -> None:
    subs = _odd_subscriptions()
    if cast != "object":
        subs["msg_backlog"] = subs["msg_backlog"].astype("float" if cast == "float" else cast)
    named = {("t1", "s"), ("t2", "s"), ("t3", "s")}
    assert clients.NewestTypes(subs).of(named) == {
        k: v for k, v in reference.types(subs).items() if k in named
    }
    for threshold in (1, 10, 20, 30, 41):
        assert_same_rows(
            clients.backlog_rows(subs, threshold), reference.backlog_rows(subs, threshold)
        )
