"""poll() against the per-topic way of collecting stats, on a real local Pulsar 4.0.

    .venv/bin/python benchmarks/collect.py [--topics 1000] [--subscriptions 2] [--key-shared 10]
        [--admin-url URL --service-url URL]

Starts a LocalPulsar (or, with `--admin-url` and `--service-url`, uses that Pulsar: a test
cluster, since it creates a namespace there, polls only that namespace and deletes it at the
end), creates `topics` topics with `subscriptions` subscriptions each over
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


def wait_for_bulk(admin: str, namespace: str, expected: int, key_shared: Sequence[str]) -> None:
    """Until the brokers' bulk stats list `expected` topics of `namespace` and both Key_Shared
    consumers of each `key_shared` topic (the bulk answer is refreshed every few seconds)."""
    deadline = time.monotonic() + 180
    seen: tuple[int, int] = (0, 0)
    while time.monotonic() < deadline:
        seen = bulk_counts(admin, namespace, key_shared)
        if seen >= (expected, len(key_shared)):
            return
        time.sleep(1)
    raise TimeoutError(
        f"broker-stats/topics listed {seen[0]} of {expected} topics of {namespace} and "
        f"{seen[1]} of {len(key_shared)} Key_Shared subscriptions with both consumers"
    )


def bulk_counts(admin: str, namespace: str, key_shared: Sequence[str]) -> tuple[int, int]:
    """(topics of `namespace` in the bulk stats, `key_shared` topics whose "ks" subscription
    lists two consumers there)."""
    payload = requests.get(f"{admin}/admin/v2/broker-stats/topics", timeout=60).json() or {}
    topics: dict[str, Any] = {}
    for bundle in payload.get(namespace, {}).values():
        for domain in bundle.values():
            topics.update(domain)
    wanted = set(key_shared)
    both = sum(
        len(((stats.get("subscriptions") or {}).get("ks") or {}).get("consumers") or ()) >= 2
        for topic, stats in topics.items()
        if topic in wanted
    )
    return len(topics), both


def baseline(client: AdminClient, namespaces: Sequence[str] | None = None) -> int:
    """Per-topic collection, sequential, of `namespaces` (else of every tenant's); returns
    the topics read."""
    if namespaces is None:
        tenants = client.get_json("/admin/v2/tenants")
        namespaces = [ns for t in tenants for ns in client.get_json(f"/admin/v2/namespaces/{t}")]
    count = 0
    for namespace in namespaces:
        for topic in client.get_json(f"/admin/v2/persistent/{namespace}"):
            client.get_json(f"{parse_topic_name(topic).admin_path}/stats")
            count += 1
    return count


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def measure(admin: str, rounds: int, namespaces: Sequence[str] | None = None) -> None:
    """Both ways, `rounds` times, of the whole cluster or only of `namespaces`."""
    ours, theirs = [], []
    ours_requests = theirs_requests = topics_seen = 0
    for _ in range(rounds):
        client = AdminClient(admin, timeout=60)
        seconds, snapshot = timed(lambda c=client: poll(c, namespaces=namespaces, timeout=60))
        if snapshot.errors:
            raise RuntimeError(f"poll had errors: {snapshot.errors[:3]}")
        ours.append(seconds)
        ours_requests, topics_seen = snapshot.requests, len(snapshot.topics)
        client = AdminClient(admin, timeout=60)
        seconds, read = timed(lambda c=client: baseline(c, namespaces))
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
    parser.add_argument("--admin-url", help="a running test cluster's, instead of a LocalPulsar")
    parser.add_argument("--service-url", help="with --admin-url: its binary protocol URL")
    args = parser.parse_args(argv)
    if bool(args.admin_url) != bool(args.service_url):
        parser.error("--admin-url and --service-url go together")
    logging.basicConfig(level=logging.WARNING)
    broker: LocalPulsar | None = None
    if args.admin_url:
        admin, service = args.admin_url, args.service_url
    else:
        broker = LocalPulsar().start()
        admin, service = broker.admin_url, broker.service_url
    namespace = f"public/bench-{uuid.uuid4().hex[:6]}"
    client = None
    try:
        requests.put(f"{admin}/admin/v2/namespaces/{namespace}", timeout=30).raise_for_status()
        seconds, names = timed(
            lambda: create_topics(admin, namespace, args.topics, args.subscriptions)
        )
        print(
            f"created {len(names)} topics x {args.subscriptions} subscriptions in {seconds:.1f} s"
        )
        client = add_key_shared(service, names[: args.key_shared])
        wait_for_bulk(admin, namespace, len(names), names[: args.key_shared])
        measure(admin, args.rounds, namespaces=None if broker else [namespace])
    finally:
        if client is not None:
            client.close()
        if broker is not None:
            broker.stop()
        else:  # leave the cluster as it was found
            delete_namespace(admin, namespace)
    return 0


def delete_namespace(admin: str, namespace: str) -> None:
    """Delete `namespace`'s topics (forced: their subscriptions go too), then the namespace
    (brokers refuse a forced namespace deletion by default)."""
    with requests.Session() as session:
        listed = session.get(f"{admin}/admin/v2/persistent/{namespace}", timeout=60)
        listed.raise_for_status()
        for topic in listed.json():
            path = parse_topic_name(topic).admin_path
            session.delete(f"{admin}{path}?force=true", timeout=60).raise_for_status()
        session.delete(f"{admin}/admin/v2/namespaces/{namespace}", timeout=120).raise_for_status()


if __name__ == "__main__":
    sys.exit(main())
