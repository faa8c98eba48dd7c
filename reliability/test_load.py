"""Load: a collect and every dashboard page on a live broker carrying 2,000 topics with two
subscriptions each and 200 Key_Shared consumers, first a standalone, then two brokers with
the bundles (so the topics) spread over both; then 100,000 synthetic topics through the
collector's parsers and assembly, the store and the dashboard's data layer.

Bounds (generous, to show nothing hung or ran away; the figures are the point):
- `pulsar-lens collect --max-polls 1` exits 0 with errors=0 within COLLECT_SECONDS, its own
  peak RSS under COLLECT_RSS_MIB, and the store holds every topic, subscription and consumer;
- each page (the Overview and every plugin page) renders from cold caches without an
  exception or st.error within PAGE_SECONDS;
- the 100,000-topic run finishes within SYNTH_SECONDS under SYNTH_RSS_MIB, its snapshot holds
  every generated row and no analysis failed.

Figures: artifacts/reliability/load-standalone.json, load-two-brokers.json, load-synthetic.json.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from pulsar_lens.collectors.namespaces import bundle_for, parse_boundaries
from pulsar_lens.core import logs
from pulsar_lens.core.store import Store
from pulsar_lens.lab.cluster import LocalPulsarCluster
from pulsar_lens.lab.localpulsar import LocalPulsar
from reliability.harness import (
    MIB,
    connect_key_shared,
    create_topics,
    lens_argv,
    lens_env,
    render_pages,
    run_measured,
    scale,
    wait_for_bulk,
    write_figures,
)
from tests.pages import PAGE_SLUGS

TOPICS = scale("TOPICS", 2000)
SUBSCRIPTIONS = 2
KEY_SHARED_TOPICS, PER_TOPIC = scale("KEY_SHARED_TOPICS", 100), 2  # 200 consumers
SYNTH_TOPICS = scale("SYNTH_TOPICS", 100_000)
NAMESPACE = "public/default"
SETUP_SECONDS = 900.0
COLLECT_SECONDS, COLLECT_RSS_MIB = 180.0, 1024
PAGE_SECONDS = 120.0
SYNTH_SECONDS, SYNTH_RSS_MIB = 1200.0, 8192
BEAT = re.compile(r"topics=(\d+) subs=(\d+) requests=(\d+) errors=(\d+) duration=([\d.]+)s")


def load_and_measure(
    name: str, admin_urls: list[str], service_url: str, tmp_path: Path, extra: dict[str, Any]
) -> dict[str, Any]:
    """Set the load up, collect once, render every page; the figures (also written)."""
    figures: dict[str, Any] = {
        "topics": TOPICS,
        "subscriptions_per_topic": SUBSCRIPTIONS,
        "key_shared_consumers": KEY_SHARED_TOPICS * PER_TOPIC,
        "bounds": {
            "collect_seconds": COLLECT_SECONDS,
            "collect_peak_rss_mib": COLLECT_RSS_MIB,
            "page_seconds": PAGE_SECONDS,
        },
        **extra,
    }
    names = [f"persistent://{NAMESPACE}/load-{i}" for i in range(TOPICS)]
    deadline = time.monotonic() + SETUP_SECONDS
    figures["create_seconds"] = round(
        create_topics(admin_urls[0], names, SUBSCRIPTIONS, deadline=deadline), 1
    )
    client = logs.pulsar_client(service_url, operation_timeout_seconds=60)
    try:
        _, seconds = connect_key_shared(client, names[:KEY_SHARED_TOPICS], PER_TOPIC)
        figures["subscribe_seconds"] = round(seconds, 1)
        want = (TOPICS, TOPICS * SUBSCRIPTIONS, KEY_SHARED_TOPICS * PER_TOPIC)
        figures["bulk_seen"] = wait_for_bulk(admin_urls, NAMESPACE, want, timeout=120)

        store = tmp_path / "store"
        run = run_measured(
            lens_argv(
                "collect", "--max-polls", "1", "--admin-url", admin_urls[0], "--store", str(store)
            ),
            env=lens_env(store),
            timeout=COLLECT_SECONDS * 2,
            workdir=tmp_path,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        beat = BEAT.search(run.stdout)
        assert beat, run.stdout
        topics, subs, requests_made, errors, duration = beat.groups()
        figures["collect"] = {
            "seconds": round(run.seconds, 2),
            "poll_duration_seconds": float(duration),
            "peak_rss_mib": round(run.peak_rss_bytes / MIB, 1),
            "cpu_seconds": round(run.cpu_seconds, 2),
            "requests": int(requests_made),
            "heartbeat": run.stdout.strip().splitlines()[-1],
        }
        assert int(errors) == 0, run.stdout
        assert int(topics) >= TOPICS and int(subs) >= TOPICS * SUBSCRIPTIONS, run.stdout

        latest = Store(store)
        consumers = latest.read_latest("consumers").to_pandas()
        ours = consumers[consumers["topic"].isin(names[:KEY_SHARED_TOPICS])]
        assert len(ours) == KEY_SHARED_TOPICS * PER_TOPIC
        ranged = int(ours["hash_ranges"].map(lambda r: r is not None and len(r) > 0).sum())
        figures["consumers_with_hash_ranges"] = ranged
        subscriptions = latest.read_latest("subscriptions").to_pandas()
        figures["stored"] = {
            "topics": int(latest.read_latest("topics").num_rows),
            "subscriptions": len(subscriptions),
            "consumers": len(consumers),
        }
        assert subscriptions["topic"].isin(names).sum() == TOPICS * SUBSCRIPTIONS

        pages = render_pages(store, PAGE_SLUGS, timeout=PAGE_SECONDS)
        figures["pages"] = pages
        figures["pages_total_seconds"] = round(sum(p["seconds"] for p in pages.values()), 2)
        write_figures(name, figures)
        problems = {page: p["problems"] for page, p in pages.items() if p["problems"]}
        assert not problems, problems
        slow = {page: p["seconds"] for page, p in pages.items() if p["seconds"] > PAGE_SECONDS}
        assert not slow, slow
        assert run.seconds < COLLECT_SECONDS, figures["collect"]
        assert run.peak_rss_bytes < COLLECT_RSS_MIB * MIB, figures["collect"]
    finally:
        write_figures(name, figures)
        client.close()
    return figures


@pytest.mark.timeout(1800)
def test_load_on_a_standalone(tmp_path: Path) -> None:
    with LocalPulsar() as pulsar:
        load_and_measure("load-standalone", [pulsar.admin_url], pulsar.service_url, tmp_path, {})


def spread_bundles(admin_url: str, broker_ids: list[str]) -> dict[str, str]:
    """Own every bundle of NAMESPACE (a lookup of a topic in it), then move bundle i to
    broker i mod 2 (unload with destinationBroker); {bundle: owner}."""
    session = requests.Session()
    base = f"{admin_url}/admin/v2/namespaces/{NAMESPACE}"
    boundaries = parse_boundaries(session.get(f"{base}/bundles", timeout=30).json())
    probes: dict[str, str] = {}
    i = 0
    while len(probes) < len(boundaries) - 1 and i < 10_000:
        topic = f"persistent://{NAMESPACE}/spread-{i}"
        probes.setdefault(bundle_for(topic, boundaries), topic)
        i += 1

    def owner(topic: str) -> str:
        answer = session.get(f"{admin_url}/lookup/v2/topic/{topic.replace('://', '/')}", timeout=30)
        answer.raise_for_status()
        return str(answer.json()["httpUrl"]).split("://", 1)[-1].rstrip("/")

    owners: dict[str, str] = {}
    for n, (bundle, topic) in enumerate(sorted(probes.items())):
        want = broker_ids[n % len(broker_ids)]
        deadline = time.monotonic() + 60
        while (now := owner(topic)) != want and time.monotonic() < deadline:
            session.put(f"{base}/{bundle}/unload", params={"destinationBroker": want}, timeout=60)
            time.sleep(2)
        assert now == want, f"bundle {bundle} stayed on {now}"
        owners[bundle] = now
    session.close()
    return owners


@pytest.mark.timeout(2400)
def test_load_on_two_brokers(tmp_path: Path) -> None:
    with LocalPulsarCluster(brokers=2, load_manager="modular") as cluster:
        owners = spread_bundles(cluster.admin_url, cluster.broker_ids)
        assert set(owners.values()) == set(cluster.broker_ids)
        figures = load_and_measure(
            "load-two-brokers",
            cluster.admin_urls,
            cluster.service_url,
            tmp_path,
            {"bundle_owners": owners},
        )
        topics_per_broker = {}
        for b, url in zip(cluster.broker_ids, cluster.admin_urls, strict=True):
            payload = requests.get(f"{url}/admin/v2/broker-stats/topics", timeout=60).json()
            topics_per_broker[b] = sum(
                len(t) for bundles in payload.get(NAMESPACE, {}).values() for t in bundles.values()
            )
        figures["topics_per_broker"] = topics_per_broker
        write_figures("load-two-brokers", figures)
        assert all(n > TOPICS // 4 for n in topics_per_broker.values()), topics_per_broker


@pytest.mark.timeout(int(SYNTH_SECONDS) + 120)
def test_load_of_synthetic_topics_through_the_parsers_and_data_layer(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = run_measured(
        [
            sys.executable,
            *("-m", "benchmarks.synth_admin", "--topics", str(SYNTH_TOPICS)),
            *("--store", str(store), "--slugs", ",".join(PAGE_SLUGS)),
        ],
        env=lens_env(store),
        timeout=SYNTH_SECONDS,
        workdir=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    figures = {
        **result,
        "wall_seconds": round(run.seconds, 1),
        "cpu_seconds": round(run.cpu_seconds, 1),
        "child_peak_rss_mib": round(run.peak_rss_bytes / MIB, 1),
        "bounds": {"seconds": SYNTH_SECONDS, "peak_rss_mib": SYNTH_RSS_MIB},
    }
    write_figures("load-synthetic", figures)
    generated, rows = result["generated"], result["snapshot_rows"]
    assert rows["topics"] == generated["topics"] == SYNTH_TOPICS
    assert rows["subscriptions"] == generated["subscriptions"]
    assert rows["consumers"] == generated["consumers"]
    assert rows["errors"] == 0
    assert result["read_rows"]["topics"] == SYNTH_TOPICS
    assert not result["analysis_failures"]
    assert run.peak_rss_bytes < SYNTH_RSS_MIB * MIB
