"""incident-timeline's row builders, vectorised, give exactly what the per-group builders they
replaced gave (tests/plugins/reference_incident_timeline.py): the same rows in the same order,
and the same timeline frame and summary, on synthetic clusters of several sizes (consumers
coming, going and reconnecting, backlogs crossing thresholds, missing values, hostile names)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pulsar_lens.api import Inputs, Result
from pulsar_lens.plugins.builtin import incident_timeline as timeline
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.incident_timeline import IncidentTimeline, clients, frames
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.unload_latency import UnloadLatency
from pulsar_lens.plugins.runner import validate_params
from pulsar_lens.plugins.steps import with_steps
from tests.plugins import reference_incident_timeline as reference
from tests.plugins import reference_timeline_window as window
from tests.plugins.swaps import swapped
from tests.plugins.vectorised_cases import cases

TABLES = ("subscriptions", "consumers", "events", "bundles", "topics", "brokers", "probes")
CASES = list(cases((*TABLES, "draining_hashes")))
THRESHOLDS = (1, 10, 50, 100, 10_000)


def old_builders() -> AbstractContextManager[None]:
    """incident-timeline with the row builders it had before they were vectorised."""
    return swapped(reference.REPLACED)


def with_results(inputs: Inputs) -> Inputs:
    """`inputs` with the results of the plugins incident-timeline requires."""
    params = validate_params(BundleOwnership(), {})
    ownership = BundleOwnership().analyze(with_steps(BundleOwnership(), inputs, params), params)
    latency_inputs = Inputs(inputs.tables, inputs.snapshots, {"bundle-ownership": ownership})
    latency = UnloadLatency().analyze(latency_inputs, validate_params(UnloadLatency(), {}))
    params = validate_params(StuckHashes(), {})
    stuck = StuckHashes().analyze(with_steps(StuckHashes(), inputs, params), params)
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
    types, every = window.NewestTypes(subs), reference.types(subs)
    named = subs[subs["topic"].notna() & subs["subscription"].notna()] if len(subs) else subs
    keys = {(str(t), str(s)) for t, s in zip(named["topic"], named["subscription"], strict=True)}
    assert types.of(keys) == {k: v for k, v in every.items() if k in keys}
    assert types.of({(None, "s"), ("t", None)}) == {}
    assert_same_rows(
        window.reconnect_rows(consumers, inputs.snapshots, types),
        reference.reconnect_rows(consumers, inputs.snapshots, every),
    )
    for threshold in THRESHOLDS:
        assert_same_rows(
            window.backlog_rows(subs, threshold), reference.backlog_rows(subs, threshold)
        )


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
@pytest.mark.parametrize("params", [{}, {"backlog_threshold": 20}, {"window": 3}])
def test_incident_timeline_vectorised_equals_the_reference(
    name: str, inputs: Inputs, params: dict[str, Any]
) -> None:
    plugin, full = IncidentTimeline(), with_results(inputs)
    validated = validate_params(plugin, params)
    new = plugin.analyze(with_steps(plugin, full, validated), validated)
    with old_builders():
        old = plugin.analyze(full, validated)
    pd.testing.assert_frame_equal(new.frames["events"], old.frames["events"])
    assert new.summary == old.summary


def test_the_cases_reach_every_vectorised_kind() -> None:
    """Reconnects and backlogs both ways come up in the cases."""
    kinds: set[str] = set()
    for _, inputs in CASES:
        subs, consumers = inputs.history("subscriptions"), inputs.history("consumers")
        rows = window.reconnect_rows(consumers, inputs.snapshots, window.NewestTypes(subs))
        rows += window.backlog_rows(subs, 50)
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
    assert window.NewestTypes(subs).of(named) == {
        k: v for k, v in reference.types(subs).items() if k in named
    }
    for threshold in (1, 10, 20, 30, 41):
        assert_same_rows(
            window.backlog_rows(subs, threshold), reference.backlog_rows(subs, threshold)
        )


NAMES = ("orders", "a&b=c?d#e", "é vents %20", "日本語 topic", "emoji 😀", "", None, np.nan)
KINDS = (
    "consumer_joined",
    "consumer_left",
    "active_consumer_changed",
    "hash_ranges_changed",
    "load_manager_unloaded",
    "bundle_owner_changed",
)


def _events(rng: np.random.Generator, count: int) -> pd.DataFrame:
    """Collector events of every kind `client_rows` reads and some it does not, with hostile,
    empty and missing names, topics that are not Pulsar names and texts over the limit."""
    topics = [
        f"persistent://t/ns/{NAMES[i]}" if i < 5 else NAMES[i]
        for i in rng.integers(0, len(NAMES), count)
    ]

    def texts(values: tuple[Any, ...]) -> list[Any]:
        return [values[i] for i in rng.integers(0, len(values), count)]

    ranges = ("[0, 65535]", "[[0, 10], [11, 20]] " * 30, None)
    return pd.DataFrame(
        {
            "at": pd.Timestamp("2026-01-01", tz="UTC")
            + pd.to_timedelta(rng.integers(0, 3600, count), unit="s"),
            "kind": texts(KINDS),
            "topic": topics,
            "subscription": texts(NAMES),
            "consumer_name": texts(NAMES),
            "before": texts((*NAMES, *ranges)),
            "after": texts((*NAMES, *ranges)),
        }
    )


@pytest.mark.parametrize("strings", ["object", "string[pyarrow]", "str"])
@pytest.mark.parametrize("count", [0, 1, 50, 2000])
def test_client_rows_equal_the_reference(count: int, strings: str) -> None:
    rng = np.random.default_rng(count)
    events = _events(rng, count)
    if strings != "object":
        for name in ("kind", "topic", "subscription", "consumer_name", "before", "after"):
            events[name] = events[name].astype(strings)
    named = events[["topic", "subscription"]].dropna()
    kinds = ("Key_Shared", "Failover", "Exclusive", "Shared", None)
    subs = named.assign(
        type=[kinds[i % len(kinds)] for i in range(len(named))],
        collected_at=pd.Timestamp("2026-01-01", tz="UTC"),
    )
    new = clients.client_rows(events, window.NewestTypes(subs))
    assert_same_rows(new, reference.client_rows(events, reference.AllTypes(subs)))
    if count > 50:
        pages = {frames.KEY_SHARED, frames.FAILOVER, frames.SUBSCRIPTIONS}
        assert {r["explained_by"] for r in new} == pages
        assert {r["kind"] for r in new} == set(KINDS[:4])


@pytest.mark.parametrize("count", [0, 1, 50, 2000])
def test_links_equal_the_reference(count: int) -> None:
    """Rows explained by every page, polls with and without a cluster, hostile and missing
    names: the same page, poll and link for each row as made one row at a time."""
    rng = np.random.default_rng(count)
    events = _events(rng, count)
    pages = list(timeline.links.PAGES)
    rows = events[["at", "kind", "topic", "subscription"]].assign(
        namespace=[("t/ns", "t/a&b", "", None)[i] for i in rng.integers(0, 4, count)],
        source="client",
        subject=None,
        detail="",
        explained_by=[pages[i] for i in rng.integers(0, len(pages), count)],
    )
    snapshots = pd.DataFrame(
        {
            "snapshot_id": ["sha256t:a", "s b", "s/c"],
            "collected_at": pd.to_datetime(
                ["2026-01-01T00:10Z", "2026-01-01T00:30Z", "2026-01-01T00:50Z"], utc=True
            ),
            "cluster": ["c 1", None, "c&2"],
        }
    )
    new = timeline.links.with_links(rows, snapshots)
    old = reference.with_links(rows, snapshots)
    pd.testing.assert_frame_equal(new, old)
    if count > 50:
        assert set(new["page"]) == set(timeline.links.PAGES.values())


@pytest.mark.parametrize("count", [0, 1, 40, 150])
def test_draining_rows_equal_the_reference(count: int) -> None:
    """Holders draining over runs of polls with gaps, at the first and the newest poll, with
    hostile and missing names, some stuck now; a history time no poll has."""
    rng = np.random.default_rng(count)
    times = pd.date_range("2026-01-01", periods=12, freq="30s", tz="UTC")
    snapshots = pd.DataFrame(
        {"snapshot_id": [f"s{i}" for i in range(len(times))], "collected_at": times}
    )
    holders = [(t, s, c) for t in NAMES[:4] for s in ("sub", None) for c in ("c1", "é 😀", None)]
    chosen = [holders[i] for i in rng.integers(0, len(holders), count)]
    at = [times[i] for i in rng.integers(0, len(times), count)]
    if count:
        at[-1] = times[0] - pd.Timedelta(seconds=5)  # before the window: no poll of it
    history = pd.DataFrame(
        {
            "topic": [h[0] for h in chosen],
            "subscription": [h[1] for h in chosen],
            "consumer_name": [h[2] for h in chosen],
            "hash": rng.integers(1, 65536, count),
            "collected_at": at,
            "unack_msgs": rng.integers(0, 9, count),
            "blocked_attempts": rng.integers(0, 9, count),
        }
    )
    hashes = history.drop_duplicates(["topic", "subscription", "consumer_name"]).assign(
        state=[
            ("stuck", "idle")[i % 2]
            for i in range(len(history.drop_duplicates(["topic", "subscription", "consumer_name"])))
        ]
    )
    new = frames.draining_rows(history, hashes, snapshots)
    assert_same_rows(new, reference.draining_rows(history, hashes, snapshots))
    if count >= 150:
        assert {r["kind"] for r in new} == {"draining_started", "draining_ended"}
        assert any("stuck now" in r["detail"] for r in new)
