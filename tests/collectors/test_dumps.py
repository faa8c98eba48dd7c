"""`pulsar-lens import` on small hand-made dumps: both forms of each file (what pulsar-admin
prints, what the REST API answers) read alike, a missing optional file makes a partial snapshot
that names the call it stands for, and what cannot be read refuses the capture, naming the
file and why, with nothing stored."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.collectors.dumps import capture_folders, read_capture
from pulsar_lens.core.errors import DumpRefused
from pulsar_lens.core.store import Store
from pulsar_lens.core.unsure import unsure_of
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.crashing_plugin import SLUG, write_plugin

BROKER = "10.0.0.1:8080"
NS = "acme/orders"
TOPIC = f"persistent://{NS}/payments"
WHEN = "2026-12-02T04-39-37Z"
CAP = 1_000_000


def key_shared_stats(ranges: list[list[int]] | None) -> dict[str, Any]:
    consumer: dict[str, Any] = {"consumerName": "c-1", "msgRateOut": 1.5}
    if ranges is not None:
        consumer["keyHashRangeArrays"] = ranges
    return {
        "msgRateIn": 2.0,
        "subscriptions": {"ks": {"type": "Key_Shared", "consumers": [consumer]}},
    }


BULK = {NS: {"0x00000000_0xffffffff": {"persistent": {TOPIC: key_shared_stats(None)}}}}


def write(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))


def make_capture(root: Path, *, admin_form: bool = True, name: str = WHEN) -> Path:
    """A whole capture of a one-broker cluster, in pulsar-admin's forms or the REST ones."""
    capture = root / name
    own = capture / "brokers" / BROKER
    ns = capture / "namespaces" / NS
    if admin_form:
        write(capture / "clusters-list", "prod\n")
        write(capture / "brokers-list", f"{BROKER}\n")
        write(
            own / "brokers-namespaces",
            f"{NS}/0x00000000_0xffffffff    [broker_assignment=shared is_controlled=false "
            "is_active=true]\n",
        )
        write(own / "broker-stats-monitoring-metrics", '{"metrics":{}}{"metrics":{}}')
        write(own / "brokers-version", "4.0.7\n")
        write(ns / "topics-list", f"{TOPIC}\n")
        write(ns / "topics-list-partitioned-topics", "")
    else:
        write(capture / "clusters-list.json", ["prod"])
        write(capture / "brokers-list.json", [BROKER])
        write(own / "brokers-namespaces.json", {f"{NS}/0x00000000_0xffffffff": {"is_active": True}})
        write(own / "broker-stats-monitoring-metrics.json", [{"metrics": {}}])
        write(own / "brokers-version", '"4.0.7"')
        write(ns / "topics-list.json", [TOPIC])
        write(ns / "topics-list-partitioned-topics.json", [])
    write(capture / "brokers-leader-broker.json", {"brokerId": BROKER})
    write(own / "broker-stats-topics.json", BULK)
    write(own / "broker-stats-load-report.json", "null")
    write(ns / "namespaces-bundles.json", {"boundaries": ["0x00000000", "0xffffffff"]})
    stats = key_shared_stats([[0, 32767], [32768, 65535]])
    write(capture / "topics" / "persistent" / NS / "payments" / "topics-stats.json", stats)
    return capture


@pytest.mark.parametrize("admin_form", [True, False], ids=["pulsar-admin", "rest"])
def test_a_whole_capture_is_a_snapshot_without_gaps(tmp_path: Path, admin_form: bool) -> None:
    snapshot = read_capture(make_capture(tmp_path, admin_form=admin_form), cluster=None, cap=CAP)
    assert snapshot.errors == ()
    assert snapshot.cluster == "prod"
    assert snapshot.collected_at.isoformat() == "2026-12-02T04:39:37+00:00"
    assert [(b.broker_id, b.is_leader, b.version) for b in snapshot.brokers] == [
        (BROKER, True, "4.0.7")
    ]
    assert [(b.bundle, b.owner_broker) for b in snapshot.bundles] == [
        ("0x00000000_0xffffffff", BROKER)
    ]
    assert [c.hash_ranges for c in snapshot.consumers] == [((0, 32767), (32768, 65535))]


def test_a_missing_optional_file_makes_a_partial_snapshot_naming_the_call(
    tmp_path: Path,
) -> None:
    capture = make_capture(tmp_path)
    (capture / "brokers" / BROKER / "brokers-namespaces").unlink()
    (capture / "topics" / "persistent" / NS / "payments" / "topics-stats.json").unlink()
    snapshot = read_capture(capture, cluster=None, cap=CAP)
    endpoints = [e.endpoint for e in snapshot.errors]
    owned = f"GET http://{BROKER}/admin/v2/brokers/prod/{BROKER}/ownedNamespaces"
    assert owned in endpoints
    assert "not in the dump" in snapshot.errors[endpoints.index(owned)].message
    assert unsure_of(endpoints).owner_brokers == {BROKER}  # the diff leaves its bundles alone
    lacking = [e.message for e in snapshot.errors if e.endpoint == "topic_stats"]
    assert lacking and "1 topic(s)" in lacking[0]
    assert [c.hash_ranges for c in snapshot.consumers] == [()]  # the bulk answer has none


