"""Time travel on live data: a real broker polled twice with its Key_Shared state changed on
purpose between the polls, then the Key_Shared and Stuck hashes pages served for real in
headless Chromium, shown as of the first poll (1 consumer, nothing draining, nothing stuck) and
back at the newest (3 consumers; the hashes that moved away from the first still draining for
it and, after three polls without progress, stuck)."""

from __future__ import annotations

import re
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pulsar
from playwright.sync_api import Page, expect

from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.core.model import Snapshot
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.browser.conftest import serve
from tests.browser.test_dashboard_browser import TIMEOUT_MS, assert_healthy, screenshot, settle
from tests.live.lens_polls import Recorder, admin, pulsar_client, topic_stats, wait_for

SUB = "travel"
KEYS = [f"account-{i}" for i in range(40)]
PRECOMPUTED = "analysed once when the snapshot arrived"
STUCK_AFTER = 3  # stuck-hashes' default: polls without progress before a hash is stuck


class Acking:
    """A listener that acknowledges everything (the consumers that join for poll 2)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        with self._lock:
            consumer.acknowledge(message)


def subscribe(client: pulsar.Client, topic: str, name: str, **kwargs: Any) -> pulsar.Consumer:
    return client.subscribe(
        topic, SUB, consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name, **kwargs
    )


def consumers(broker: LocalPulsar, topic: str) -> dict[str, dict[str, Any]]:
    listed = topic_stats(broker, topic)["subscriptions"][SUB]["consumers"]
    return {c["consumerName"]: c for c in listed}


def polled(snapshot: Snapshot, topic: str) -> tuple[int, int]:
    """(consumers, draining hashes) of the subscription in a poll."""
    mine = [c for c in snapshot.consumers if c.topic == topic and c.subscription == SUB]
    draining = [d for d in snapshot.draining_hashes if d.topic == topic]
    return len(mine), len(draining)


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def metric(page: Page, label: str) -> Any:
    return page.get_by_test_id("stMetric").filter(has_text=label)


def expect_metric(page: Page, label: str, value: str) -> None:
    """The metric `label` shows `value`, and only it: until a rerun ends, the last run's copy
    of a metric can still be on the page beside the new one (whichever `settle` saw)."""
    labelled = metric(page, label).filter(has_text=re.compile(rf"^{label}"))
    shown = labelled.filter(has_text=re.compile(rf"^{label}\s*{value}$"))
    expect(shown).to_have_count(1, timeout=TIMEOUT_MS)
    expect(labelled).to_have_count(1, timeout=TIMEOUT_MS)


def expect_state(page: Page, consumers: int, draining: str) -> None:
    """The Key_Shared page's headline, once the run is over (a rerun keeps the last run's
    elements until it ends): `consumers` and `draining` hashes, from the stored result."""
    settle(page)
    expect_metric(page, "Consumers", str(consumers))
    expect_metric(page, "Draining hashes", draining)
    expect(page.get_by_text(PRECOMPUTED).first).to_be_visible(timeout=TIMEOUT_MS)


def expect_stuck(page: Page, *, draining: str, stuck: str) -> None:
    """The Stuck hashes page's headline, from the stored result."""
    settle(page)
    for label, value in (("Draining hashes", draining), ("Stuck", stuck)):
        expect_metric(page, label, value)
    expect(page.get_by_text(PRECOMPUTED).first).to_be_visible(timeout=TIMEOUT_MS)


def sticky_hash(key: str) -> int:
    """The 4.0 consistent-hashing selector's sticky hash of a partition key."""
    return murmur3_31(key.encode()) % 65535 + 1


def blocked(broker: LocalPulsar, topic: str) -> int:
    """blockedAttempts over every hash draining for c1, as the broker counts them now."""
    return sum(int(d["blockedAttempts"]) for d in consumers(broker, topic)["c1"]["drainingHashes"])


