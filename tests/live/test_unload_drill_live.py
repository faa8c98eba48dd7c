"""The unload drill on a real two-broker cluster, under both load managers, and on a single
broker: the event is detected with the right bundle and owners, the outage the report gives
is what the raw probe rows show, and every probe message sent was received.

The outage figures of every drill are written to artifacts/unload-drills.json (median and
worst per load manager) for docs/performance.md."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import requests

from pulsar_lens.cli.drill_cmd import drill_report
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.drill import DrillPlan, owner_of, run_drill
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.probe import probe_topic
from pulsar_lens.core.model import SLOW_PUBLISH_MS
from pulsar_lens.core.mutations import MutationSettings
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.store import Store
from pulsar_lens.lab.cluster import LocalPulsarCluster
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.brokers import BrokerPool
from tests.live.lens_polls import wait_for

MUTATIONS = MutationSettings(allow=True)  # the drill unloads a bundle of our own broker

DRILLS = 10
FIGURES = Path(__file__).resolve().parents[2] / "artifacts" / "unload-drills.json"
_measured: dict[str, list[float]] = {}


@pytest.fixture(scope="module", params=["modular", "extensible"])
def cluster(
    request: pytest.FixtureRequest, broker_pool: BrokerPool
) -> Iterator[LocalPulsarCluster]:
    if request.param == "modular":  # the run's shared one (the broker-loss test uses it too)
        yield broker_pool.cluster("modular")
        return
    with LocalPulsarCluster(brokers=2, load_manager=request.param) as running:
        yield running


@pytest.fixture(autouse=True)
def mutations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_LENS_ALLOW_MUTATIONS", "1")


def first_bundle(admin_url: str) -> str:
    bounds = requests.get(f"{admin_url}/admin/v2/namespaces/public/default/bundles", timeout=30)
    boundaries = bounds.json()["boundaries"]
    return f"{boundaries[0]}_{boundaries[1]}"


def raw_outage(rows: pd.DataFrame, since: pd.Timestamp) -> float:
    """The unload's outage straight from the probe rows: the first run of slow or unacked
    messages cut at or after `since`, from the last good ack before it to its first ack (the
    next one's when none); 0 when there is none."""
    rows = rows.sort_values("seq").reset_index(drop=True)
    slow = [pd.isna(v) or v > SLOW_PUBLISH_MS for v in rows["publish_ms"]]
    i = 0
    while i < len(rows):
        if not slow[i]:
            i += 1
            continue
        j = i
        while j < len(rows) and slow[j]:
            j += 1
        good = [k for k in range(i) if not slow[k]]
        cut = rows["acked_at"][good[-1]] if good else rows["sent_at"][i]
        acks = rows["acked_at"][i:j].dropna()
        back = acks.min() if len(acks) else rows["acked_at"][j:].dropna().min()
        if cut >= since:
            return float((back - cut).total_seconds() * 1000)
        i = j
    return 0.0


def drill(cluster_admin: str, store: Store, bundle: str, to: str | None) -> dict[str, Any]:
    plan = DrillPlan("public/default", bundle, to=to, rate=20.0, baseline=1.0, settle=1.0)
    with AdminClient(cluster_admin) as admin:
        run = run_drill(plan, admin=admin, service_url=None, store=store, mutations=MUTATIONS)
    report = drill_report(store, run, Settings())
    rows = store.read("probes").to_pandas()
    report["rows"] = rows[rows["probe"] == run.probe_run]
    return report


def check_probe_rows(report: dict[str, Any]) -> None:
    rows = report["rows"]
    assert len(rows) == report["sent"] > 0
    assert sorted(rows["seq"]) == list(range(len(rows))), "sequence numbers are not contiguous"
    assert (rows["received"] >= 1).all(), "a probe message was lost"
    assert report["lost"] == 0
    assert int((rows["received"] - 1).sum()) == report["duplicates"]
    since = pd.Timestamp(report["unload_at"]) - pd.Timedelta(seconds=1 / 20.0)
    assert report["outage_ms"] == pytest.approx(raw_outage(rows, since), abs=0.01)


def test_unload_to_the_other_broker_is_detected_and_measured(
    cluster: LocalPulsarCluster, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    bundle = first_bundle(cluster.admin_url)
    outages = []
    for _ in range(DRILLS):
        with AdminClient(cluster.admin_url) as admin:
            owner = owner_of(admin, probe_topic("public/default", bundle))
        other = next(b for b in cluster.broker_ids if b != owner)
        report = drill(cluster.admin_url, store, bundle, other)
        assert report["from"] != report["to"]
        assert report["to"] == other
        moved = [e for e in report["events"] if e["kind"] == "moved"]
        assert moved, f"no moved event: {report['events']}"
        assert moved[0]["bundle"] == bundle
        assert (moved[0]["from_broker"], moved[0]["to_broker"]) == (report["from"], other)
        check_probe_rows(report)
        outages.append(report["outage_ms"])
    _measured[cluster.load_manager] = outages
    _write_figures()


def test_a_poll_reads_every_broker_of_either_load_manager_without_an_error(
    cluster: LocalPulsarCluster,
) -> None:
    """The extensible load manager answers every load-report call with a 500: a broker working
    as designed, not a failure the poll lists (its counts come from its topics)."""
    with AdminClient(cluster.admin_url) as admin:
        snapshot = poll(admin, namespaces=["public/default"])
    assert snapshot.errors == ()
    assert sorted(b.broker_id for b in snapshot.brokers) == sorted(cluster.broker_ids)
    assert all(b.version and b.version.startswith("4.0.") for b in snapshot.brokers)


def breakdown(admin_url: str, broker: str) -> dict[tuple[str, str], int]:
    """The leader's unloads by (result, reason) from its dimension metrics, with its bundle
    total under ("", "total"); empty before its first shedding round lists them."""
    answer = requests.get(f"http://{broker}/admin/v2/broker-stats/metrics", timeout=30).json()
    found: dict[tuple[str, str], int] = {}
    for entry in answer:
        dimensions, metrics = entry["dimensions"], entry["metrics"]
        if "brk_lb_unload_broker_breakdown_total" in metrics:
            key = (dimensions["result"], dimensions["reason"])
            found[key] = int(metrics["brk_lb_unload_broker_breakdown_total"])
        if "brk_lb_unload_bundle_total" in metrics:
            found[("", "total")] = int(metrics["brk_lb_unload_bundle_total"])
    return found


@pytest.mark.parametrize("cluster", ["extensible"], indirect=True)
def test_the_extensible_load_managers_count_stored_leaves_out_admin_unloads(
    cluster: LocalPulsarCluster,
) -> None:
    """The extensible load manager counts an unload the admin API asked for in its bundle
    total (reason "Admin"), where the modular one does not count it: the count stored is the
    shedder's alone, so bundle-ownership never gives it an admin's unload. Shedding is on for
    this test only (the leader lists its counts after each shedding round, once a minute)."""
    url = cluster.admin_url
    config = f"{url}/admin/v2/brokers/configuration/loadBalancerSheddingEnabled"
    requests.post(f"{config}/true", timeout=30).raise_for_status()
    try:
        leader = requests.get(f"{url}/admin/v2/brokers/leaderBroker", timeout=30).json()
        leader_id = str(leader["brokerId"])
        bundle = first_bundle(url)
        topic = probe_topic("public/default", bundle)
        path = topic.replace("://", "/", 1)
        requests.put(f"{url}/admin/v2/{path}", timeout=30)  # 409 when a drill made it already
        with AdminClient(url) as admin:
            owner = wait_for(lambda: owner_of(admin, topic), what=f"an owner of {topic}")
        before = wait_for(
            lambda: breakdown(url, leader_id) or None,
            what="the leader's first shedding round to list its unloads",
            timeout=180,
            every=2.0,
        )
        other = next(b for b in cluster.broker_ids if b != owner)
        requests.put(
            f"{url}/admin/v2/namespaces/public/default/{bundle}/unload",
            params={"destinationBroker": other},
            timeout=60,
        ).raise_for_status()
        asked = ("Success", "Admin")

        def counted() -> dict[tuple[str, str], int] | None:
            found = breakdown(url, leader_id)
            return found if found.get(asked, 0) > before.get(asked, 0) else None

        after = wait_for(counted, what="the admin unload counted", timeout=180, every=2.0)
        with AdminClient(url) as admin:
            snapshot = poll(admin, namespaces=["public/default"])
        again = breakdown(url, leader_id)  # a shedding round may come between
    finally:
        requests.post(f"{config}/false", timeout=30).raise_for_status()
    # the broker's total is every successful unload, the admin's among them
    successes = sum(n for (result, _), n in after.items() if result == "Success")
    assert after[("", "total")] == successes >= after[asked] >= 1
    (stored,) = [b for b in snapshot.brokers if b.broker_id == leader_id]
    assert stored.lb_bundles_unloaded in {shed(after), shed(again)}


def shed(found: dict[tuple[str, str], int]) -> int:
    """The unloads the shedder chose: the bundle total less the admin API's."""
    return found[("", "total")] - found.get(("Success", "Admin"), 0)


def test_unload_on_a_single_broker_is_detected_and_measured(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    bundle = first_bundle(pulsar.admin_url)
    report = drill(pulsar.admin_url, store, bundle, None)
    assert report["from"] == report["to"]  # re-acquired by the only broker
    ours = [e for e in report["events"] if e["bundle"] == bundle]
    assert ours, "the unload was not detected"
    assert {e["kind"] for e in ours} <= {"reloaded", "outage", "reacquired"}
    if report["cut_at"] is not None:  # the event whose window holds the unload's outage
        holder = [e for e in ours if e["cut_at"] == report["cut_at"]]
        assert holder, f"no event holds the outage cut at {report['cut_at']}: {ours}"
        assert holder[0]["outage_ms"] >= report["outage_ms"] - 0.01
    check_probe_rows(report)


def _write_figures() -> None:
    """This run's figures of each load manager it drilled; those of a manager it did not
    (a run with -k) stay as the last run that drilled it wrote them."""
    try:
        kept = json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        kept = {}
    summary = kept if isinstance(kept, dict) else {}
    summary |= {
        manager: {
            "drills": len(values),
            "median_ms": statistics.median(values),
            "worst_ms": max(values),
            "outages_ms": [round(v, 1) for v in values],
        }
        for manager, values in _measured.items()
    }
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(summary, indent=2) + "\n")
