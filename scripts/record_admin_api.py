#!/usr/bin/env python
"""Record real admin API answers of a local Pulsar for the collector's unit tests.

Starts one LocalPulsar broker per scenario of the release (4.0: the defaults, and the
classic Key_Shared dispatcher with the modular load manager; 3.0: the defaults, and the
auto-split selector with the modular load manager; a later line such as 4.2: the 4.0
scenarios), builds a representative setup on each, runs `poll()` with every answer captured,
and writes them under tests/data/admin_api/<folder>/ with an index.json that the tests
replay through `responses`. The default release (4.0.7) keeps the bare scenario names
(`default/`); another release's folders are prefixed with its line (`3.0-default/`). Ports
are normalised to 127.0.0.1:8080 (web) and :6650 (binary).

    .venv/bin/python scripts/record_admin_api.py [--pulsar 3.0.7]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pulsar as pulsar_client
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pulsar_lens.collectors.admin import AdminClient  # noqa: E402
from pulsar_lens.collectors.poll import poll  # noqa: E402
from pulsar_lens.lab.localpulsar import LocalPulsar  # noqa: E402
from pulsar_lens.lab.runtime import PULSAR_VERSION, release  # noqa: E402

OUT = ROOT / "tests" / "data" / "admin_api"
WEB, BINARY = "127.0.0.1:8080", "127.0.0.1:6650"
MODULAR = {
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "loadBalancerEnabled": "true",
}
SCENARIOS: dict[str, dict[str, dict[str, str]]] = {
    # per broker line: scenario -> broker settings on top of the lab's
    "4.0": {
        "default": {},
        "classic-modular": {
            "subscriptionKeySharedUseClassicPersistentImplementation": "true",
            **MODULAR,
        },
    },
    # 3.0 has only the classic dispatcher (the 4.0 setting that picks it does not exist), so
    # its second scenario varies what 3.0 does let an operator choose: the auto-split selector
    # (16-bit ranges where consistent hashing reports 31-bit ones) and the modular load manager
    "3.0": {
        "default": {},
        "autosplit-modular": {"subscriptionKeySharedUseConsistentHashing": "false", **MODULAR},
    },
}
NS, NS2 = "public/default", "public/second"
ORDERS = f"persistent://{NS}/orders"
PAYMENTS = f"persistent://{NS}/payments"
AUDIT = f"persistent://{NS2}/audit"
KEYS = [f"key-{i}" for i in range(24)]


def _slug(method: str, path: str, query: str) -> str:
    text = f"{method.lower()}{path}{'_' + query if query else ''}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:150]


class Recorder:
    """Captures every response the AdminClient receives."""

    def __init__(self, broker: LocalPulsar) -> None:
        self.broker = broker
        self.entries: list[dict[str, Any]] = []
        self.phase = "poll"  # "reference" for the answers fetched after the poll, for tests

    def normalise(self, text: str) -> str:
        text = text.replace(f"127.0.0.1:{self.broker.web_port}", WEB)
        return text.replace(f"127.0.0.1:{self.broker.broker_port}", BINARY)

    def record(self, resp: requests.Response) -> None:
        url = urlsplit(self.normalise(resp.request.url or ""))
        self.entries.append(
            {
                "method": resp.request.method,
                "base": f"{url.scheme}://{url.netloc}",
                "path": url.path,
                "query": url.query,
                "status": resp.status_code,
                "by": self.phase,
                "body": self.normalise(resp.text),
            }
        )

    def write(self, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        index, seen = [], set()
        for entry in self.entries:
            key = (entry["method"], entry["path"], entry["query"])
            if key in seen:
                continue  # the poll's own answer is kept, later samples are dropped
            seen.add(key)
            body = entry.pop("body")
            name = _slug(entry["method"], entry["path"], entry["query"])
            try:
                text = json.dumps(json.loads(body), indent=1) + "\n" if body else ""
                name += ".json"
            except ValueError:
                text, name = body, name + ".txt"
            if body:
                (folder / name).write_text(text)
            index.append({**entry, "file": name if body else None})
        (folder / "index.json").write_text(json.dumps(index, indent=1) + "\n")


def setup(broker: LocalPulsar) -> pulsar_client.Client:
    """Topics and subscriptions of every type; a Key_Shared consumer left with unacked
    messages when a second one joins, so the broker reports draining hashes."""
    admin = broker.admin_url
    requests.put(f"{admin}/admin/v2/namespaces/{NS2}", timeout=10).raise_for_status()
    requests.put(f"{admin}/admin/v2/persistent/{NS}/payments/partitions", json=3, timeout=10)
    requests.put(f"{admin}/admin/v2/persistent/{NS}/orders/subscription/idle", timeout=10)
    client = pulsar_client.Client(broker.service_url, operation_timeout_seconds=30)
    types = pulsar_client.ConsumerType

    def sub(topic: str, name: str, kind: Any, consumer: str, **kw: Any) -> Any:
        return client.subscribe(topic, name, consumer_type=kind, consumer_name=consumer, **kw)

    sub(ORDERS, "ex", types.Exclusive, "ex-1")
    sub(ORDERS, "sh", types.Shared, "sh-1")
    sub(ORDERS, "sh", types.Shared, "sh-2")
    sub(ORDERS, "fo", types.Failover, "fo-a")
    sub(ORDERS, "fo", types.Failover, "fo-b")
    stuck = sub(ORDERS, "ks", types.KeyShared, "ks-1", receiver_queue_size=20)
    sub(PAYMENTS, "pfo", types.Failover, "pfo-1")
    sub(PAYMENTS, "pfo", types.Failover, "pfo-2")
    sub(PAYMENTS, "pks", types.KeyShared, "pks-1")
    sub(AUDIT, "audit", types.Exclusive, "auditor")
    producer = client.create_producer(ORDERS, batching_enabled=False)
    for i in range(96):
        producer.send(f"m{i}".encode(), partition_key=KEYS[i % len(KEYS)])
    for _ in range(20):
        stuck.receive(timeout_millis=10_000)  # received, never acknowledged
    sub(ORDERS, "ks", types.KeyShared, "ks-2")
    return client


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def bulk_shows_consumers(admin: str) -> bool:
    payload = requests.get(f"{admin}/admin/v2/broker-stats/topics", timeout=10).json()
    text = json.dumps(payload)
    return all(name in text for name in ("ks-2", "pks-1", "pfo-2", "auditor", "sh-2"))


def has_load_report(admin: str) -> bool:
    resp = requests.get(f"{admin}/admin/v2/broker-stats/load-report", timeout=10)
    return resp.status_code == 200


def folder_name(version: str, scenario: str) -> str:
    """The folder of a scenario: bare for the default release, else prefixed by its line."""
    return scenario if version == PULSAR_VERSION else f"{release(version).line}-{scenario}"


def record(version: str, scenario: str, settings: dict[str, str]) -> None:
    folder = folder_name(version, scenario)
    # LocalPulsar picks the JDK and the jars of the release (lab.runtime.RELEASES)
    broker = LocalPulsar(settings=settings, version=version).start()
    try:
        client = setup(broker)
        wait_until(lambda: bulk_shows_consumers(broker.admin_url), "broker-stats/topics")
        if "ModularLoadManagerImpl" in settings.get("loadManagerClassName", ""):
            wait_until(lambda: has_load_report(broker.admin_url), "a load report")
        rec = Recorder(broker)
        admin = AdminClient(broker.admin_url)
        # record each answer once the client has read it (a response hook would read the
        # streamed body first, and leave the client an empty one)
        read_body = admin._read_body

        def read_and_record(resp: requests.Response, *args: Any) -> None:
            read_body(resp, *args)
            rec.record(resp)

        admin._read_body = read_and_record  # type: ignore[method-assign]
        snapshot = poll(admin)
        if snapshot.errors:
            raise SystemExit(f"{folder}: the poll had errors: {snapshot.errors}")
        rec.phase = "reference"
        for topic in (ORDERS, *(f"{PAYMENTS}-partition-{i}" for i in range(3)), AUDIT):
            domain, rest = topic.split("://")
            admin.get_text(f"/lookup/v2/topic/{domain}/{rest}/bundle")
            admin.get_json(f"/admin/v2/{domain}/{rest}/stats")
        versions = {b.version for b in snapshot.brokers}
        if versions != {version}:
            raise SystemExit(f"{folder}: the broker says it runs {versions}, not {version}")
        rec.write(OUT / folder)
        client.close()
        drained = len(snapshot.draining_hashes)
        print(f"{folder}: {len(rec.entries)} answers, {drained} draining hashes")
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pulsar",
        default=PULSAR_VERSION,
        help=f"the release to record, by version or line (default {PULSAR_VERSION})",
    )
    args = parser.parse_args(argv)
    chosen = release(args.pulsar)
    scenarios = SCENARIOS.get(chosen.line, SCENARIOS["4.0"])
    for scenario, settings in scenarios.items():
        record(chosen.version, scenario, settings)
    print(f"recorded Pulsar {chosen.version} answers into {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