def test_browser_time_travel_shows_the_key_shared_ring_of_the_first_poll(
    pulsar: LocalPulsar, tmp_path: Path, page: Page
) -> None:
    namespace = f"public/travel-{uuid.uuid4().hex[:8]}"  # this test's subscription alone
    admin(pulsar, "PUT", f"/admin/v2/namespaces/{namespace}")
    topic = f"persistent://{namespace}/orders"
    store = tmp_path / "store"
    recorder = Recorder(pulsar, store, namespaces=[namespace])
    registry = discover(plugin_dirs=())
    analyses = [registry.get("key-shared-map"), registry.get("stuck-hashes")]
    results = ResultStore(store)
    client = pulsar_client(pulsar)
    try:
        kept = [subscribe(client, topic, "c1")]  # c1 receives, never acknowledges
        producer = client.create_producer(topic, batching_enabled=False)
        for key in KEYS:
            producer.send(key.encode(), partition_key=key)
        wait_for(
            lambda: consumers(pulsar, topic)["c1"]["unackedMessages"] == len(KEYS),
            what="c1 to hold every message",
        )
        recorder.poll_until(
            lambda s: polled(s, topic) == (1, 0),
            what="a poll with c1 alone",
            show=lambda s: polled(s, topic),
        )
        compute_results(recorder.store, analyses, results=results)  # as the collector does

        kept += [subscribe(client, topic, n, message_listener=Acking()) for n in ("c2", "c3")]
        wait_for(
            lambda: (
                len(consumers(pulsar, topic)) == 3
                and consumers(pulsar, topic)["c1"].get("drainingHashesCount", 0) > 0
            ),
            what="c2 and c3 joined and hashes of c1's held keys draining",
            seen=lambda: {
                n: c.get("drainingHashesCount") for n, c in consumers(pulsar, topic).items()
            },
        )
        second = recorder.poll_until(
            lambda s: polled(s, topic)[0] == 3 and polled(s, topic)[1] > 0,
            what="a poll with 3 consumers and draining hashes",
            show=lambda s: polled(s, topic),
        )
        compute_results(recorder.store, analyses, results=results)
        draining = polled(second, topic)[1]
        # two more polls in which messages of the moved keys wait for c1, which never acks:
        # with the one before, three polls without progress, so those hashes are stuck now
        held = {int(d["hash"]) for d in consumers(pulsar, topic)["c1"]["drainingHashes"]}
        moved = [k for k in KEYS if sticky_hash(k) in held]
        assert moved, "no key of c1's moved hashes"
        for round_ in range(1, STUCK_AFTER):
            for key in moved:
                producer.send(f"blocked-{round_}-{key}".encode(), partition_key=key)
            wait_for(
                lambda r=round_: blocked(pulsar, topic) >= len(moved) * r,
                what=f"the round {round_} messages blocked",
                seen=lambda: blocked(pulsar, topic),
            )
            recorder.poll_until(
                lambda s: polled(s, topic) == (3, draining),
                what="a poll with the same draining hashes",
                show=lambda s: polled(s, topic),
            )
            compute_results(recorder.store, analyses, results=results)
        first_id = str(recorder.store.snapshots()["snapshot_id"].iloc[0])

        app = serve(store, PULSAR_LENS_POLL_INTERVAL="1h", PULSAR_LENS_PLUGIN_DIRS="")
        try:
            page.goto(f"{app.url}/key-shared", timeout=TIMEOUT_MS)
            expect_state(page, 3, str(draining))
            # travel with the sidebar's control to the first poll
            sidebar = page.get_by_test_id("stSidebar")
            sidebar.get_by_test_id("stSelectbox").filter(has_text="Snapshot shown").click()
            page.get_by_role("option").last.click()  # Newest, then the polls newest first
            banner = page.get_by_text(re.compile(r"Viewing the snapshot of .* UTC"))
            expect(banner).to_be_visible(timeout=TIMEOUT_MS)
            expect_state(page, 1, "0")
            expect(banner).to_contain_text(f"{STUCK_AFTER} newer poll(s) hidden")
            assert query(page.url) == {"at": [first_id]}
            screenshot(page, "key-shared-time-travel")
            # the link restores it: a reload is a new session that reads ?at=
            page.reload(timeout=TIMEOUT_MS)
            expect(banner).to_be_visible(timeout=TIMEOUT_MS)
            expect_state(page, 1, "0")
            assert_healthy(page)
            # the Stuck hashes page of that moment: nothing drained, nothing stuck yet
            page.goto(f"{app.url}/stuck-hashes?at={first_id}", timeout=TIMEOUT_MS)
            expect(banner).to_be_visible(timeout=TIMEOUT_MS)
            expect_stuck(page, draining="0", stuck="0")
            page.goto(f"{app.url}/stuck-hashes", timeout=TIMEOUT_MS)  # a new session: newest
            expect(banner).to_have_count(0, timeout=TIMEOUT_MS)
            expect_stuck(page, draining=str(draining), stuck=str(draining))
            page.goto(f"{app.url}/key-shared?at={first_id}", timeout=TIMEOUT_MS)
            expect_state(page, 1, "0")
            # and back to the newest
            page.get_by_role("button", name="Back to newest").click()
            expect(banner).to_have_count(0, timeout=TIMEOUT_MS)
            expect_state(page, 3, str(draining))
            assert query(page.url) == {}
            assert_healthy(page)
        finally:
            app.stop()
    finally:
        client.close()
        recorder.close()
