"""Frame shaping for the pages, on the tables of a written scenario store."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from core.store import Store
from dashboard import frames, keyshared, navigation
from plugins.registry import discover
from tests.dashboard.scenario import C1_RANGES, C2_RANGES, DRAINING, EVENTS, PAYMENTS


def _latest(store: Store, name: str) -> pd.DataFrame:
    return store.read_latest(name).to_pandas()


def test_compute_poll_status_flags_stale_and_partial_polls(store_dir) -> None:
    from tests.dashboard.scenario import write_scenario

    store = write_scenario(store_dir, last_age=100.0, partial=True)
    now = dt.datetime.now(dt.UTC)
    status = frames.compute_poll_status(store.snapshots(), now=now, interval_seconds=10)
    assert status is not None
    assert status.stale and status.partial
    assert status.polls == 3
    assert status.row_counts["topics"] == 6
    assert list(status.errors["status"]) == [503]
    fresh = frames.compute_poll_status(store.snapshots(), now=now, interval_seconds=60)
    assert fresh is not None and not fresh.stale


def test_compute_poll_status_of_an_empty_store_is_none(store_dir) -> None:
    index = Store(store_dir).snapshots()
    assert (
        frames.compute_poll_status(index, now=dt.datetime.now(dt.UTC), interval_seconds=1) is None
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(4, "4s"), (185, "3m 5s"), (7800, "2h 10m"), (273600, "3d 4h")]
)
def test_format_age(seconds: float, text: str) -> None:
    assert frames.format_age(seconds) == text


def test_compute_namespaces_counts_bundles_owners_and_topics(scenario: Store) -> None:
    out = frames.compute_namespaces(_latest(scenario, "bundles"), _latest(scenario, "topics"))
    row = out.iloc[0]
    assert (row["namespace"], row["bundles"], row["owned"], row["topics"]) == (
        "public/default",
        4,
        4,
        6,
    )
    assert row["owners"] == "broker-a:8080, broker-b:8080"


def test_ownership_changes_finds_the_moved_bundle(scenario: Store) -> None:
    bundles = scenario.read_history("bundles", snapshots=10).to_pandas()
    changes = frames.ownership_changes(frames.ownership_history(bundles))
    assert list(changes["bundle_key"]) == ["public/default/0x40000000_0x80000000"]
    assert list(zip(changes["before"], changes["after"], strict=True)) == [
        ("broker-a:8080", "broker-b:8080")
    ]


def test_failover_view_matches_the_scenario(scenario: Store) -> None:
    subs = _latest(scenario, "subscriptions")
    label = frames.failover_subscriptions(subs)[0]
    assert label == f"{EVENTS} | events-fo"
    history = scenario.read_history("subscriptions", snapshots=10).to_pandas()
    view = frames.compute_failover_view(subs, _latest(scenario, "consumers"), history, label)
    active = view.assignment[view.assignment["active"]]
    assert list(active["consumer_name"]) == ["ev-1", "ev-2", "ev-2"]
    assert dict(zip(view.per_consumer["consumer_name"], view.per_consumer["partitions"],
                    strict=True)) == {"ev-2": 2, "ev-1": 1}  # fmt: skip
    assert list(view.flaps["changes"]) == [0, 0, 1]
    assert list(view.pip392["modulo"]) == ["ev-1", "ev-2", "ev-1"]


def test_key_shared_view_reads_ranges_shares_and_draining(scenario: Store) -> None:
    subs = _latest(scenario, "subscriptions")
    listed = keyshared.key_shared_subscriptions(subs)
    label = listed["label"].iloc[0]
    assert label == f"{PAYMENTS} | payments-ks"  # the one with draining hashes comes first
    view = keyshared.compute_view(
        subs, _latest(scenario, "consumers"), _latest(scenario, "draining_hashes"), label
    )
    assert view.kind == "consistent"
    assert len(view.ranges) == len(C1_RANGES) + len(C2_RANGES)
    assert view.shares["hashes"].sum() == 65535
    assert list(view.draining["hash"]) == list(DRAINING)
    assert view.imbalance == pytest.approx(view.shares["share"].max() * 2)


def test_selector_kind_reads_mode_and_range_bounds() -> None:
    auto = pd.DataFrame({"consumer_name": ["a"], "start": [0], "end": [65536]})
    assert keyshared.selector_kind(auto, "AUTO_SPLIT") == "auto-split"
    assert keyshared.selector_kind(auto, "STICKY") == "sticky"
    ring = pd.DataFrame({"consumer_name": ["a"], "start": [1], "end": [65535]})
    assert keyshared.selector_kind(ring, None) == "consistent"


def test_lookup_key_uses_the_broker_hash_of_the_docs_example() -> None:
    ranges = pd.DataFrame(
        [("c1", s, e) for s, e in C1_RANGES] + [("c2", s, e) for s, e in C2_RANGES],
        columns=keyshared.RANGE_COLUMNS,
    )
    draining = pd.DataFrame({"consumer_name": ["c1"], "hash": [2862]})
    # keys "9" and "3" are the 4.0 docs' draining hashes 2862 and 45436
    found = keyshared.lookup_key("9", ranges, draining, "consistent")
    assert (found.hash, found.consumer, found.draining_for) == (2862, "c2", "c1")
    assert keyshared.lookup_key("3", ranges, draining, "consistent").hash == 45436


def test_what_if_lanes_names_the_receiving_consumer() -> None:
    now = pd.DataFrame({"consumer_name": ["a"], "start": [1], "end": [65535]})
    after = pd.DataFrame({"consumer_name": ["a", "b"], "start": [1, 100], "end": [99, 65535]})
    moves = pd.DataFrame({"start": [100], "end": [65535], "after": ["b#1"]})
    lanes = keyshared.what_if_lanes(now, after, moves)
    assert list(lanes["lane"]) == ["now", "what-if", "what-if", "moves"]
    assert lanes.iloc[-1]["consumer_name"] == "b"


def test_page_plan_gives_every_plugin_without_a_dedicated_page_its_own() -> None:
    registry = discover(entry_points=False, plugin_dirs=())
    plan = navigation.page_plan(registry)
    assert [p.url_path for p in plan["Cluster"]][:2] == ["overview", "key-shared"]
    generic = {p.target for p in plan.get("Analyses", ())}
    assert generic == {p.name for p in registry if p.name not in navigation.DEDICATED}
    assert all(p.kind == "analysis" for p in plan.get("Analyses", ()))
    assert [p.title for p in plan["About"]] == ["Plugins"]
