"""AppTest runs of the real entry script and every page, on a store written to a tmp dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.hashing import sticky_key_hash
from core.store import Store
from dashboard.components import WHOLE_CLUSTER_UP_TO
from tests.dashboard.scenario import C2_RANGES, HOT_KEYS, write_key_samples, write_scenario

AppRunner = Callable[..., AppTest]

PAGES = {
    "overview.py": "Overview",
    "key_shared.py": "Key_Shared",
    "stuck_hashes.py": "Stuck hashes",
    "failover.py": "Failover",
    "bundles.py": "Bundles & unloads",
    "subscriptions.py": "Subscriptions",
    "plugins.py": "Plugins",
}


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
    assert "**Cluster** `standalone`" in [m.value for m in at.sidebar.markdown]


@pytest.mark.parametrize("page", sorted(set(PAGES) - {"plugins.py"}))
def test_app_page_on_an_empty_store_says_to_start_collecting(
    store_dir: Path, app: AppRunner, page: str
) -> None:
    at = app(page)
    assert not at.exception
    assert any("pulsar-lens collect" in i.value for i in at.info)


def test_app_overview_counts_the_newest_snapshot(scenario: Store, app: AppRunner) -> None:
    at = app()
    metrics = {m.label: m.value for m in at.metric}
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


def test_app_key_shared_lists_subscriptions_most_draining_first(
    scenario: Store, app: AppRunner
) -> None:
    at = app("key_shared.py")
    box = at.selectbox(key="key_shared_subscription")
    assert box.options[0] == "persistent://public/default/payments | payments-ks"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Consumers"] == "2"
    assert metrics["Draining hashes"] == "5"
    shares = _frame(at, "consumer_name", "share")
    assert set(shares["consumer_name"]) == {"c1", "c2"}
    assert shares["hashes"].sum() == 65535


def test_app_key_shared_lookup_names_consumer_and_draining_holder(
    scenario: Store, app: AppRunner
) -> None:
    at = app("key_shared.py")
    at.text_input(key="key_shared_lookup_key").input("9").run()
    metrics = {m.label: m.value for m in at.metric}
    # key "9" hashes to 2862 (4.0 docs): now in c2's range, still draining for c1
    assert metrics["Sticky hash"] == "2862"
    assert metrics["Consumer"] == "c2"
    assert metrics["Draining for"] == "c1"
    assert any("still draining for `c1`" in w.value for w in at.warning)


def test_app_key_shared_band_style_redraws(scenario: Store, app: AppRunner) -> None:
    at = app("key_shared.py")
    at.radio(key="key_shared_style").set_value("Band").run()
    assert not at.exception


def test_app_failover_compares_modulo_with_pip392(scenario: Store, app: AppRunner) -> None:
    at = app("failover.py")
    assert at.selectbox(key="failover_subscription").value == (
        "persistent://public/default/events | events-fo"
    )
    flaps = _frame(at, "changes", "active_now")
    assert list(flaps["changes"]) == [0, 0, 1]
    pip392 = _frame(at, "modulo", "consistent_hashing")
    assert list(pip392["modulo"]) == ["ev-1", "ev-2", "ev-1"]


def test_app_bundles_lists_the_owner_change(scenario: Store, app: AppRunner) -> None:
    at = app("bundles.py")
    changes = _frame(at, "bundle_key", "before", "after")
    assert list(changes["bundle_key"]) == ["public/default/0x40000000_0x80000000"]
    assert list(changes["after"]) == ["broker-b:8080"]


def test_app_stuck_hashes_timeline_covers_every_poll(scenario: Store, app: AppRunner) -> None:
    at = app("stuck_hashes.py")
    box = at.selectbox(key="stuck_subscription")
    assert box.value == "persistent://public/default/payments | payments-ks"
    assert not at.exception


def test_app_key_shared_what_if_adding_a_consumer_shows_what_moves(
    scenario: Store, app: AppRunner
) -> None:
    at = app("key_shared.py")
    at.text_input(key="key_shared_add").input("c3").run()
    assert not at.exception
    moved = next(m for m in at.metric if m.label.startswith("Hash space that moves"))
    assert moved.label == "Hash space that moves (add c3)"
    assert 0.0 < float(moved.value.rstrip("%")) < 100.0
    per_consumer = _frame(at, "hashes_before", "hashes_after", "lost_hashes")
    assert list(per_consumer["consumer_name"]) == ["c1", "c2", "c3"]
    c3 = per_consumer[per_consumer["consumer_name"] == "c3"].iloc[0]
    assert c3["hashes_before"] == 0
    assert c3["hashes_after"] == per_consumer["lost_hashes"].sum()


def test_app_key_shared_what_if_removing_a_consumer_moves_all_its_hashes(
    scenario: Store, app: AppRunner
) -> None:
    at = app("key_shared.py")
    at.radio(key="key_shared_change").set_value("remove a consumer").run()
    at.selectbox(key="key_shared_remove").set_value("c1").run()
    per_consumer = _frame(at, "hashes_before", "hashes_after", "lost_hashes")
    c1 = per_consumer[per_consumer["consumer_name"] == "c1"].iloc[0]
    assert c1["hashes_after"] == 0
    assert c1["lost_hashes"] == c1["hashes_before"]
    moved = next(m for m in at.metric if m.label.startswith("Hash space that moves"))
    share = _frame(at, "consumer_name", "share")
    c1_share = float(share.loc[share["consumer_name"] == "c1", "share"].iloc[0])
    assert moved.value == f"{c1_share:.1%}"


def test_app_key_shared_what_if_replica_points(scenario: Store, app: AppRunner) -> None:
    at = app("key_shared.py")
    at.radio(key="key_shared_change").set_value("change replica points").run()
    at.number_input(key="key_shared_points").set_value(200).run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "Hash space that moves (replica points 200)" in labels


def test_app_whole_cluster_analysis_waits_for_a_click_on_large_clusters(
    scenario: Store, app: AppRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = app("key_shared.py")
    assert small.toggle(key="key_shared_all").value is True
    assert any(m.label == "Drifting from the model" for m in small.metric)
    monkeypatch.setitem(WHOLE_CLUSTER_UP_TO, "key-shared-map", 3)
    large = app("key_shared.py")
    assert large.toggle(key="key_shared_all").value is False
    assert not any(m.label == "Drifting from the model" for m in large.metric)
    large.toggle(key="key_shared_all").set_value(True).run()
    assert any(m.label == "Drifting from the model" for m in large.metric)


def test_app_key_shared_weighs_consumers_by_sampled_traffic(
    scenario: Store, app: AppRunner
) -> None:
    write_key_samples(scenario)
    at = app("key_shared.py")
    metrics = {m.label: m.value for m in at.metric}
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
    scenario: Store, app: AppRunner
) -> None:
    at = app("key_shared.py")
    assert "Traffic imbalance" not in {m.label for m in at.metric}
    assert any("--sample-keys" in c.value for c in at.caption)
