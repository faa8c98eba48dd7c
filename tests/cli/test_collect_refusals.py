"""`pulsar-lens collect --once` against answers holding malformed items: the stored snapshot
is partial and its errors name what was refused, and the valid rest is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pulsar_lens.core.store import Store
from tests.fake_admin import FakeAdmin, Seen
from tests.lens_cli import run_lens

BULK = "/admin/v2/broker-stats/topics"
PKS_STATS = "/admin/v2/persistent/public/default/payments-partition-0/stats"


def dot_dot_topic(payload: Any) -> Any:
    topics = payload["public/default"]["0x80000000_0xc0000000"]["persistent"]
    topics["persistent://public/default/.."] = topics["persistent://public/default/orders"]
    return payload


def test_collect_once_stores_a_partial_snapshot_naming_what_it_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with FakeAdmin() as fake:
        status, recorded = fake.recorded(PKS_STATS)
        stats = json.loads(recorded)
        stats["subscriptions"]["pks"]["consumers"][0]["keyHashRangeArrays"] = "1-65535"
        stats["subscriptions"]["\x01bad\x01"] = {"type": "Shared"}
        # a subscription name whose bytes are not UTF-8, as a broker could only send by fault
        body = json.dumps(stats).encode().replace(b"\\u0001bad\\u0001", b"s\xff")

        def damaged(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            return status, {"Content-Type": "application/json"}, body

        fake.rule(PKS_STATS, damaged)
        fake.mutate(BULK, dot_dot_topic)
        done = run_lens(
            "collect", "--once", "--store", str(store), env={"PULSAR_ADMIN_URL": fake.url}
        )
    assert done.returncode == 0, done.stderr
    row = Store(store).snapshots().iloc[-1]
    assert bool(row["partial"])
    errors = json.loads(row["errors_json"])
    refused = [e["message"] for e in errors if e["endpoint"] == "refused"]
    assert any(
        m.startswith("topic: has a . or .. segment") and "persistent://public/default/.." in m
        for m in refused
    ), errors
    assert any(
        m.startswith("consumer keyHashRangeArrays: is a string") and "'pks-1'" in m for m in refused
    ), errors
    field = [e["message"] for e in errors if e["endpoint"] == "field"]
    assert any("subscription='s\\\\udcff' is not valid text" in m for m in field), errors
    topics = set(Store(store).read_latest("topics").column("topic").to_pylist())
    assert "persistent://public/default/orders" in topics
    assert "persistent://public/default/.." not in topics
