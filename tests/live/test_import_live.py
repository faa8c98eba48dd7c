"""`pulsar-lens import` of a dump made with the real `pulsar-admin` of the test broker (run from
its jars, `lab.admintool`): the store it makes holds what the collector's own poll of the same
broker holds, and the analyses on both agree.

Compared: the topic, subscription and consumer sets, the bundles and their owners, the topics'
bundles, the Key_Shared hash ranges, the failover active consumers, and the Key_Shared map and
failover analyses built on them; and the imported snapshot lacks nothing (no error). Left out
on purpose: rates, counters, backlogs and times, which move between the dump and the poll
(taken seconds apart).

One JVM runs every pulsar-admin command of the dump (`admintool.run_batch`): a JVM start costs
seconds, more on a busy machine.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.core.store import Store
from pulsar_lens.lab import admintool
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from tests.live.test_collector import ALL_NAMES, Setup, build_everything, new_setup

CLUSTER = "standalone"


def dump_commands(broker_id: str, namespace: str, capture: Path) -> dict[Path, list[str]]:
    """The pulsar-admin commands of docs/import.md for one namespace of a one-broker cluster,
    each with the file its output goes to."""
    own = capture / "brokers" / broker_id
    ns = capture / "namespaces" / namespace
    topics = capture / "topics" / "persistent" / namespace
    return {
        capture / "clusters-list": ["clusters", "list"],
        capture / "brokers-list": ["brokers", "list", CLUSTER],
        capture / "brokers-leader-broker.json": ["brokers", "leader-broker"],
        own / "broker-stats-topics.json": ["broker-stats", "topics"],
        own / "brokers-namespaces": ["brokers", "namespaces", CLUSTER, "--url", broker_id],
        own / "broker-stats-load-report.json": ["broker-stats", "load-report"],
        own / "broker-stats-monitoring-metrics": ["broker-stats", "monitoring-metrics"],
        own / "brokers-version": ["brokers", "version"],
        ns / "namespaces-bundles.json": ["namespaces", "bundles", namespace],
        ns / "topics-list": ["topics", "list", namespace, "--include-system-topic"],
        ns / "topics-list-partitioned-topics": [
            "topics",
            "list-partitioned-topics",
            namespace,
            "--include-system-topic",
        ],
        topics / "plain" / "topics-stats.json": [
            "topics",
            "stats",
            f"persistent://{namespace}/plain",
        ],
        topics / "parted" / "topics-partitioned-stats.json": [
            "topics",
            "partitioned-stats",
            "--per-partition",
            f"persistent://{namespace}/parted",
        ],
    }


def capture_dump(broker: LocalPulsar, namespace: str, root: Path) -> Path:
    """One capture folder, named by its UTC time, made by pulsar-admin in one JVM."""
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    capture = root / when
    commands = dump_commands(broker.admin_url.removeprefix("http://"), namespace, capture)
    for output in commands:
        output.parent.mkdir(parents=True, exist_ok=True)
    admintool.run_batch(broker.admin_url, commands, version=broker.version)
    return capture


@pytest.fixture(scope="module")
def stores(pulsar: LocalPulsar, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """(setup, imported store, polled store): the dump, then the poll right after it."""
    root = tmp_path_factory.mktemp("import-live")
    with new_setup(pulsar) as s:
        build_everything(s)
        s.wait_for_consumers(ALL_NAMES)
        capture_dump(pulsar, s.namespace, root / "dump")
        polled = Store(root / "polled")
        polled.write(s.poll())
        code = main(["import", str(root / "dump"), "--store", str(root / "imported")])
        assert code == 0
        yield s, Store(root / "imported"), polled


def user_rows(
    store: Store, table: str, namespace: str, columns: list[str]
) -> list[tuple[Any, ...]]:
    frame = store.read_latest(table).to_pandas()
    frame = frame[frame["topic" if "topic" in frame else "namespace"].str.contains(namespace)]
    if "topic" in frame:
        frame = frame[~frame["topic"].str.contains("/__")]
    return sorted(tuple(_plain(v) for v in row) for row in frame[columns].itertuples(index=False))


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return tuple(
            _plain(v) if not isinstance(v, dict) else (v["start"], v["end"]) for v in value
        )
    return value


STABLE = {
    "topics": ["topic", "partitioned_topic", "partition_index", "bundle", "owner_broker"],
    "subscriptions": ["topic", "subscription", "type", "consumer_count", "active_consumer_name"],
    "consumers": ["topic", "subscription", "consumer_name", "hash_ranges"],
    "bundles": ["namespace", "bundle", "lower", "upper", "owner_broker", "topic_count"],
}


@pytest.mark.parametrize("table", sorted(STABLE))
def test_import_of_a_pulsar_admin_dump_holds_what_the_poll_holds(stores: Any, table: str) -> None:
    s, imported, polled = stores
    ours = user_rows(imported, table, s.namespace, STABLE[table])
    theirs = user_rows(polled, table, s.namespace, STABLE[table])
    assert ours, f"no {table} of {s.namespace} imported"
    assert ours == theirs


def test_import_of_a_pulsar_admin_dump_has_the_brokers_and_no_gaps(stores: Any) -> None:
    s, imported, _polled = stores
    index = imported.snapshots()
    assert len(index) == 1
    brokers = imported.read_latest("brokers").to_pandas()
    broker_id = s.broker.admin_url.removeprefix("http://")
    assert brokers[["broker_id", "is_leader", "version"]].values.tolist() == [
        [broker_id, True, s.broker.version]
    ]
    assert str(index["cluster"].iloc[0]) == CLUSTER
    assert index["errors_json"].iloc[0] in (None, "", "[]"), index["errors_json"].iloc[0]


def analysis_frames(store: Store, plugin: Any, frame: str, namespace: str) -> pd.DataFrame:
    result = runner.run(plugin, store, use_cache=False, use_stored=False).result
    table = result.frames[frame]
    table = table[table["label"].str.contains(namespace, regex=False)]
    keep = [c for c in table.columns if not _moving(c)]
    return table[keep].sort_values(keep).reset_index(drop=True)


def _moving(column: str) -> bool:
    """A column of rates, counts of messages, backlogs or times: it moves between the two."""
    words = ("rate", "msg", "backlog", "unacked", "_at", "since", "time", "age", "permits", "snap")
    return any(word in column for word in words)


@pytest.mark.parametrize(
    ("plugin", "frame"),
    [
        (KeySharedMap(), "subscriptions"),
        (KeySharedMap(), "ranges"),
        (FailoverAssignment(), "partitions"),
        (FailoverAssignment(), "matrix"),
    ],
    ids=[
        "key-shared-map-subscriptions",
        "key-shared-map-ranges",
        "failover-partitions",
        "failover-matrix",
    ],
)
def test_analyses_of_the_import_equal_those_of_the_poll(
    stores: tuple[Setup, Store, Store], plugin: Any, frame: str
) -> None:
    s, imported, polled = stores
    ours = analysis_frames(imported, plugin, frame, s.namespace)
    assert len(ours), f"{plugin.name}: no {frame} of {s.namespace}"
    pd.testing.assert_frame_equal(ours, analysis_frames(polled, plugin, frame, s.namespace))
