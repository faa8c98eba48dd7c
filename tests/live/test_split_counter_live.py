"""The modular load manager's split counter on a real two-broker cluster: its own splits only.

bundle-ownership reads the modular load manager's `brk_lb_bundles_split_total` as the splits
the load manager made (the extensible one's total holds the admin API's too, which the poll
takes off: tests/live/test_unload_drill_live.py). Here an admin split and automatic splits
come in one window: the leader's counter must grow by the automatic ones alone, which its
log names one by one, and the poll must store what the counter says. Measured on 4.0.7: the
counter counts the splits that succeeded, not the ones tried (the leader tries some bundles
again from a load report older than their split, and fails).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core import logs
from pulsar_lens.lab.cluster import LocalPulsarCluster
from tests.brokers import CLUSTER_SETTINGS, BrokerPool
from tests.live.lens_polls import namespace_bundles, wait_for

SPLIT_SETTINGS = {**CLUSTER_SETTINGS, "loadBalancerAutoBundleSplitEnabled": "true"}
"""Automatic splits on (the lab's clusters have them off), at the default thresholds: none
happens until the test lowers `loadBalancerNamespaceBundleMaxTopics`."""
NAMESPACE = "public/splits"
TOPICS = 12
MAX_TOPICS = "loadBalancerNamespaceBundleMaxTopics"
SPLIT_LINE = re.compile(r"ModularLoadManagerImpl - Successfully split namespace bundle (\S+)")
COUNTERS = ("brk_lb_bundles_split_total", "brk_lb_bundles_split_count")


@pytest.fixture(scope="module")
def splitting(broker_pool: BrokerPool) -> Iterator[LocalPulsarCluster]:
    try:
        yield broker_pool.cluster("modular", SPLIT_SETTINGS)
    finally:
        broker_pool.release("modular", SPLIT_SETTINGS)


def counted(cluster: LocalPulsarCluster) -> int | None:
    """The brokers' split counters summed, as their dimension metrics list them (None until
    one lists it: the leader does after its first check for bundles to split)."""
    found = None
    for broker in cluster.broker_ids:
        url = f"http://{broker}/admin/v2/broker-stats/metrics"
        for entry in requests.get(url, timeout=30).json():
            for name, value in entry["metrics"].items():
                if name in COUNTERS:
                    found = (found or 0) + int(value)
    return found


def split_by_log(cluster: LocalPulsarCluster) -> list[str]:
    """Every bundle the load managers logged they split, in log order (the admin API logs
    its own splits under another class and without the namespace)."""
    return [
        m.group(1)
        for broker in cluster.broker_processes
        for m in SPLIT_LINE.finditer(broker.log_path.read_text(errors="replace"))
    ]


def bundles(url: str) -> list[str]:
    return namespace_bundles(url, NAMESPACE)


@pytest.mark.timeout(600)
def test_the_modular_load_managers_split_count_leaves_out_an_admin_split(
    splitting: LocalPulsarCluster,
) -> None:
    url = splitting.admin_url
    requests.put(
        f"{url}/admin/v2/namespaces/{NAMESPACE}",
        json={"bundles": {"numBundles": 2}},
        timeout=30,
    ).raise_for_status()
    client = logs.pulsar_client(splitting.service_url, operation_timeout_seconds=30)
    try:
        producers = [
            client.create_producer(f"persistent://{NAMESPACE}/t{i}") for i in range(TOPICS)
        ]
        before = wait_for(
            lambda: counted(splitting), what="the leader's split counter", timeout=180, every=2.0
        )
        logged_before = split_by_log(splitting)
        asked = bundles(url)[0]
        requests.put(
            f"{url}/admin/v2/namespaces/{NAMESPACE}/{asked}/split",
            params={"unload": "false"},
            timeout=60,
        ).raise_for_status()
        after_admin = bundles(url)
        assert asked not in after_admin and len(after_admin) == 3
        # the leader splits every bundle of more than two topics, round after round (each
        # load report it reads), until none has more
        requests.post(
            f"{url}/admin/v2/brokers/configuration/{MAX_TOPICS}/2", timeout=30
        ).raise_for_status()

        def settled() -> tuple[int, list[str]] | None:
            for producer in producers:  # traffic: each broker's next load report
                producer.send(b"x")
            logged = split_by_log(splitting)[len(logged_before) :]
            now = counted(splitting)
            if not logged or now is None or now - before != len(logged):
                return None
            return (now, logged) if len(bundles(url)) > len(after_admin) else None

        now, logged = wait_for(
            settled,
            what="automatic splits counted",
            timeout=240,
            every=3.0,
            seen=lambda: {
                "counted": counted(splitting),
                "before": before,
                "logged": split_by_log(splitting)[len(logged_before) :],
                "bundles": bundles(url),
            },
        )
    finally:
        requests.delete(f"{url}/admin/v2/brokers/configuration/{MAX_TOPICS}", timeout=30)
        client.close()
    assert f"{NAMESPACE}/{asked}" not in logged  # the admin split was no load-manager's
    with AdminClient(url) as admin:
        snapshot = poll(admin, namespaces=[NAMESPACE])
    stored = [b.lb_bundles_split for b in snapshot.brokers if b.lb_bundles_split is not None]
    assert stored and sum(stored) >= now  # more only if the leader split again meanwhile
    assert sum(stored) - before == len(split_by_log(splitting)[len(logged_before) :])
