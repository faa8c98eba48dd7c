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
from tests.live.lens_polls import namespace_bundles, wait_for

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
    return namespace_bundles(admin_url)[0]


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


UNLOADS, SPLITS = "bundleUnloading", "bundlesSplit"
TOTALS = {UNLOADS: "brk_lb_unload_bundle_total", SPLITS: "brk_lb_bundles_split_total"}
ASKED = ("Success", "Admin")


def breakdown(brokers: list[str]) -> dict[tuple[str, str, str], int]:
    """The brokers' unloads and splits by (kind, result, reason) from their dimension metrics,
    summed, with each kind's total under (kind, "", "total"). The leader lists its unloads
    after its first shedding round; a split is listed by the broker that owned the bundle,
    once it made one."""
    found: dict[tuple[str, str, str], int] = {}
    for broker in brokers:
        url = f"http://{broker}/admin/v2/broker-stats/metrics"
        for entry in requests.get(url, timeout=30).json():
            dimensions, metrics = entry["dimensions"], entry["metrics"]
            kind = dimensions.get("metric")
            for name, value in metrics.items():
                if kind in TOTALS and name.endswith("_breakdown_total"):
                    key = (kind, dimensions["result"], dimensions["reason"])
                    found[key] = found.get(key, 0) + int(value)
                elif kind in TOTALS and name == TOTALS[kind]:
                    key = (kind, "", "total")
                    found[key] = found.get(key, 0) + int(value)
    return found


def its_own(found: dict[tuple[str, str, str], int], kind: str) -> int:
    """The load manager's own unloads or splits: the total less the admin API's."""
    return found[(kind, "", "total")] - found.get((kind, *ASKED), 0)


def owned_topic(url: str, bundle: str) -> str:
    """A topic of `bundle`, made and looked up so that a broker owns the bundle: its owner."""
    path = probe_topic("public/default", bundle).replace("://", "/", 1)
    requests.put(f"{url}/admin/v2/{path}", timeout=30)  # 409 when a drill made it already
    with AdminClient(url) as admin:
        return wait_for(lambda: owner_of(admin, path.replace("/", "://", 1)), what=path)


@pytest.mark.parametrize("cluster", ["extensible"], indirect=True)
def test_the_extensible_load_managers_counts_stored_leave_out_the_admin_apis(
    cluster: LocalPulsarCluster,
) -> None:
    """The extensible load manager counts the unloads and splits the admin API asked for in
    its totals (reason "Admin"), where the modular one does not: the counts stored are its own
    alone, so bundle-ownership never gives it an admin's unload or split. Shedding and automatic
    splits are on for this test only (the leader lists its counts after each of their rounds,
    once a minute, splits only once there was one; this idle cluster gives them nothing to
    do)."""
    url = cluster.admin_url
    switches = [
        f"{url}/admin/v2/brokers/configuration/{name}"
        for name in ("loadBalancerSheddingEnabled", "loadBalancerAutoBundleSplitEnabled")
    ]
    for switch in switches:
        requests.post(f"{switch}/true", timeout=30).raise_for_status()
    brokers = list(cluster.broker_ids)
    try:
        bundles = namespace_bundles(url)
        split = bundles.pop()
        owned_topic(url, split)
        # the leader counts (and lists) an admin unload it carried out: one of a bundle it owns
        leader = requests.get(f"{url}/admin/v2/brokers/leaderBroker", timeout=30).json()
        moved = next(b for b in bundles if owned_topic(url, b) == leader["brokerId"])
        other = next(b for b in brokers if b != leader["brokerId"])

        def listed() -> dict[tuple[str, str, str], int] | None:
            found = breakdown(brokers)
            return found if (UNLOADS, "", "total") in found else None

        before = wait_for(listed, what="the first shedding round", timeout=180, every=2.0)
        namespace = f"{url}/admin/v2/namespaces/public/default"
        requests.put(
            f"http://{leader['brokerId']}/admin/v2/namespaces/public/default/{moved}/unload",
            params={"destinationBroker": other},
            timeout=60,
        ).raise_for_status()
        requests.put(
            f"{namespace}/{split}/split", params={"unload": "false"}, timeout=60
        ).raise_for_status()

        def counted() -> dict[tuple[str, str, str], int] | None:
            found = listed() or {}
            grew = all(found.get((k, *ASKED), 0) > before.get((k, *ASKED), 0) for k in TOTALS)
            return found if grew else None

        after = wait_for(
            counted,
            what="both admin calls counted",
            timeout=180,
            every=2.0,
            seen=lambda: {"before": before, "now": breakdown(brokers)},
        )
        with AdminClient(url) as admin:
            snapshot = poll(admin, namespaces=["public/default"])
        again = breakdown(brokers)  # a round may come between
    finally:
        for switch in switches:
            requests.post(f"{switch}/false", timeout=30).raise_for_status()
    for kind in TOTALS:  # each total is every success, the admin API's among them
        successes = sum(
            n for (k, result, _), n in after.items() if (k, result) == (kind, "Success")
        )
        assert after[(kind, "", "total")] == successes >= after[(kind, *ASKED)] >= 1
    assert sorted(b.broker_id for b in snapshot.brokers) == sorted(brokers)
    unloaded = sum(b.lb_bundles_unloaded for b in snapshot.brokers if b.lb_bundles_unloaded)
    split = sum(b.lb_bundles_split for b in snapshot.brokers if b.lb_bundles_split)
    assert all(b.lb_bundles_unloaded is not None for b in snapshot.brokers)
    assert unloaded in {its_own(after, UNLOADS), its_own(again, UNLOADS)}
    assert split in {its_own(after, SPLITS), its_own(again, SPLITS)}


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
