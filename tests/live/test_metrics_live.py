"""/metrics of `pulsar-lens collect` against a real Pulsar 4.0 broker.

c1 holds keyed messages on a Key_Shared subscription; c2 joins and takes part of the hash
space, so the broker drains, for c1, the pending hashes that moved; messages sent with those
keys wait. While `collect --metrics-port` polls every second, a scrape must give the broker's
own backlog and draining-hash count, the stored snapshot's values, and (after a few polls
without progress) those hashes as stuck. The admin token is a sentinel: it never shows.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pulsar
import requests
from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from tests.lens_cli import clean_environ
from tests.live.lens_polls import (
    listed_consumers,
    new_topic,
    pulsar_client,
    topic_stats,
    wait_for,
    wait_for_bulk,
)

SUB = "metrics-ks"
KEYS = [f"account-{i}" for i in range(40)]
SENTINEL = "sentinel-admin-token-8d3f"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def sticky_hash(key: str) -> int:
    """The 4.0 consistent-hashing selector's sticky hash of a partition key."""
    return murmur3_31(key.encode()) % 65535 + 1


def subscribe(client: pulsar.Client, topic: str, name: str) -> pulsar.Consumer:
    return client.subscribe(
        topic, SUB, consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name
    )


def sub_stats(broker: LocalPulsar, topic: str) -> dict[str, object]:
    stats: dict[str, object] = topic_stats(broker, topic)["subscriptions"][SUB]
    return stats


def scrape(port: int) -> tuple[str, Samples]:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    found = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return text, found


def test_metrics_live_scrape_matches_the_broker_and_the_store(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    topic = new_topic("metrics")
    client = pulsar_client(pulsar)
    proc: subprocess.Popen[str] | None = None
    consumers: list[pulsar.Consumer] = []
    try:
        consumers.append(subscribe(client, topic, "c1"))  # held (never acked) until the end
        producer = client.create_producer(topic, batching_enabled=False)
        for key in KEYS:
            producer.send(f"first-{key}".encode(), partition_key=key)
        wait_for(
            lambda: sub_stats(pulsar, topic)["unackedMessages"] == len(KEYS),
            what="c1 to hold every message",
        )
        consumers.append(subscribe(client, topic, "c2"))
        draining = wait_for(
            lambda: sub_stats(pulsar, topic).get("drainingHashesCount"),
            what="hashes draining for c1 after c2 joined",
        )
        listed = topic_stats(pulsar, topic)["subscriptions"][SUB]["consumers"]
        c1_stats = next(c for c in listed if c["consumerName"] == "c1")
        moved_hashes = {d["hash"] for d in c1_stats["drainingHashes"]}
        moved = [k for k in KEYS if sticky_hash(k) in moved_hashes]
        assert moved, "c2 took no hash of the pending keys; use more keys"
        for key in moved:  # these wait for c1: blocked attempts > 0, the hashes get stuck
            producer.send(f"blocked-{key}".encode(), partition_key=key)
        expected_backlog = len(KEYS) + len(moved)
        wait_for(
            lambda: sub_stats(pulsar, topic)["msgBacklog"] == expected_backlog,
            what="the backlog to count the blocked messages",
        )
        wait_for_bulk(  # what collect's first poll reads
            pulsar,
            topic,
            lambda s: (
                listed_consumers(s, SUB) == ["c1", "c2"]
                and s["subscriptions"][SUB]["msgBacklog"] == expected_backlog
            ),
            what=f"c1 and c2 with a backlog of {expected_backlog}",
        )

        port = free_port()
        store_dir = tmp_path / "store"
        env = {
            **clean_environ(),
            "PULSAR_ADMIN_TOKEN": SENTINEL,
        }
        argv = [
            sys.executable,
            "-m",
            "pulsar_lens.cli.main",
            "collect",
            "--admin-url",
            pulsar.admin_url,
        ]
        # bounded, but not before the test's own SIGTERM: 25 polls once ended first on a loaded
        # machine, and a SIGTERM while a bounded run stores its last analyses kills it (-15)
        argv += ["--store", str(store_dir), "--interval", "1s", "--max-polls", "400"]
        argv += ["--metrics-port", str(port), "--namespace", "public/default"]
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        labels = frozenset({"topic": topic, "subscription": SUB}.items())

        def stuck_scrape() -> tuple[str, Samples] | None:
            assert proc is not None and proc.poll() is None, "collect exited early"
            try:
                text, found = scrape(port)
            except (requests.ConnectionError, requests.Timeout):  # not up yet, or busy
                return None
            stuck = found.get(("pulsar_lens_stuck_hashes", labels)) == draining
            # the held hashes can show as stuck from the first poll; the counters need three
            polled = found.get(("pulsar_lens_polls_total", frozenset()), 0) >= 3
            return (text, found) if stuck and polled else None

        # collect's start and three polls of a shared broker: minutes at worst on a busy machine
        text, found = wait_for(stuck_scrape, what="the held hashes to show as stuck", timeout=180)
        broker = sub_stats(pulsar, topic)
        backlog = found[("pulsar_lens_subscription_backlog_messages", labels)]
        assert backlog == broker["msgBacklog"] == expected_backlog
        gauge = found[("pulsar_lens_subscription_draining_hashes", labels)]
        assert gauge == broker["drainingHashesCount"] == draining == len(moved_hashes)
        assert found[("pulsar_lens_subscription_msg_in_replay", labels)] >= len(moved)

        stored = Store(store_dir).read_latest("subscriptions").to_pandas()
        (row,) = stored[(stored["topic"] == topic) & (stored["subscription"] == SUB)].to_dict(
            "records"
        )
        assert (row["msg_backlog"], row["draining_hashes_count"]) == (backlog, gauge)
        assert found[("pulsar_lens_polls_total", frozenset())] >= 3
        assert found[("pulsar_lens_failed_polls_total", frozenset())] == 0
        assert found[("pulsar_lens_poll_endpoint_errors", frozenset())] == 0
        assert found[("pulsar_lens_poll_requests", frozenset())] > 0
        # seconds, not milliseconds: a poll a second, a wide margin for a busy machine
        assert 0 <= found[("pulsar_lens_snapshot_age_seconds", frozenset())] < 60
        errors = {k: v for k, v in found.items() if k[0] == "pulsar_lens_plugin_errors"}
        assert errors and not any(errors.values()), errors
        statuses = [
            dict(k[1])["status"]
            for k, v in found.items()
            if k[0] == "pulsar_lens_subscription_status" and labels <= k[1] and v == 1
        ]
        assert len(statuses) == 1 and statuses[0] != "OK", statuses  # a backlog nobody acks
        assert SENTINEL not in text
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                output, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            assert SENTINEL not in output
        for consumer in consumers:
            consumer.close()
        client.close()
    assert proc.returncode == 0, output[-2000:]