def refusal(capture: Path, **kw: Any) -> DumpRefused:
    with pytest.raises(DumpRefused) as caught:
        read_capture(capture, cluster=kw.get("cluster"), cap=kw.get("cap", CAP))
    return caught.value


def test_malformed_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    capture = make_capture(tmp_path)
    bulk = capture / "brokers" / BROKER / "broker-stats-topics.json"
    bulk.write_text('{"acme/orders": {')
    exc = refusal(capture)
    assert exc.path == str(bulk)
    assert "is not JSON" in exc.reason


def test_a_file_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    capture = make_capture(tmp_path)
    write(capture / "namespaces" / NS / "namespaces-bundles.json", ["0x00000000"])
    assert "not the JSON object" in refusal(capture).reason


def test_a_missing_required_file_is_refused(tmp_path: Path) -> None:
    capture = make_capture(tmp_path)
    (capture / "brokers" / BROKER / "broker-stats-topics.json").unlink()
    exc = refusal(capture)
    assert exc.path.endswith("broker-stats-topics")
    assert "is missing" in exc.reason


def test_a_file_too_big_is_refused_unread(tmp_path: Path) -> None:
    capture = make_capture(tmp_path)
    exc = refusal(capture, cap=100)
    assert "over the 100" in exc.reason


def test_a_capture_with_no_time_is_refused(tmp_path: Path) -> None:
    capture = make_capture(tmp_path, name="from-the-customer")
    exc = refusal(capture)
    assert "says no capture time" in exc.reason
    write(capture / "captured_at", "2026-12-02 04:39:37")  # no timezone
    assert "with a timezone" in refusal(capture).reason
    write(capture / "captured_at", "2026-12-02T05:39:37+01:00\n")
    assert read_capture(capture, cluster=None, cap=CAP).collected_at.hour == 4


def test_a_link_or_pipe_is_refused(tmp_path: Path) -> None:
    capture = make_capture(tmp_path)
    version = capture / "brokers" / BROKER / "brokers-version"
    version.unlink()
    os.mkfifo(version)
    assert "not a regular file" in refusal(capture).reason
    version.unlink()
    version.symlink_to("/etc/hostname")
    assert "symbolic link" in refusal(capture).reason


def test_no_cluster_name_is_refused_unless_given(tmp_path: Path) -> None:
    capture = make_capture(tmp_path)
    (capture / "clusters-list").unlink()
    assert "names no cluster" in refusal(capture).reason
    assert read_capture(capture, cluster="given", cap=CAP).cluster == "given"


def test_the_import_command_stores_what_it_reads_and_nothing_of_a_refused_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump"
    make_capture(dump)
    bad = make_capture(dump, name="2026-12-02T04-40-37Z")
    (bad / "brokers-list").write_text("\x00\x01 not a broker\n")
    assert capture_folders(dump) == [dump / WHEN, bad]
    store = tmp_path / "store"
    assert main(["import", str(dump), "--store", str(store)]) == 1
    out, err = capsys.readouterr()
    assert "refused" in err and "lists no broker" in err
    assert "imported 1 of 2" in out
    index = Store(store).snapshots()
    assert index["collected_at"].dt.minute.tolist() == [39]


def test_the_import_command_stores_the_analyses_of_the_newest_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump"
    make_capture(dump)
    make_capture(dump, name="2026-12-02T04-40-37Z")
    store = tmp_path / "store"
    assert main(["import", str(dump), "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    light = [p.name for p in discover() if engine_of(p).per_poll]
    assert f"analysed the newest snapshot of prod: {len(light)} of {len(light)} analyses" in out
    newest = Store(store).latest_snapshot_id()
    stored = {
        str(meta["plugin"])
        for _, meta in ResultStore(store).entries()
        if (meta.get("snapshot_ids") or [None])[-1] == newest
    }
    assert stored == set(light), err


def test_an_analysis_that_fails_on_import_is_said_and_the_snapshot_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = write_plugin(tmp_path / "plugins")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(plugin.parent))
    make_capture(tmp_path / "dump")
    store = tmp_path / "store"
    assert main(["import", str(tmp_path / "dump"), "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "analyses stored" in out and out.rstrip().endswith(f"; failed: {SLUG}")
    assert f"analysis {SLUG} failed" in err and "ZeroDivisionError" in err
    assert len(Store(store).snapshots()) == 1


def test_the_import_command_refuses_a_folder_without_captures(tmp_path: Path) -> None:
    assert main(["import", str(tmp_path), "--store", str(tmp_path / "store")]) == 2
