"""cluster-overview: the Overview's counts, brokers and namespaces, analysed once per snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pulsar_lens.api import Chart, Columns, Metric, Note, Table
from pulsar_lens.core.model import BrokerRecord, BundleRecord, SubscriptionRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.cluster_overview import (
    COUNTS,
    ClusterOverview,
    compute_namespaces,
)
from pulsar_lens.plugins.runner import RunOutput, run, run_on_inputs
from pulsar_lens.plugins.testing import make_inputs, make_snapshot
from tests.dashboard.scenario import write_scenario

PLUGIN = ClusterOverview()


def _overview(store: Store) -> RunOutput:
    return run(PLUGIN, store, use_cache=False, use_stored=False)


def test_counts_equal_the_rows_the_store_wrote_for_the_newest_poll(tmp_path: Path) -> None:
    """The store's index counts each table's rows as it writes them: the analysis, which
    reads the tables, must arrive at the same numbers."""
    store = write_scenario(tmp_path / "store")
    counts = _overview(store).result.frames["counts"].iloc[0]
    written = json.loads(store.snapshots().iloc[-1]["row_counts_json"])
    for table in ("brokers", "bundles", "topics", "subscriptions", "consumers", "draining_hashes"):
        assert counts[table] == written[table], table
    assert (counts["brokers"], counts["namespaces"], counts["topics"]) == (2, 1, 6)
    assert (counts["subscriptions"], counts["consumers"]) == (6, 10)
    assert counts["key_shared"] >= 1 and counts["draining_hashes"] >= 1


def test_namespaces_count_bundles_owners_and_topics(tmp_path: Path) -> None:
    store = write_scenario(tmp_path / "store")
    (row,) = _overview(store).result.frames["namespaces"].to_dict("records")
    assert (row["namespace"], row["bundles"], row["owned"], row["topics"]) == (
        "public/default",
        4,
        4,
        6,
    )
    assert row["owners"] == "broker-a:8080, broker-b:8080"


def test_namespaces_count_topics_from_their_namespace_and_backlog_alone() -> None:
    """No topic name is read: a topic without a backlog figure still counts."""
    bundles = pd.DataFrame({"namespace": ["t/n"], "bundle": ["0x0_0xf"], "owner_broker": ["b:1"]})
    topics = pd.DataFrame({"namespace": ["t/n", "t/n"], "backlog_size": [5.0, None]})
    (row,) = compute_namespaces(bundles, topics).to_dict("records")
    assert (row["topics"], row["backlog_bytes"], row["owners"]) == (2, 5.0, "b:1")


def test_brokers_own_the_bundles_of_the_snapshot_and_the_leader_is_marked() -> None:
    bundles = tuple(
        BundleRecord("t/n", "t", f"0x{i:08x}_0x{i + 1:08x}", i, i + 1, owner_broker=owner)
        for i, owner in enumerate(["b:2", "b:2", "b:1", None])
    )
    brokers = (BrokerRecord("b:2", is_leader=True), BrokerRecord("b:1"), BrokerRecord("b:3"))
    snapshot = make_snapshot(brokers=brokers, bundles=bundles)
    output = run_on_inputs(PLUGIN, make_inputs([snapshot], PLUGIN.inputs), {})
    table = output.result.frames["brokers"]
    assert list(zip(table["broker_id"], table["owned_bundles"], strict=True)) == [
        ("b:1", 1),
        ("b:2", 2),
        ("b:3", 0),
    ]
    (namespace,) = output.result.frames["namespaces"].to_dict("records")
    assert (namespace["bundles"], namespace["owned"], namespace["owners"]) == (4, 3, "b:1, b:2")
    charts = [v for v in output.views if isinstance(v, Chart)]
    assert [c.title for c in charts] == ["Bundles owned per broker"]
    shown = charts[0].chart.to_dict()["datasets"]
    (rows,) = shown.values()
    assert {(r["broker_id"], r["leader"]) for r in rows} == {
        ("b:1", "no"),
        ("b:2", "yes"),
        ("b:3", "no"),
    }


def test_an_empty_snapshot_shows_zero_counts_and_empty_tables() -> None:
    subs = (SubscriptionRecord("persistent://t/n/x", "s", type="Key_Shared"),)
    output = run_on_inputs(
        PLUGIN, make_inputs([make_snapshot(subscriptions=subs)], PLUGIN.inputs), {}
    )
    (counts,) = output.result.frames["counts"].to_dict("records")
    assert counts == dict.fromkeys(counts, 0) | {"subscriptions": 1, "key_shared": 1}
    (row,) = [v for v in output.views if isinstance(v, Columns)]
    metrics = [m for column in row.columns for m in column]
    assert all(isinstance(m, Metric) for m in metrics)
    assert [m.label.lower() for m in metrics] == list(COUNTS)
    assert not [v for v in output.views if isinstance(v, Chart)]
    assert all(v.frame.empty for v in output.views if isinstance(v, Table))
    (note,) = [v for v in output.views if isinstance(v, Note)]
    assert note.markdown.startswith("1 Key_Shared subscription(s); 0 hash(es)")
