"""When a local cluster's members are ready: ZooKeeper answers `ruok`, a broker is listed and
answers a lookup, every broker lists every other one. Probed over 127.0.0.1 by
`lab.cluster.LocalPulsarCluster` while it starts, and by its `ready()`."""

from __future__ import annotations

import socket
import urllib.error
from collections.abc import Sequence

from pulsar_lens.lab.cluster_conf import CLUSTER_NAME, ClusterProcess
from pulsar_lens.lab.processes import get_json


def broker_ready(broker: ClusterProcess) -> bool:
    """Listed among the cluster's brokers, `public/default` readable, and a lookup
    answered through it (the load manager assigns bundles)."""
    try:
        listed = get_json(f"{broker.admin_url}/admin/v2/brokers/{CLUSTER_NAME}")
        get_json(f"{broker.admin_url}/admin/v2/namespaces/public/default/bundles")
        owner = get_json(
            f"{broker.admin_url}/lookup/v2/topic/persistent/public/default/lens-ready",
            timeout=10.0,
        )
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return (
        isinstance(listed, list)
        and broker.broker_id in listed
        and isinstance(owner, dict)
        and bool(owner.get("brokerUrl"))
    )


def cluster_ready(brokers: Sequence[ClusterProcess]) -> bool:
    """Every broker lists every other one, and each answers for `public/default`."""
    ids = [b.broker_id for b in brokers]
    try:
        for broker in brokers:
            listed = get_json(f"{broker.admin_url}/admin/v2/brokers/{CLUSTER_NAME}")
            if not isinstance(listed, list) or set(ids) - set(listed):
                return False
            get_json(f"{broker.admin_url}/admin/v2/namespaces/public/default/bundles")
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return True


def zk_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 1.0) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False
