"""`pulsar-lens drill unload` as a user runs it, on the run's two-broker cluster: `--to`
sends the unload to the named broker and exits 0 when every probe message arrived; when
messages are lost across the drill (here: the probe's subscription force-deleted while the
probe publishes, so what is published until the consumer is back has no subscription to
wait in), it reports them and exits 1."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.drill import owner_of
from pulsar_lens.collectors.probe import PROBE_SUBSCRIPTION, probe_topic
from pulsar_lens.lab.cluster import LocalPulsarCluster
from tests.brokers import BrokerPool
from tests.lens_cli import ROOT, clean_environ, run_lens
from tests.live.lens_polls import namespace_bundles

DRILL_SECONDS = 300.0  # the drill's own --timeout is 120 s; the process gets more


@pytest.fixture(scope="module")
def cluster(broker_pool: BrokerPool) -> LocalPulsarCluster:
    return broker_pool.cluster("modular")


def drill_env(cluster: LocalPulsarCluster, store: Path) -> dict[str, str]:
    return {
        "PULSAR_ADMIN_URL": cluster.admin_url,
        "PULSAR_LENS_ALLOW_MUTATIONS": "1",
        "PULSAR_LENS_STORE": str(store),
    }


def first_bundle(admin_url: str) -> str:
    return f"public/default/{namespace_bundles(admin_url)[0]}"


def test_drill_unload_to_names_the_destination_and_exits_0(
    cluster: LocalPulsarCluster, tmp_path: Path
) -> None:
    bundle = first_bundle(cluster.admin_url)
    topic = probe_topic("public/default", bundle.rsplit("/", 1)[1])
    with AdminClient(cluster.admin_url) as admin:
        owner = owner_of(admin, topic)  # the lookup assigns it, as the drill's probe would
    other = next(b for b in cluster.broker_ids if b != owner)
    done = run_lens(
        *("drill", "unload", "--bundle", bundle, "--to", other, "--json"),
        env=drill_env(cluster, tmp_path),
        timeout=DRILL_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (report["from"], report["to"]) == (owner, other)
    assert report["lost"] == 0 and report["received"] == report["sent"] > 0


def force_delete_subscription(admin_url: str, topic: str) -> None:
    """DELETE the probe's subscription (force: its consumer is disconnected), retried while
    the topic is briefly unavailable; fails saying what the broker last answered."""
    local = topic.split("/")[-1]
    url = (
        f"{admin_url}/admin/v2/persistent/public/default/{quote(local, safe='')}"
        f"/subscription/{quote(PROBE_SUBSCRIPTION, safe='')}"
    )
    deadline = time.monotonic() + 60
    last = ""
    while time.monotonic() < deadline:
        answer = requests.delete(url, params={"force": "true"}, timeout=30)
        if answer.status_code == 204:
            return
        last = f"{answer.status_code} {answer.text[:200]}"
        time.sleep(0.2)
    raise AssertionError(f"could not delete {PROBE_SUBSCRIPTION} of {topic}: {last}")


def test_drill_unload_exits_1_when_messages_are_lost(
    cluster: LocalPulsarCluster, tmp_path: Path
) -> None:
    bundle = first_bundle(cluster.admin_url)
    env = clean_environ()
    env |= drill_env(cluster, tmp_path)
    argv = [sys.executable, "-m", "pulsar_lens.cli.main", "drill", "unload", "--bundle", bundle]
    argv += ["--rate", "200", "--json"]  # ~20 messages in each 100 ms without a subscription
    probing = threading.Event()
    lines: list[str] = []
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None

        def read_stderr() -> None:
            for line in proc.stderr:  # type: ignore[union-attr]
                lines.append(line)
                if line.startswith("drill: probing "):
                    probing.set()

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        try:
            assert probing.wait(DRILL_SECONDS), "the drill never started its probe:\n" + "".join(
                lines
            )
            topic = lines[-1].split()[2]  # "drill: probing persistent://... at 200 msg/s"
            force_delete_subscription(cluster.admin_url, topic)
            out = proc.stdout.read()
            code = proc.wait(DRILL_SECONDS)
        finally:
            if proc.poll() is None:
                proc.kill()
        reader.join(timeout=30)
    assert code == 1, "".join(lines)[-3000:]
    report: dict[str, Any] = json.loads(out)
    assert report["lost"] > 0 and report["received"] + report["lost"] <= report["sent"]
