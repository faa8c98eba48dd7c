"""One cluster's view of a store several clusters share: index, newest snapshots, rows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pulsar_lens.core.clusterview import ClusterView, clusters_in
from pulsar_lens.core.store import Store
from tests.core.snapshots import T0, make_snapshot


def shared_store(tmp_path: Path) -> Store:
    """east polled 3 times with 2 topics, west 5 times with 4 topics, interleaved in time."""
    store = Store(tmp_path)
    for i in range(5):
        at = T0 + dt.timedelta(seconds=10 * i)
        if i < 3:
            store.write(make_snapshot(at=at, cluster="east", topics=2))
        store.write(make_snapshot(at=at + dt.timedelta(seconds=1), cluster="west", topics=4))
    return store


def test_view_index_holds_only_its_cluster(tmp_path: Path) -> None:
    store = shared_store(tmp_path)
    east = ClusterView(store, "east").snapshots()
    assert list(east["cluster"]) == ["east"] * 3
    assert east["collected_at"].is_monotonic_increasing


def test_view_newest_snapshots_are_its_own_even_when_another_polled_last(
    tmp_path: Path,
) -> None:
    store = shared_store(tmp_path)
    east = ClusterView(store, "east")
    newest = east.snapshots(limit=2)
    assert list(newest["cluster"]) == ["east", "east"]
    assert newest["collected_at"].iloc[-1] == T0 + dt.timedelta(seconds=20)
    assert east.latest_snapshot_id() == newest["snapshot_id"].iloc[-1]
    assert east.latest_snapshot_id() != store.latest_snapshot_id()


def test_view_reads_only_its_rows(tmp_path: Path) -> None:
    store = shared_store(tmp_path)
    east, west = ClusterView(store, "east"), ClusterView(store, "west")
    assert east.read_latest("topics").num_rows == 2
    assert west.read_latest("topics").num_rows == 4
    assert set(east.read("topics", since=T0)["cluster"].to_pylist()) == {"east"}
    assert east.read("topics", since=T0).num_rows == 3 * 2
    assert west.read_history("topics", snapshots=2).num_rows == 2 * 4


def test_view_of_an_unknown_cluster_is_empty(tmp_path: Path) -> None:
    view = ClusterView(shared_store(tmp_path), "north")
    assert view.snapshots(limit=3).empty and view.latest_snapshot_id() is None
    assert view.read_latest("topics").num_rows == 0


def test_clusters_in_lists_the_newest_polls_cluster_first(tmp_path: Path) -> None:
    store = shared_store(tmp_path)
    store.write(make_snapshot(at=T0 + dt.timedelta(minutes=5), cluster="east"))
    assert clusters_in(store.snapshots()) == ["east", "west"]
    assert clusters_in(store.snapshots().iloc[0:0]) == []


def test_a_pinned_view_keeps_its_newest_snapshot_while_polls_go_on(tmp_path: Path) -> None:
    """The analyses of one round all see the snapshot that was newest when it began."""
    store = shared_store(tmp_path)
    pinned = ClusterView(store, "east").pinned()
    before = pinned.latest_snapshot_id()
    store.write(make_snapshot(at=T0 + dt.timedelta(seconds=60), cluster="east", topics=3))
    assert pinned.latest_snapshot_id() == before
    assert ClusterView(store, "east").latest_snapshot_id() != before
    assert list(pinned.snapshots(limit=5)["collected_at"]) == [
        T0 + dt.timedelta(seconds=10 * i) for i in range(3)
    ]
    assert pinned.read_latest("topics").num_rows == 2
    assert ClusterView(store, "north").pinned().snapshots().empty  # nothing to pin: as it was
