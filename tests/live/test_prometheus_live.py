"""The stuck-hash alert of deploy/prometheus/alerts.yml in a real Prometheus, on a real stuck
hash of a real Pulsar 4.0 broker.

c1 holds keyed messages on a Key_Shared subscription; c2 joins and takes part of the hash
space, so the broker drains, for c1, the pending hashes that moved; messages sent with those
keys wait. `pulsar-lens collect --metrics-port` polls every 2 s; a Prometheus server
(/usr/bin/prometheus, loopback, temporary TSDB) scrapes it every 2 s and evaluates the rule
file every second. Through Prometheus's own HTTP API the alert must go pending, then firing
with the cluster, topic and subscription labels; once c1 acknowledges, it must resolve.

The rule file is alerts.yml as shipped except for one field: PulsarLensStuckHashes's `for:`
(5m in production) is 3s here, so the test takes seconds, not minutes. Its expression,
labels and annotations are the production ones.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pulsar
import yaml

from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from tests.deploy.prometheus_server import PrometheusServer, wait_until
from tests.lens_cli import clean_environ
from tests.live.lens_polls import (
    listed_consumers,
    new_topic,
    pulsar_client,
    topic_stats,
    wait_for_bulk,
)

log = logging.getLogger(__name__)
RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
ALERT = "PulsarLensStuckHashes"
HOLD = "3s"
SUB = "prom-ks"
CLUSTER = "live"
KEYS = [f"account-{i}" for i in range(40)]


def sticky_hash(key: str) -> int:
    """The 4.0 consistent-hashing selector's sticky hash of a partition key."""
    return murmur3_31(key.encode()) % 65535 + 1


def sub_stats(broker: LocalPulsar, topic: str) -> dict[str, Any]:
    stats: dict[str, Any] = topic_stats(broker, topic)["subscriptions"][SUB]
    return stats


def subscribe(client: pulsar.Client, topic: str, name: str, **kwargs: Any) -> pulsar.Consumer:
    return client.subscribe(
        topic, SUB, consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name, **kwargs
    )


def acking(consumer: pulsar.Consumer, message: pulsar.Message) -> None:
    consumer.acknowledge(message)


