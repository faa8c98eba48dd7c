"""`collect` against an admin API that answers numbers no column can hold, and shapes that are
not subscriptions: the poll stores what it can, says what it left out, and goes on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pulsar_lens.core.store import Store
from tests.fake_admin import FakeAdmin
from tests.lens_cli import run_lens

BULK = "/admin/v2/broker-stats/topics"
ORDERS = "persistent://public/default/orders"


def topic_entries(payload: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    for bundles in payload.values():
        for domains in bundles.values():
            for topics in domains.values():
                yield from topics.items()


def hostile_stats(stats: dict[str, Any]) -> dict[str, Any]:
    stats["storageSize"] = 9.3e18
    stats["msgRateIn"] = 1e308
    for sub in stats["subscriptions"].values():
        sub["msgBacklog"] = 2**70
        sub["lastAckedTimestamp"] = 1e15
    stats["subscriptions"]["not-a-sub"] = "x"
    stats["subscriptions"]["also-not"] = None
    return stats


def hostile_bulk(payload: Any) -> Any:
    for topic, stats in topic_entries(payload):
        if topic == ORDERS:
            hostile_stats(stats)
    return payload


def test_out_of_range_numbers_become_null_with_a_warning_and_the_poll_is_stored(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with FakeAdmin() as fake:
        fake.mutate(BULK, hostile_bulk)
        fake.mutate("/admin/v2/persistent/public/default/orders/stats", hostile_stats)
        done = run_lens(
            "collect", "--once", "--store", str(store), env={"PULSAR_ADMIN_URL": fake.url}
        )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "could not reach" not in done.stderr
    assert " subs=16 " in done.stdout  # the two non-objects did not become subscriptions
    snap = Store(store)
    (sid,) = snap.snapshots()["snapshot_id"]
    topics = snap.read("topics", snapshot_ids=[sid]).to_pandas().set_index("topic")
    assert topics.loc[ORDERS, "storage_size"] is None or topics.loc[ORDERS].isna()["storage_size"]
    assert topics.loc[ORDERS].isna()["msg_rate_in"]
    subs = snap.read("subscriptions", snapshot_ids=[sid]).to_pandas()
    orders = subs[subs["topic"] == ORDERS]
    assert orders["msg_backlog"].isna().all() and orders["last_acked_at"].isna().all()
    errors = json.loads(snap.snapshots()["errors_json"].iloc[0])
    text = "\n".join(map(str, errors))
    assert f"{ORDERS}: storageSize=9.3e+18 does not fit a 64-bit integer" in text
    assert f"{ORDERS}: msgRateIn=1e+308 is not a finite number below 1e+18" in text
    assert f"{ORDERS}: msgBacklog={2**70} does not fit a 64-bit integer" in text
    assert "lastAckedTimestamp=1000000000000000 is past the year 9999" in text
    for kind, name in (("a string", "not-a-sub"), ("null", "also-not")):
        refused = f"subscription: is {kind}, not an object; left out (1 time(s), e.g. "
        assert f"{refused}{ORDERS!r} {name!r})" in text, text
    assert not list(store.rglob(".*.parquet*"))  # no half-written file left
