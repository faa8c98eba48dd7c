"""The built-in analyses from the command line on live data, as an operator runs them:
`pulsar-lens collect --once` into a store, then `pulsar-lens analyze SLUG --store DIR --json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from tests.lens_cli import run_lens
from tests.live.lens_polls import new_topic, pulsar_client


@pytest.fixture(scope="module")
def live_store(pulsar: LocalPulsar, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two polls of the default broker with a topic, a subscription and a backlog."""
    store = tmp_path_factory.mktemp("cli") / "store"
    topic = new_topic("cli")
    client = pulsar_client(pulsar)
    try:
        client.subscribe(topic, "cli-sub").close()
        producer = client.create_producer(topic)
        for i in range(5):
            producer.send(str(i).encode())
        producer.flush()
        _wait_for_bulk_stats(pulsar, topic)  # the broker rebuilds them every 2 s
        for _ in range(2):
            done = run_lens(
                "collect", "--once", "--admin-url", pulsar.admin_url, "--store", str(store)
            )
            assert done.returncode == 0, done.stdout + done.stderr
    finally:
        client.close()
    return store


def _wait_for_bulk_stats(pulsar: LocalPulsar, topic: str, *, timeout: float = 30.0) -> None:
    """Until the broker's bulk stats list the new topic's subscription (bounded)."""
    import time

    from pulsar_lens.collectors.admin import AdminClient

    deadline = time.monotonic() + timeout
    with AdminClient(pulsar.admin_url) as client:
        while time.monotonic() < deadline:
            if f'"{topic}"' in json.dumps(client.get_json("/admin/v2/broker-stats/topics")):
                return
            time.sleep(0.5)
    raise AssertionError(f"{topic} never appeared in the broker's bulk stats")


def analyze(store: Path, slug: str) -> dict[str, Any]:
    done = run_lens("analyze", slug, "--store", str(store), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["plugin"] == slug and len(result["snapshot_ids"]) == 2
    return result


def test_analyze_cli_live_bundle_ownership(live_store: Path, pulsar: LocalPulsar) -> None:
    result = analyze(live_store, "bundle-ownership")
    owners = {row["owner_broker"] for row in result["frames"]["bundles"]} - {None}
    assert owners == {pulsar.admin_url.removeprefix("http://")}
    assert result["summary"]["bundles"] == len(result["frames"]["bundles"]) > 0


def test_analyze_cli_live_subscription_status(live_store: Path) -> None:
    result = analyze(live_store, "subscription-status")
    rows = [r for r in result["frames"]["status"] if r["subscription"] == "cli-sub"]
    assert [(r["status"], r["msg_backlog"], r["consumer_count"]) for r in rows] == [("STOP", 5, 0)]


def test_analyze_cli_live_stuck_hashes(live_store: Path) -> None:
    result = analyze(live_store, "stuck-hashes")
    assert set(result["frames"]) == {"hashes", "history", "violations", "held_back", "key_shared"}
    assert result["summary"]["violations"] == 0


def test_analyze_cli_live_text_output(live_store: Path) -> None:
    done = run_lens("analyze", "bundle-ownership", "--store", str(live_store))
    assert done.returncode == 0, done.stderr
    assert f"bundle-ownership {BundleOwnership.version} on 2 snapshot(s)" in done.stdout
    assert "== bundles (" in done.stdout
