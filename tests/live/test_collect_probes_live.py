"""`pulsar-lens collect --probe`: probes started by the collect loop write probe rows that the
unload-latency plugin reads; without PULSAR_LENS_ALLOW_MUTATIONS the flag is refused. A drill
queued as the dashboard queues it runs only with mutations from the dashboard on."""

from __future__ import annotations

from pathlib import Path

import requests

from pulsar_lens.collectors.drill_queue import DrillQueue
from pulsar_lens.collectors.probe import PROBE_PREFIX
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover
from tests.lens_cli import run_lens


def test_collect_refuses_probes_unless_mutations_are_enabled(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    result = run_lens(
        "collect",
        "--once",
        "--admin-url",
        pulsar.admin_url,
        "--store",
        str(store_dir),
        "--probe",
        "public/default",
    )
    assert result.returncode == 2
    assert "PULSAR_LENS_ALLOW_MUTATIONS=1" in result.stderr
    assert not (store_dir / "probes").exists()
    topics = requests.get(f"{pulsar.admin_url}/admin/v2/persistent/public/default", timeout=30)
    assert not [t for t in topics.json() if PROBE_PREFIX in t]


def test_collect_probes_every_bundle_of_a_namespace(pulsar: LocalPulsar, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    bundles = requests.get(
        f"{pulsar.admin_url}/admin/v2/namespaces/public/default/bundles", timeout=30
    ).json()["numBundles"]
    result = run_lens(
        "collect",
        "--interval",
        "2s",
        "--max-polls",
        "4",
        "--admin-url",
        pulsar.admin_url,
        "--store",
        str(store_dir),
        "--probe",
        "public/default",
        "--probe-rate",
        "5",
        env={"PULSAR_LENS_ALLOW_MUTATIONS": "1", "PULSAR_LENS_SPARK_JOBS": "0"},
    )
    assert result.returncode == 0, result.stderr
    assert "creates topic" in result.stderr
    store = Store(store_dir)
    probes = store.read("probes").to_pandas()
    assert probes["bundle"].nunique() == bundles
    assert len(probes) >= bundles * 5  # at least a second of each probe
    assert (probes["received"] >= 1).all() and probes["publish_ms"].notna().all()
    for topic, bundle in probes[["topic", "bundle"]].drop_duplicates().itertuples(index=False):
        path = topic.replace("://", "/", 1)
        answer = requests.get(f"{pulsar.admin_url}/lookup/v2/topic/{path}/bundle", timeout=30)
        assert answer.text.strip('"') == bundle  # the broker places each probe in its bundle
    loaded = discover().get("unload-latency")
    output = runner.run(loaded, store, use_cache=False)
    assert output.result.summary["probe_messages"] > 0
    assert output.result.summary["lost"] == 0
    assert set(output.result.frames["probes"]["bundle"]) == set(probes["bundle"])


def test_a_drill_asked_for_like_the_dashboard_does_is_run_by_collect(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    bounds = requests.get(
        f"{pulsar.admin_url}/admin/v2/namespaces/public/default/bundles", timeout=30
    ).json()["boundaries"]
    bundle = f"public/default/{bounds[0]}_{bounds[1]}"
    asked = DrillQueue(store_dir).request(bundle, requested_by="ops@example.com")
    result = run_lens(
        "collect", "--interval", "1s", "--max-polls", "6", "--admin-url", pulsar.admin_url,
        "--store", str(store_dir),
        env={
            "PULSAR_LENS_ALLOW_MUTATIONS": "1",
            "PULSAR_LENS_DASHBOARD_MUTATIONS": "1",
            "PULSAR_LENS_SPARK_JOBS": "0",
        },
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    done = DrillQueue(store_dir).status(asked.id)
    assert done is not None and done.state == "done", done
    assert done.owner_before == done.owner_after  # one broker: re-acquired
    assert any("unloading" in step for step in done.steps)
    probes = Store(store_dir).read("probes").to_pandas()
    assert len(probes) > 0 and (probes["received"] >= 1).all()


def test_collect_runs_no_drill_unless_mutations_are_enabled(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    bundle = "public/default/0x00000000_0x40000000"
    asked = DrillQueue(store_dir).request(bundle, requested_by="ops@example.com")
    result = run_lens(
        "collect", "--interval", "1s", "--max-polls", "3", "--admin-url", pulsar.admin_url,
        "--store", str(store_dir), env={"PULSAR_LENS_SPARK_JOBS": "0"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    status = DrillQueue(store_dir).status(asked.id)
    assert status is not None and status.state in ("queued", "refused"), status
    assert not (store_dir / "probes").exists()
