"""poll() against the per-topic way of collecting stats, on a real local Pulsar 4.0.

    .venv/bin/python benchmarks/collect.py [--topics 1000] [--subscriptions 2] [--key-shared 10]

Starts a LocalPulsar, creates `topics` topics with `subscriptions` subscriptions each over
REST (`PUT .../{topic}/subscription/{sub}` creates both), puts two Key_Shared consumers on
`key-shared` of them, waits until the broker's bulk stats list them all, then times, in the
same run and alternating, our `poll()` of the whole cluster against the baseline that scripts
around `pulsar-admin topics stats` use: list tenants, namespaces and topics, then one
`GET .../{topic}/stats` per topic, sequentially. Prints both medians, the ratio and the
request counts.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pulsar as pulsar_client
import requests

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.topics import parse_topic_name
from pulsar_lens.core import logs
from pulsar_lens.lab.localpulsar import LocalPulsar

CREATE_WORKERS = 8
SETUP_DEADLINE = 600.0


def create_topics(admin: str, namespace: str, topics: int, subscriptions: int) -> list[str]:
    """Create the topics and their subscriptions with bounded concurrency; return names."""
    names = [f"persistent://{namespace}/bench-{i}" for i in range(topics)]
    subscribe_all(admin, names, subscriptions, deadline=time.monotonic() + SETUP_DEADLINE)
    return names


def subscribe_all(admin: str, names: Sequence[str], subscriptions: int, *, deadline: float) -> None:
    """Create each topic and its subscriptions `sub-0..` over REST (`PUT .../subscription/x`
    creates both), `CREATE_WORKERS` at a time, before `deadline` (time.monotonic())."""
    with requests.Session() as session:

        def create(topic: str) -> None:
            rest = topic.removeprefix("persistent://")
            for j in range(subscriptions):
                if time.monotonic() > deadline:
                    raise TimeoutError("creating the topics took too long")
                url = f"{admin}/admin/v2/persistent/{rest}/subscription/sub-{j}"
                for attempt in range(5):  # a bundle being loaded answers 503 for a moment
                    resp = session.put(url, timeout=60)
                    if resp.status_code in (204, 409):
                        break
                    if resp.status_code < 500 or attempt == 4:
                        raise RuntimeError(f"PUT {url} -> {resp.status_code} {resp.text[:200]}")
                    time.sleep(1.0)

        with ThreadPoolExecutor(CREATE_WORKERS) as pool:
            list(pool.map(create, names))


def bulk_topic_count(admin: str, namespace: str) -> int:
    payload = requests.get(f"{admin}/admin/v2/broker-stats/topics", timeout=60).json() or {}
    return sum(len(topics) for b in payload.get(namespace, {}).values() for topics in b.values())


def wait_for_bulk(admin: str, namespace: str, expected: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if bulk_topic_count(admin, namespace) >= expected:
            return
        time.sleep(1)
    raise TimeoutError(f"broker-stats/topics never listed {expected} topics of {namespace}")


def baseline(client: AdminClient) -> int:
    """Per-topic collection, sequential; returns the topics read."""
    count = 0
    for tenant in client.get_json("/admin/v2/tenants"):
        for namespace in client.get_json(f"/admin/v2/namespaces/{tenant}"):
            for topic in client.get_json(f"/admin/v2/persistent/{namespace}"):
                client.get_json(f"{parse_topic_name(topic).admin_path}/stats")
                count += 1
    return count


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def measure(admin: str, rounds: int) -> None:
    ours, theirs = [], []
    ours_requests = theirs_requests = topics_seen = 0
    for _ in range(rounds):
        client = AdminClient(admin, timeout=60)
        seconds, snapshot = timed(lambda c=client: poll(c, timeout=60))
        if snapshot.errors:
            raise RuntimeError(f"poll had errors: {snapshot.errors[:3]}")
        ours.append(seconds)
        ours_requests, topics_seen = snapshot.requests, len(snapshot.topics)
        client = AdminClient(admin, timeout=60)
        seconds, read = timed(lambda c=client: baseline(c))
        theirs.append(seconds)
        theirs_requests = client.requests_made
    ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
    print(f"topics in the cluster          {topics_seen}")
    print(f"poll()              median {ours_s:8.3f} s   {ours_requests:6d} requests")
    print(f"per-topic baseline  median {theirs_s:8.3f} s   {theirs_requests:6d} requests")
    print(f"  (the baseline read the stats of {read} topics)")
    print(f"speed-up                   {theirs_s / ours_s:8.1f} x")
    print(f"request ratio              {theirs_requests / ours_requests:8.1f} x")


def add_key_shared(service_url: str, topics: list[str]) -> Any:
    client = logs.pulsar_client(service_url, operation_timeout_seconds=60)
    for topic in topics:
        for name in ("ks-a", "ks-b"):
            client.subscribe(
                topic, "ks", consumer_type=pulsar_client.ConsumerType.KeyShared, consumer_name=name
            )
    return client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--subscriptions", type=int, default=2)
    parser.add_argument("--key-shared", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    broker = LocalPulsar().start()
    client = None
    try:
        namespace = f"public/bench-{uuid.uuid4().hex[:6]}"
        requests.put(f"{broker.admin_url}/admin/v2/namespaces/{namespace}", timeout=30)
        seconds, names = timed(
            lambda: create_topics(broker.admin_url, namespace, args.topics, args.subscriptions)
        )
        print(
            f"created {len(names)} topics x {args.subscriptions} subscriptions in {seconds:.1f} s"
        )
        client = add_key_shared(broker.service_url, names[: args.key_shared])
        wait_for_bulk(broker.admin_url, namespace, len(names))
        time.sleep(3)  # one more bulk refresh, so the Key_Shared consumers are listed
        measure(broker.admin_url, args.rounds)
    finally:
        if client is not None:
            client.close()
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
