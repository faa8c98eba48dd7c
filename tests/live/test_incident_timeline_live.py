"""incident-timeline on a real two-broker cluster: an unload drill moves a bundle under a
connected consumer, and the timeline lists the probe's outage, the consumer reconnecting and
the move, in that order, each linked to the Bundles & unloads page as of the poll after it."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.drill import DrillPlan, owner_of, run_drill
from pulsar_lens.collectors.events import diff
from pulsar_lens.collectors.namespaces import bundle_for, parse_boundaries
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.restore import restore_latest
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.mutations import MutationSettings
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover
from tests.brokers import BrokerPool
from tests.live.lens_polls import admin, pulsar_client, topic_stats, wait_for

MUTATIONS = MutationSettings(allow=True)  # the drill unloads a bundle of our own cluster
ATTEMPTS = 3  # drills until one moves the bundle


def test_incident_timeline_live_lists_an_unload_drill_in_order(
    broker_pool: BrokerPool, tmp_path: Path
) -> None:
    cluster = broker_pool.cluster("modular")
    namespace = f"public/lens-tl-{uuid.uuid4().hex[:8]}"
    admin(cluster, "PUT", f"/admin/v2/namespaces/{namespace}")
    bounds = parse_boundaries(
        admin(cluster, "GET", f"/admin/v2/namespaces/{namespace}/bundles").json()
    )
    topic = f"persistent://{namespace}/watched"
    bundle = bundle_for(topic, bounds)
    store = Store(tmp_path / "store")
    client = pulsar_client(cluster)
    try:
        consumer = client.subscribe(topic, "watch", consumer_name="tl-watch")
        producer = client.create_producer(topic)
        producer.send(b"before")
        with AdminClient(cluster.admin_url) as lens:
            # The destination is a one-time hint: on a busy machine the destination's first
            # attempt to take the bundle can fail and the next lookup puts it back where it
            # was. Such a drill is a reconnection without a move; the drill runs again, and
            # the timeline is read from the poll before the drill that moved it.
            since: dt.datetime | None = None
            for attempt in range(ATTEMPTS):
                first = topic_stats(cluster, topic)["subscriptions"]["watch"]["consumers"][0]

                # a stored poll that lists the consumer (connected again, after a drill that
                # did not move the bundle) before the drill: the broker's bulk stats list a
                # new connection a refresh later than the per-topic stats, and a consumer the
                # polls see for the first time after the move is a join, not a reconnection
                def listed(after: dt.datetime | None = since) -> Snapshot | None:
                    return _listing(poll(lens, namespaces=[namespace]), "tl-watch", after)

                before = wait_for(
                    listed,
                    what="a poll that lists tl-watch",
                    timeout=120,
                    every=1.0,
                )
                start = store.write(before)
                since = _since(before, "tl-watch")
                owner = owner_of(lens, topic)
                other = next(b for b in cluster.broker_ids if b != owner)
                plan = DrillPlan(namespace, bundle, to=other, rate=20.0, baseline=1.0, settle=2.0)
                run = run_drill(
                    plan, admin=lens, service_url=None, store=store, mutations=MUTATIONS
                )
                assert run.owner_before == owner, run.steps

                def reconnected(first: dict[str, object] = first) -> bool:
                    stats = topic_stats(cluster, topic)["subscriptions"]["watch"]["consumers"]
                    return bool(stats) and stats[0]["connectedSince"] != first["connectedSince"]

                wait_for(reconnected, what=f"{topic}'s consumer connected again", timeout=60)
                if run.owner_after == other:
                    break
                assert attempt + 1 < ATTEMPTS, f"the bundle never moved to {other}: {run.steps}"
            # a poll that lists it connected again, if the drill's last poll came too early
            # (the bulk stats list the new connection a refresh after the per-topic stats),
            # stored with what changed since the drill's last poll, as a collector stores it:
            # a drill poll that fell inside the reconnect left it out, and this one joins it
            relisted = wait_for(
                lambda: _listing(poll(lens, namespaces=[namespace]), "tl-watch", since),
                what="a poll that lists tl-watch connected again",
                timeout=120,
                every=1.0,
            )
            last = restore_latest(store, relisted.cluster, before=relisted.collected_at)
            store.write(relisted, events=diff(last, relisted) if last is not None else ())
        producer.close()
        consumer.close()
    finally:
        client.close()

    plugin = discover().get("incident-timeline")
    output = runner.run(plugin, store, {"namespace": namespace}, use_cache=False)
    polls = store.snapshots()["snapshot_id"].astype(str).tolist()
    every = output.result.frames["events"]
    assert every["at"].is_monotonic_increasing
    # the drill that moved the bundle: the events of the polls after the one stored before it
    later = every["snapshot_id"].astype(str).map(polls.index) > polls.index(start)
    events = every[later]
    shown = events[["at", "kind", "source", "subject", "detail"]].to_string()
    outage = _only(events, (events["kind"] == "probe_outage") & (events["subject"] == bundle))
    moved = _only(events, (events["kind"] == "bundle_moved") & (events["subject"] == bundle))
    watch = events[events["subject"] == "tl-watch"]
    again = _only(watch, watch["kind"] == "consumer_reconnected")
    assert outage is not None and moved is not None, shown
    if again is not None:  # every poll listed it: one reconnection between two polls
        assert outage.name < again.name < moved.name, shown  # time order, cause first
        assert outage["at"] <= again["at"] <= moved["at"], shown
    else:  # a poll fell inside the reconnect and did not list it: it left, then joined
        left = _only(watch, watch["kind"] == "consumer_left")
        joined = _only(watch, watch["kind"] == "consumer_joined")
        assert left is not None and joined is not None, shown
        assert outage.name < left.name < joined.name, shown
        assert outage["at"] <= left["at"] <= joined["at"], shown
        assert left["at"] <= moved["at"] <= joined["at"], shown
    assert owner in moved["detail"] and other in moved["detail"], shown
    # the move is at the first poll after `start` that saw `other` own the bundle (the drill's
    # poll after the unload, or ours when the new owner took it late), the outage at the poll
    # after it began: that one or an earlier one
    bundles = store.read("bundles").to_pandas()
    owned = bundles[
        (bundles["namespace"] == namespace)
        & (bundles["bundle"] == bundle)
        & (bundles["owner_broker"] == other)
    ]
    first_owned = min(
        (sid for sid in owned["snapshot_id"].astype(str) if polls.index(sid) > polls.index(start)),
        key=polls.index,
    )
    assert moved["snapshot_id"] == first_owned, shown
    assert polls.index(outage["snapshot_id"]) <= polls.index(first_owned), shown
    for row in (outage, moved):
        parts = urlsplit(row["link"])
        assert parts.path == "bundles"
        query = parse_qs(parts.query)
        assert query["at"] == [row["snapshot_id"]]
        assert query["namespace"] == [namespace]


def _only(events: pd.DataFrame, mask: pd.Series) -> pd.Series | None:
    """The first row the mask picks (with its position as `name`), or None."""
    rows = events[mask]
    return None if rows.empty else rows.iloc[0]


def _listing(
    snapshot: Snapshot, consumer: str, after: dt.datetime | None = None
) -> Snapshot | None:
    """The poll when it lists `consumer` (connected since later than `after`), else None."""
    since = _since(snapshot, consumer)
    listed = since is not None and (after is None or since > after)
    return snapshot if listed else None


def _since(snapshot: Snapshot, consumer: str) -> dt.datetime | None:
    """When the poll says `consumer` connected (the oldest epoch if it gives no time), or None
    when the poll does not list it."""
    times = [
        c.connected_since or dt.datetime.min.replace(tzinfo=dt.UTC)
        for c in snapshot.consumers
        if c.consumer_name == consumer
    ]
    return max(times) if times else None
