"""AppTest runs of the real entry script and every page, on a store written to a tmp dir."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.collectors.notes import REFUSED
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.limits import MAX_REPLICA_POINTS
from pulsar_lens.core.model import EndpointError
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.dashboard.scenario import (
    C2_RANGES,
    DRAINING,
    HOT_KEYS,
    make_poll,
    write_key_samples,
    write_scenario,
)
from tests.markdown import shown

AppRunner = Callable[..., AppTest]
PageRunner = Callable[[str], AppTest]

PAGES = {"overview.py": "Overview", "plugins.py": "Plugins"}
PLUGIN_PAGES = {
    "key-shared-map": "Key_Shared",
    "stuck-hashes": "Stuck hashes",
    "failover-assignment": "Failover",
    "bundle-ownership": "Bundle ownership",
    "unload-latency": "Bundles & unloads",
    "subscription-status": "Subscriptions",
    "sticky-ranges": "Sticky hash ranges",
}
KS = "analysis_key-shared-map"


def _frame(at: AppTest, *columns: str) -> pd.DataFrame:
    """The first dataframe on the page that has all these columns."""
    for element in at.dataframe:
        if set(columns) <= set(element.value.columns):
            return element.value
    raise AssertionError(f"no dataframe with columns {columns}")


@pytest.mark.parametrize("page", sorted(PAGES))
def test_app_page_renders_recorded_snapshots(scenario: Store, app: AppRunner, page: str) -> None:
    at = app(page)
    assert not at.exception
    assert [t.value for t in at.title] == [PAGES[page]]
    assert "**Cluster** standalone" in [m.value for m in at.sidebar.markdown]


@pytest.mark.parametrize("slug", sorted(PLUGIN_PAGES))
def test_app_plugin_page_renders_the_stored_result(
    scenario: Store, plugin_page: PageRunner, slug: str
) -> None:
    plugins = list(discover(entry_points=False, plugin_dirs=()))
    compute_results(scenario, plugins, results=ResultStore(scenario.root))
    at = plugin_page(slug)
    assert not at.exception and not at.error
    assert [t.value for t in at.title] == [PLUGIN_PAGES[slug]]
    assert any("analysed once when the snapshot arrived" in c.value for c in at.caption)


@pytest.mark.parametrize("slug", sorted(PLUGIN_PAGES))
def test_app_plugin_page_without_a_stored_result_analyses_on_demand(
    scenario: Store, plugin_page: PageRunner, slug: str
) -> None:
    at = plugin_page(slug)
    assert not at.exception and not at.error
    assert any("computed for these parameters" in c.value for c in at.caption)


@pytest.mark.parametrize("page", ["overview.py"])
def test_app_page_on_an_empty_store_says_to_start_collecting(
    store_dir: Path, app: AppRunner, page: str
) -> None:
    at = app(page)
    assert not at.exception
    assert any("pulsar-lens collect" in i.value for i in at.info)


@pytest.mark.parametrize("slug", sorted(PLUGIN_PAGES))
def test_app_plugin_page_on_an_empty_store_says_to_start_collecting(
    store_dir: Path, plugin_page: PageRunner, slug: str
) -> None:
    at = plugin_page(slug)
    assert not at.exception
    assert any("pulsar-lens collect" in i.value for i in at.info)


def test_app_overview_counts_the_newest_snapshot(scenario: Store, app: AppRunner) -> None:
    at = app()
    metrics = {shown(m.label): shown(m.value) for m in at.metric}
    assert metrics == {
        "Brokers": "2",
        "Namespaces": "1",
        "Bundles": "4",
        "Topics": "6",
        "Subscriptions": "6",
        "Consumers": "10",
    }
    assert any("succeeded" in s.value for s in at.success)


def test_app_overview_shows_a_stale_banner_when_polls_stop(store_dir: Path, app: AppRunner) -> None:
    write_scenario(store_dir, last_age=600.0)
    at = app()
    assert any("Polls have stopped" in e.value for e in at.error)
    assert any("Polls stopped" in e.value for e in at.sidebar.error)


def test_app_partial_snapshot_is_flagged_and_its_errors_listed(
    store_dir: Path, app: AppRunner
) -> None:
    write_scenario(store_dir, partial=True)
    at = app()
    assert any("partial" in w.value for w in at.warning)
    assert any("Partial snapshot" in w.value for w in at.sidebar.warning)
    errors = at.dataframe[-1].value
    assert list(errors["endpoint"]) == ["GET /admin/v2/broker-stats/load-report"]


def test_app_overview_says_what_the_answers_held_that_was_refused(
    store_dir: Path, app: AppRunner
) -> None:
    """A snapshot whose only errors are refused items is partial, and says why: not as
    failed calls, but as items of the answers left out, each line naming them."""
    store = write_scenario(store_dir, polls=1)
    newest = make_poll(dt.datetime.now(dt.UTC), 1)
    line = "topic: has a . or .. segment; left out (1 time(s), e.g. 'persistent://t/ns/..')"
    store.write(replace(newest, errors=(EndpointError(REFUSED, None, line),)))
    at = app()
    banner = " ".join(w.value for w in at.warning)
    assert "1 kind(s) of item in the cluster's answers were refused or cut" in banner
    assert "admin call(s) failed" not in banner
    assert "left out or cut" in banner  # the Overview's own errors section
    assert any("refused or cut" in w.value for w in at.sidebar.warning)
    errors = at.dataframe[-1].value
    assert list(errors["message"]) == [line]


BROKER_CALLS = {
    "/admin/v2/broker-stats/topics": "topics' stats",
    "/admin/v2/brokers/standalone/b1:8080/ownedNamespaces": "bundles it owns",
    "/admin/v2/broker-stats/load-report": "load report",
    "/admin/v2/broker-stats/metrics": "load manager's counters",
    "/admin/v2/brokers/version": "its version",
}


@pytest.mark.parametrize("path", sorted(BROKER_CALLS))
def test_app_overview_names_the_one_broker_call_that_failed(
    store_dir: Path, app: AppRunner, path: str
) -> None:
    error = EndpointError(f"GET http://b1:8080{path}", 503, "Service Unavailable")
    write_scenario(store_dir, failed=(error,))
    at = app()
    failed = _frame(at, "broker", "call", "missing")
    assert failed.to_dict("records") == [
        {"broker": "b1:8080", "call": f"GET {path}", "missing": failed["missing"].iloc[0]}
    ]
    assert BROKER_CALLS[path] in failed["missing"].iloc[0]
    others = [m for p, m in BROKER_CALLS.items() if p != path]
    said = " ".join([*(w.value for w in at.warning), failed["missing"].iloc[0]])
    assert not any(m in said for m in others)
    assert "topics, bundles and load" not in said


def test_app_key_shared_shows_the_subscription_with_most_draining_hashes_first(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    box = at.selectbox(key=f"{KS}_subscription")
    assert "persistent://public/default/payments | payments-ks" in box.options
    assert shown(at.subheader[0].value) == "persistent://public/default/payments | payments-ks"
    metrics = {shown(m.label): shown(m.value) for m in at.metric}
    assert metrics["Consumers"] == "2"
    assert metrics["Draining hashes"] == "5"
    shares = _frame(at, "consumer_name", "share", "fair_share")
    assert set(shares["consumer_name"]) == {"c1", "c2"}
    assert shares["hashes"].sum() == 65535


def test_app_key_shared_lookup_names_consumer_and_draining_holder(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    at.text_input(key=f"{KS}_key").input("9").run()
    metrics = {shown(m.label): shown(m.value) for m in at.metric}
    # key "9" hashes to 2862 (4.0 docs): now in c2's range, still draining for c1
    assert metrics["Sticky hash"] == "2862"
    assert metrics["Consumer"] == "c2"
    assert metrics["Draining for"] == "c1"
    assert any("still draining for c1" in shown(w.value) for w in at.warning)


def test_app_key_shared_picks_another_subscription(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    other = "persistent://public/default/orders | orders-ks"
    at.selectbox(key=f"{KS}_subscription").set_value(other).run()
    assert not at.exception
    assert shown(at.subheader[0].value) == other
    assert {shown(m.label): shown(m.value) for m in at.metric}["Draining hashes"] == "0"


def test_app_failover_compares_modulo_with_pip392(scenario: Store, plugin_page: PageRunner) -> None:
    at = plugin_page("failover-assignment")
    box = at.selectbox(key="analysis_failover-assignment_subscription")
    assert "events-fo @ persistent://public/default/events" in box.options
    parts = _frame(at, "modulo", "consistent_hashing", "changes")
    assert list(parts["changes"]) == [0, 0, 1]
    assert list(parts["modulo"]) == ["ev-1", "ev-2", "ev-1"]


def test_app_bundles_lists_the_owner_change(scenario: Store, plugin_page: PageRunner) -> None:
    at = plugin_page("bundle-ownership")
    events = _frame(at, "kind", "bundle", "before", "after")
    assert list(events["bundle"]) == ["0x40000000_0x80000000"]
    assert list(events["after"]) == ["broker-b:8080"]


def test_app_stuck_hashes_names_the_stuck_hashes(scenario: Store, plugin_page: PageRunner) -> None:
    at = plugin_page("stuck-hashes")
    hashes = _frame(at, "hash", "state", "polls_without_progress")
    assert set(hashes["state"]) == {"stuck"}
    assert sorted(hashes["hash"]) == sorted(DRAINING)


def test_app_key_shared_what_if_adding_a_consumer_shows_what_moves(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    at.text_input(key=f"{KS}_add_consumer").input("c3").run()
    assert not at.exception
    moved = next(m for m in at.metric if m.label.startswith("Hash space that moves"))
    assert shown(moved.label) == "Hash space that moves (add c3)"
    assert 0.0 < float(shown(moved.value).rstrip("%")) < 100.0
    per_consumer = _frame(at, "hashes_before", "hashes_after", "lost_hashes")
    assert list(per_consumer["consumer_name"]) == ["c1", "c2", "c3"]
    c3 = per_consumer[per_consumer["consumer_name"] == "c3"].iloc[0]
    assert c3["hashes_before"] == 0
    assert c3["hashes_after"] == per_consumer["lost_hashes"].sum()


def test_app_key_shared_what_if_removing_a_consumer_moves_all_its_hashes(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    at.selectbox(key=f"{KS}_remove_consumer").set_value("c1").run()
    per_consumer = _frame(at, "hashes_before", "hashes_after", "lost_hashes")
    c1 = per_consumer[per_consumer["consumer_name"] == "c1"].iloc[0]
    assert c1["hashes_after"] == 0
    assert c1["lost_hashes"] == c1["hashes_before"]
    moved = next(m for m in at.metric if m.label.startswith("Hash space that moves"))
    assert shown(moved.value) == f"{c1['lost_hashes'] / 65535:.1%}"


def test_app_key_shared_what_if_replica_points(scenario: Store, plugin_page: PageRunner) -> None:
    at = plugin_page("key-shared-map")
    at.number_input(key=f"{KS}_what_if_points").set_value(200).run()
    assert not at.exception
    labels = [shown(m.label) for m in at.metric]
    assert "Hash space that moves (replica points 200)" in labels


def test_app_key_shared_offers_no_more_replica_points_than_the_plugin_accepts(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    box = at.number_input(key=f"{KS}_what_if_points")
    assert box.max == MAX_REPLICA_POINTS


def test_app_key_shared_weighs_consumers_by_sampled_traffic(
    scenario: Store, plugin_page: PageRunner
) -> None:
    write_key_samples(scenario)
    at = plugin_page("key-shared-map")
    metrics = {shown(m.label): shown(m.value) for m in at.metric}
    owner = {
        key: "c2" if any(s <= sticky_key_hash(key.encode()) <= e for s, e in C2_RANGES) else "c1"
        for key in HOT_KEYS
    }
    expected = {c: sum(n for k, n in HOT_KEYS.items() if owner[k] == c) for c in ("c1", "c2")}
    assert metrics["Sampled messages"] == str(sum(HOT_KEYS.values()))
    worst = max(expected.values()) / sum(HOT_KEYS.values()) * 2
    assert metrics["Traffic imbalance"] == f"{worst:.2f}×"
    traffic = _frame(at, "consumer_name", "sampled_messages")
    assert dict(zip(traffic["consumer_name"], traffic["sampled_messages"], strict=True)) == expected


def test_app_key_shared_without_samples_says_how_to_get_them(
    scenario: Store, plugin_page: PageRunner
) -> None:
    at = plugin_page("key-shared-map")
    assert "Traffic imbalance" not in {m.label for m in at.metric}
    assert any("--sample-keys" in i.value for i in at.info)
