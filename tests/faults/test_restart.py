"""A collector restart: the first poll after it is diffed against the last snapshot stored
before it, so a change made while the collector was down still shows as events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.events import DIFF_COLUMNS, diff
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.restore import restore_latest
from pulsar_lens.core.errors import SnapshotError
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.core.tablerows import columns_of
from tests.collectors.recorded import BASE, register
from tests.fake_admin import FakeAdmin
from tests.lens_cli import run_lens

BULK = "/admin/v2/broker-stats/topics"
OWNED = "/admin/v2/brokers/standalone/127.0.0.1:8080/ownedNamespaces"
ORDERS = "persistent://public/default/orders"
ORDERS_STATS = "/admin/v2/persistent/public/default/orders/stats"  # polled in detail at times
ORDERS_BUNDLE = "public/default/0x80000000_0xc0000000"


def recorded_poll(scenario: str) -> Snapshot:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        register(mock, scenario)
        return poll(AdminClient(BASE))


def sorted_tables(snapshot: Snapshot) -> dict[str, list[Any]]:
    """What the diff reads of each table, in one order (the store keeps rows, not their
    order)."""
    tables = {name: sorted(map(repr, getattr(snapshot, name))) for name in ("brokers", "bundles")}
    for name, columns in DIFF_COLUMNS.items():
        found = columns_of(snapshot.records(name), columns)
        tables[name] = sorted(map(repr, zip(*found, strict=True))) if columns else []
        tables[f"{name} rows"] = [len(snapshot.records(name))]
    return tables


def test_restore_reads_back_a_recorded_poll_as_it_was_polled(tmp_path: Path) -> None:
    polled = recorded_poll("default")
    assert polled.consumers and any(c.hash_ranges for c in polled.consumers)
    assert any(c.connected_since for c in polled.consumers)
    store = Store(tmp_path)
    store.write(polled)
    restored = restore_latest(store, polled.cluster)
    assert restored is not None
    assert sorted_tables(restored) == sorted_tables(polled)
    assert (restored.errors, restored.collected_at) == (polled.errors, polled.collected_at)
    later = recorded_poll("classic-modular")
    assert diff(restored, later) == diff(polled, later)
    assert diff(polled, later)  # the recordings differ: hash ranges moved


def test_restore_finds_nothing_in_an_empty_store_or_for_another_cluster(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert restore_latest(store, "standalone") is None
    polled = recorded_poll("default")
    store.write(polled)
    assert restore_latest(store, "elsewhere") is None
    assert restore_latest(store, polled.cluster, before=polled.collected_at) is None


def test_restore_of_an_unreadable_index_row_says_which_snapshot(tmp_path: Path) -> None:
    import pyarrow as pa

    from pulsar_lens.core.store import INDEX_SCHEMA

    store = Store(tmp_path)
    store.write(recorded_poll("default"))
    row = store.read_latest("snapshots").to_pylist()[0]
    row["durations_json"] = "[1, 2"
    (tmp_path / "snapshots").rename(tmp_path / "old")
    store.write_table("snapshots", pa.Table.from_pylist([row], schema=INDEX_SCHEMA))
    with pytest.raises(SnapshotError, match=f"snapshot {row['snapshot_id']} cannot be read"):
        restore_latest(store, row["cluster"])


def without_consumer(stats: dict[str, Any], subscription: str, name: str) -> dict[str, Any]:
    sub = stats["subscriptions"][subscription]
    sub["consumers"] = [c for c in sub["consumers"] if c.get("consumerName") != name]
    return stats


def test_collect_restarted_stores_the_events_of_what_changed_while_it_was_down(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"

    def bulk(payload: Any) -> Any:
        bundle = payload["public/default"]["0x80000000_0xc0000000"]["persistent"]
        without_consumer(bundle[ORDERS], "sh", "sh-2")
        return payload

    def owned(payload: Any) -> Any:
        payload.pop(ORDERS_BUNDLE)  # the bundle was unloaded: no broker owns it now
        return payload

    with FakeAdmin() as fake:
        env = {"PULSAR_ADMIN_URL": fake.url}
        first = run_lens("collect", "--max-polls", "1", "--store", str(store), env=env)
        assert first.returncode == 0, first.stderr
        assert " events=" not in first.stdout  # nothing stored before: nothing to diff
        fake.mutate(BULK, bulk)
        fake.mutate(ORDERS_STATS, lambda stats: without_consumer(stats, "sh", "sh-2"))
        fake.mutate(OWNED, owned)
        second = run_lens("collect", "--max-polls", "1", "--store", str(store), env=env)
        broker = fake.host
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr
    assert " events=2" in second.stdout
    index = Store(store).snapshots()
    assert len(index) == 2
    events = Store(store).read("events").to_pylist()
    assert {e["snapshot_id"] for e in events} == {index["snapshot_id"].iloc[-1]}
    found = sorted((e["kind"], e["subject"], e["before"], e["after"]) for e in events)
    assert found == [
        ("bundle_owner_changed", ORDERS_BUNDLE, broker, None),
        ("consumer_left", f"{ORDERS}/sh/sh-2", None, None),
    ]
