"""The Overview's frames and the page plan, on the tables of a written scenario store."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from pulsar_lens.api import Page
from pulsar_lens.core.store import Store
from pulsar_lens.core.unsure import unsure_of
from pulsar_lens.dashboard import frames, navigation
from pulsar_lens.plugins.registry import LoadedPlugin, discover


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


def test_page_plan_gives_plugins_with_a_page_their_own_and_the_rest_a_generic_one() -> None:
    registry = discover(entry_points=False, plugin_dirs=())
    plan = navigation.page_plan(registry)
    cluster = [(p.url_path, p.target) for p in plan["Cluster"]]
    assert cluster == [
        ("overview", "overview.py"),
        ("key-shared", "key-shared-map"),
        ("stuck-hashes", "stuck-hashes"),
        ("failover", "failover-assignment"),
        ("bundles", "unload-latency"),
        ("subscriptions", "subscription-status"),
        ("timeline", "incident-timeline"),
    ]
    history = {p.target: p.url_path for p in plan["History"]}  # the Spark analyses' pages
    spark = {p.name for p in registry if p.engine == "spark"}
    assert set(history) == spark and "stuck-hash-history" in spark
    assert history["stuck-hash-history"] == "stuck-hash-history"
    generic = {p.target for p in plan.get("Analyses", ())}
    generic_too = {"sticky-ranges", "bundle-ownership", "cluster-overview"}
    assert generic == {p.name for p in registry if p.plugin.page is None} == generic_too
    assert all(p.kind == "analysis" for p in plan.get("Analyses", ()))
    assert [p.title for p in plan["About"]] == ["Plugins"]


def test_page_plan_serves_a_second_claim_on_a_path_at_the_plugins_own_path() -> None:
    registry = discover(entry_points=False, plugin_dirs=())

    class Rival(type(registry.get("subscription-status").plugin)):  # type: ignore[misc]
        name = "rival"
        title = "Rival"
        page = Page(title="Rival", url_path="subscriptions", order=99)

    rival = LoadedPlugin(Rival(), "test", "1")
    plan = navigation.page_plan([*registry, rival])
    paths = {p.target: p.url_path for p in plan["Cluster"]}
    assert paths["subscription-status"] == "subscriptions"
    assert paths["rival"] == "analysis-rival"


@pytest.mark.parametrize(
    "broker", ["broker-a:8080", "[x](y.png):8080", "[::1]:8080", "h]:1", "a b:1", "x#y:1"]
)
def test_broker_failures_name_a_broker_whatever_the_cluster_called_it(broker: str) -> None:
    """The broker's name comes from the cluster: one that is no valid host is named too,
    up to where a URL would end it (`#`), and unsure_of agrees on whose bundles are unknown."""
    endpoint = f"GET http://{broker}/admin/v2/namespaces/ownedNamespaces"
    errors = pd.DataFrame({"endpoint": [endpoint, "GET /admin/v2/clusters"]})
    host = broker.partition("#")[0]
    failed = frames.compute_broker_failures(errors)
    assert failed["broker"].tolist() == [host]
    assert failed["call"].str.startswith("GET ").all()
    assert failed["missing"].tolist() == ["which bundles it owns"]
    assert unsure_of([endpoint]).owner_brokers == {host}