def rules_with_short_hold(folder: Path) -> Path:
    """alerts.yml with only the stuck-hash alert's `for:` changed to HOLD."""
    original = yaml.safe_load(RULES.read_text())
    short = yaml.safe_load(RULES.read_text())
    (rule,) = [r for g in short["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    assert rule["for"] == "5m"
    rule["for"] = HOLD
    assert short != original
    assert {**short, "groups": None} == {**original, "groups": None}
    for mine, theirs in zip(short["groups"], original["groups"], strict=True):
        for a, b in zip(mine["rules"], theirs["rules"], strict=True):
            assert {**a, "for": None} == {**b, "for": None}  # nothing else differs
    path = folder / "alerts.yml"
    path.write_text(yaml.safe_dump(short, sort_keys=False))
    return path


def ours(prom: PrometheusServer, topic: str) -> list[dict[str, Any]]:
    return [a for a in prom.alerts(ALERT) if a["labels"].get("topic") == topic]


def rule_state(prom: PrometheusServer) -> dict[str, Any]:
    groups = prom.api("rules", type="alert")["groups"]
    (rule,) = [r for g in groups for r in g["rules"] if r["name"] == ALERT]
    return dict(rule)


def diagnosis(prom: PrometheusServer, topic: str) -> str:
    """What Prometheus saw: its targets' health and last error, the series, the rule."""
    targets = [
        (t["health"], t["lastError"], t["lastScrapeDuration"])
        for t in prom.api("targets")["activeTargets"]
    ]
    series = prom.query(f'pulsar_lens_stuck_hashes{{topic="{topic}"}}')
    return f"targets {targets}; {scrape_health(prom)}; series {series}; rule {rule_state(prom)}"


def scrape_health(prom: PrometheusServer) -> dict[str, float]:
    """Scrapes so far, how many succeeded, their mean and longest duration (seconds)."""
    asked = {
        "scrapes": "count_over_time(up[10m])",
        "up": "sum_over_time(up[10m])",
        "mean_s": "avg_over_time(scrape_duration_seconds[10m])",
        "max_s": "max_over_time(scrape_duration_seconds[10m])",
    }
    found = {key: prom.query(expr) for key, expr in asked.items()}
    return {key: round(float(r[0]["value"][1]), 3) for key, r in found.items() if r}


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def test_prometheus_live_stuck_hash_alert_fires_then_resolves(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    topic = new_topic("prom")
    client = pulsar_client(pulsar)
    proc: subprocess.Popen[str] | None = None
    collect_log = tmp_path / "collect.log"
    try:
        c1 = subscribe(client, topic, "c1")  # holds every message until told to ack
        producer = client.create_producer(topic, batching_enabled=False)
        for key in KEYS:
            producer.send(f"first-{key}".encode(), partition_key=key)
        wait_until(
            lambda: sub_stats(pulsar, topic)["unackedMessages"] == len(KEYS),
            what="c1 to hold every message",
            timeout=30,
        )
        subscribe(client, topic, "c2", message_listener=acking)
        draining = wait_until(
            lambda: sub_stats(pulsar, topic).get("drainingHashesCount"),
            what="hashes draining for c1 after c2 joined",
            timeout=30,
        )
        listed = sub_stats(pulsar, topic)["consumers"]
        c1_stats = next(c for c in listed if c["consumerName"] == "c1")
        moved_hashes = {d["hash"] for d in c1_stats["drainingHashes"]}
        moved = [k for k in KEYS if sticky_hash(k) in moved_hashes]
        assert moved, "c2 took no hash of the pending keys; use more keys"
        for key in moved:  # these wait for c1: blocked attempts > 0, the hashes get stuck
            producer.send(f"blocked-{key}".encode(), partition_key=key)
        wait_for_bulk(  # what collect's first poll reads
            pulsar, topic, lambda s: listed_consumers(s, SUB) == ["c1", "c2"], what="c1 and c2"
        )

        port = free_port()
        env = clean_environ()
        argv = [
            sys.executable,
            "-m",
            "pulsar_lens.cli.main",
            "collect",
            "--admin-url",
            pulsar.admin_url,
        ]
        argv += ["--store", str(tmp_path / "store"), "--interval", "2s", "--max-polls", "100"]
        argv += ["--metrics-port", str(port), "--namespace", "public/default"]
        with collect_log.open("w") as sink:
            proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
        rules = rules_with_short_hold(tmp_path)
        began = time.monotonic()
        with PrometheusServer(
            tmp_path / "prometheus",
            targets=[f"127.0.0.1:{port}"],
            labels={"cluster": CLUSTER},
            rule_files=[rules],
            interval="2s",
        ) as prom:
            seen: list[str] = []

            def firing() -> dict[str, Any] | None:
                assert proc is not None and proc.poll() is None, "collect exited early"
                alerts = ours(prom, topic)
                seen.extend(a["state"] for a in alerts if a["state"] not in seen[-1:])
                return next((a for a in alerts if a["state"] == "firing"), None)

            try:
                alert = wait_until(firing, what=f"{ALERT} firing for {topic}", timeout=90)
            except AssertionError as exc:
                tail = collect_log.read_text()[-1500:]
                raise AssertionError(
                    f"{exc}; seen {seen}; {diagnosis(prom, topic)}; collect log: {tail}"
                ) from None
            log.info("%s firing %.1fs after collect started", ALERT, time.monotonic() - began)
            assert seen[0] == "pending", seen  # held for `for:` before it fired
            labels = alert["labels"]
            assert labels["cluster"] == CLUSTER and labels["subscription"] == SUB
            assert labels["severity"] == "critical" and labels["job"] == "pulsar-lens"
            assert float(alert["value"]) == draining == len(moved_hashes)
            summary = alert["annotations"]["summary"]
            assert summary == f"{draining} stuck Key_Shared hash(es) on {SUB} ({CLUSTER})"
            assert f"topic {topic}, subscription {SUB}" in alert["annotations"]["description"]
            assert rule_state(prom)["state"] == "firing"

            acked = time.monotonic()
            for _ in KEYS:  # c1 acknowledges: the hashes stop draining, the waiters go to c2
                c1.acknowledge(c1.receive(timeout_millis=10_000))

            def resolved() -> bool:  # on a scraped 0, not on a series gone stale
                stuck = prom.query(f'pulsar_lens_stuck_hashes{{topic="{topic}"}}')
                zero = [float(s["value"][1]) for s in stuck] == [0.0]
                return zero and not ours(prom, topic) and rule_state(prom)["state"] == "inactive"

            wait_until(resolved, what=f"{ALERT} to resolve for {topic}", timeout=60)
            log.info("%s resolved %.1fs after c1 acked", ALERT, time.monotonic() - acked)
            log.info("scrapes: %s", scrape_health(prom))
            wait_until(
                lambda: sub_stats(pulsar, topic)["msgBacklog"] == 0,
                what="c2 to receive and ack the messages that waited",
                timeout=30,
            )
    finally:
        if proc is not None:
            stop(proc)
        client.close()
    assert proc is not None and proc.returncode == 0, collect_log.read_text()[-2000:]
