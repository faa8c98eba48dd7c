"""The load manager's own counters on a real two-broker cluster whose shedder moves bundles.

The modular load manager runs `UniformLoadShedder` every minute (the shortest interval it
takes; `tests.brokers.SHEDDING_SETTINGS`). One broker gets all the traffic, so the shedder
unloads bundles from it; an admin unload is made too. The broker is the judge twice over:
the leader's log names every bundle its shedder unloaded and from which broker, and its
`brk_lb_unload_bundle_total` counts them. The polls must read that counter, tell the
shedder's moves from the admin one, and lose none.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import requests

from pulsar_lens.core import logs
from pulsar_lens.core.bundles import default_boundaries, parse_bundle_name, topic_bundle
from pulsar_lens.core.model import Snapshot
from pulsar_lens.lab.cluster import LocalPulsarCluster
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.bundle_ownership.load_manager import (
    BY_LOAD_MANAGER,
    NOT_LOAD_MANAGER,
)
from pulsar_lens.plugins.registry import discover
from tests.brokers import SHEDDING_SETTINGS, BrokerPool
from tests.live.lens_polls import Recorder, bulk_stats, wait_for

NAMESPACE = "public/shed"
BUNDLES = 8
SHED_LINE = re.compile(r"Unloading bundle: (\S+) from broker (\S+)")
SHED_WAIT = 420.0  # seven shedding rounds: at load 13 (both test parts) three were too few
POLL_EVERY = 3.0
STARTS = ["moved", "unloaded", "reloaded"]  # the first event of an unload


@pytest.fixture(scope="module")
def shedding(broker_pool: BrokerPool) -> Iterator[LocalPulsarCluster]:
    """Started in the background when the run began (tests/conftest.py), so its shedder's
    rounds already tick; stopped in the background after this module."""
    try:
        yield broker_pool.cluster("modular", SHEDDING_SETTINGS)
    finally:
        broker_pool.release("modular", SHEDDING_SETTINGS)


def shed_by_log(
    cluster: LocalPulsarCluster, after: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, str]]:
    """(bundle key, broker) for every unload the shedders logged, in log order; with `after`
    (an earlier answer), only the lines logged since."""
    found: list[tuple[str, str]] = []
    for broker in cluster.broker_processes:
        text = broker.log_path.read_text(errors="replace")
        found += [
            (m.group(1), m.group(2)) for m in SHED_LINE.finditer(text) if NAMESPACE in m.group(1)
        ]
    earlier = Counter(after)
    fresh = []
    for line in found:
        if earlier[line]:
            earlier[line] -= 1
        else:
            fresh.append(line)
    return fresh


def unloads_counted(snapshot: Snapshot) -> int | None:
    """The brokers' load-manager unload counters summed, as a poll read them (None: one was
    not read)."""
    counts = [b.lb_bundles_unloaded for b in snapshot.brokers]
    return None if not counts or None in counts else sum(c for c in counts if c is not None)


def quiet_poll(recorder: Recorder, cluster: LocalPulsarCluster) -> tuple[Snapshot, list[Any]]:
    """A poll after one that saw the same owners of the namespace's bundles and the same
    load-manager counters, with no shedder line logged between the two, and the lines logged
    until then. The owner changes before it (admin moves, an early shedder round) and the
    counts they take are then a whole poll window away from anything after it, whichever
    window a count is read in."""

    def seen(snapshot: Snapshot) -> tuple[object, ...]:
        held = sorted((b.bundle, b.owner_broker) for b in snapshot.bundles)
        return held, [(b.broker_id, b.lb_bundles_unloaded) for b in snapshot.brokers]

    def quiet() -> tuple[Snapshot, list[Any]] | None:
        logged = shed_by_log(cluster)
        first, second = recorder.poll(), recorder.poll()
        if shed_by_log(cluster) != logged or seen(first) != seen(second):
            return None
        return second, logged

    return wait_for(
        quiet,
        what="two polls with no owner change, load-manager count or shedder line between them",
        timeout=180,
        every=POLL_EVERY,
        seen=lambda: {"unloads in the brokers' logs": shed_by_log(cluster)},
    )


def judged(recorder: Recorder, key: str) -> pd.DataFrame:
    """bundle-ownership's events once the first unload of `key` has a `by`: polled until the
    counters of every window its count could show in were read (COUNT_LAG after it)."""

    def events() -> pd.DataFrame | None:
        recorder.poll()
        found = recorder.run(BundleOwnership(), namespace=NAMESPACE).result.frames["events"]
        found = found.assign(key=NAMESPACE + "/" + found["bundle"])
        first = found[(found["key"] == key) & found["kind"].isin(STARTS)].sort_values("at")
        return found if len(first) and first["by"].notna().iloc[0] else None

    return wait_for(events, what=f"the unload of {key} judged", timeout=120, every=POLL_EVERY)


SHEDDER_LOG = re.compile(r".*(?:[Ss]hedd|Found bundle to unload|Only 1 broker).*")


Starts = defaultdict[tuple[str, str], list[object]]


class WholeRun(BundleOwnership):
    """bundle-ownership over every poll of this test: the shedder's wait polls every 3 s for
    up to 7 minutes, more polls than the 60 the plugin reads, and an early unload would
    leave its window before the wait ends."""

    history = 1000


def shed_starts(recorder: Recorder, since: dt.datetime) -> Starts:
    """`by` of each event after `since` that starts an unload, by (bundle key, broker before):
    a move, or an unload a poll saw, or a reload (the destination the load manager chose
    failed to take the bundle, which went back to its owner: on a busy machine it happens,
    and only the clients' reconnections tell)."""
    events = recorder.run(WholeRun(), namespace=NAMESPACE).result.frames["events"]
    found: Starts = defaultdict(list)
    mine = events[events["kind"].isin(STARTS) & (events["at"] > since)].sort_values("at")
    for bundle, before, by in zip(mine["bundle"], mine["before"], mine["by"], strict=True):
        found[(f"{NAMESPACE}/{bundle}", str(before))].append(by)
    return found


def shedder_view(cluster: LocalPulsarCluster) -> dict[str, object]:
    """What the shedder decides from, for a failure message: each broker's load report (the
    message rate and bundles the leader compares), the leader, the shedder's last log lines."""
    view: dict[str, object] = {}
    for broker in cluster.broker_processes:
        try:
            report = requests.get(
                f"{broker.admin_url}/admin/v2/broker-stats/load-report", timeout=30
            ).json()
            view[broker.broker_id] = {
                "msg_rate": report.get("msgRateIn", 0) + report.get("msgRateOut", 0),
                "bundles": len(report.get("bundles", [])),
                "last_update": report.get("lastUpdate"),
            }
        except (requests.RequestException, ValueError) as exc:
            view[broker.broker_id] = repr(exc)
        lines = SHEDDER_LOG.findall(broker.log_path.read_text(errors="replace"))
        view[f"{broker.broker_id} log"] = [line[-200:] for line in lines[-4:]]
    try:
        view["leader"] = requests.get(
            f"{cluster.admin_url}/admin/v2/brokers/leaderBroker", timeout=30
        ).json()
    except (requests.RequestException, ValueError) as exc:
        view["leader"] = repr(exc)
    return view


def owners(cluster: LocalPulsarCluster) -> dict[str, str]:
    found: dict[str, str] = {}
    for broker in cluster.broker_processes:
        path = f"/admin/v2/brokers/local/{broker.broker_id}/ownedNamespaces"
        answer = requests.get(broker.admin_url + path, timeout=30).json()
        found |= {key: broker.broker_id for key in answer if key.startswith(NAMESPACE + "/")}
    return found


def unloaded_to(cluster: LocalPulsarCluster, key: str, broker: str, attempts: int = 4) -> None:
    """Unload the bundle `key` to `broker` and wait until `broker` owns it: a lookup of a topic
    in the bundle assigns it (as a client's reconnection would), and the owner lists it.

    The destination is a one-time hint to the leader's load manager, used by the first
    assignment after the unload. On a busy machine the destination's first ownership attempts
    can fail ("Failed to acquire ownership"); the next lookup then assigns the bundle anew,
    often back to where it was. So an assignment elsewhere is unloaded to `broker` again, a
    bounded number of times, as an operator would."""
    bundle = parse_bundle_name(key.rsplit("/", 1)[1])
    boundaries = default_boundaries(BUNDLES)
    name = next(
        f"owner-{n}"
        for n in range(100_000)
        if topic_bundle(boundaries, f"persistent://{NAMESPACE}/owner-{n}") == bundle
    )
    seen: dict[str, object] = {"unloads": 0}

    def unload() -> None:
        requests.put(
            f"{cluster.admin_url}/admin/v2/namespaces/{key}/unload",
            params={"destinationBroker": broker},
            timeout=60,
        ).raise_for_status()
        seen["unloads"] = int(str(seen["unloads"])) + 1

    def assigned() -> str | None:
        try:
            answer = requests.get(
                f"{cluster.admin_url}/lookup/v2/topic/persistent/{NAMESPACE}/{name}", timeout=30
            )
            seen["lookup"] = f"{answer.status_code} {answer.text[:300]}"
        except requests.RequestException as exc:
            seen["lookup"] = repr(exc)
        owner = owners(cluster).get(key)
        seen["owner"] = owner
        return owner

    unload()
    for attempt in range(attempts):
        owner = wait_for(
            assigned, what=f"{key} assigned", timeout=300, every=1.0, seen=lambda: seen
        )
        if owner == broker:
            return
        assert attempt + 1 < attempts, f"{key} never went to {broker}: {seen}"
        unload()


def reconnected(cluster: LocalPulsarCluster, topics: list[str], source: str, to: str) -> None:
    """Wait until the bulk stats the next poll reads show `topics` moved with their clients:
    listed by broker `to` only, with their producers, and no longer by broker `source`."""
    url = {b.broker_id: b.admin_url for b in cluster.broker_processes}
    quiet, hot = url[source], url[to]
    seen: dict[str, object] = {}

    def moved() -> bool:
        on_quiet, on_hot = bulk_stats(quiet), bulk_stats(hot)
        left = sorted(set(topics) & set(on_quiet))
        seen.update(on_quiet=left, on_hot=sorted(set(topics) & set(on_hot)))
        return not left and all(t in on_hot and on_hot[t].stats.get("publishers") for t in topics)

    wait_for(moved, what=f"{topics} on the other broker", timeout=90, every=0.5, seen=lambda: seen)


def first_poll_away(
    recorder: Recorder, cluster: LocalPulsarCluster, key: str, quiet: str, hot: str, polls: int = 12
) -> dt.datetime:
    """When the first poll after the admin unload of `key` from `quiet` to `hot` was taken
    that no longer saw `quiet` own it (the poll the unload's event belongs to).

    On a busy machine `hot` can list the bundle and then lose it to `quiet` again before a
    poll sees it (a loaded run's first poll after the unload still saw `quiet` own it, and the
    bundle moved only minutes later, by the shedder). Then it is unloaded to `hot` again, as an
    operator would, every few polls, a bounded number of times."""
    owner: str | None = quiet
    for attempt in range(polls):
        snapshot = recorder.poll()
        listed = {f"{b.namespace}/{b.bundle}": b.owner_broker for b in snapshot.bundles}
        owner = listed.get(key, quiet)
        if owner != quiet:
            return snapshot.collected_at
        if attempt % 4 == 3:
            unloaded_to(cluster, key, hot)
    raise AssertionError(f"{polls} polls after unloading {key} to {hot}, {owner} still owned it")


def more_bundles_on(cluster: LocalPulsarCluster, hot: str, quiet: str) -> None:
    """Unload bundles of `quiet` to `hot` until `hot` holds more bundles of the namespace.

    The modular load manager sends a bundle only to a broker holding the fewest bundles of its
    namespace (`LoadManagerShared.removeMostServicingBrokersForNamespace`). A hot broker that
    holds fewer than the quiet one is its own only candidate, so its shedder finds a bundle to
    unload every round and gives it up ("The destination broker ... is the same as the current
    owner broker"). Each move here is an admin unload, counted by nobody's load manager."""
    for _ in range(BUNDLES):
        held = owners(cluster)
        on_quiet = sorted(k for k, b in held.items() if b == quiet)
        if list(held.values()).count(hot) > len(on_quiet):
            return
        unloaded_to(cluster, on_quiet[0], hot)
    raise AssertionError(f"{hot} never held more bundles of {NAMESPACE} than {quiet}")


@pytest.mark.timeout(900)  # the shedder wait alone may take SHED_WAIT
def test_the_shedders_unloads_are_counted_and_told_from_an_admin_unload(
    shedding: LocalPulsarCluster, tmp_path: Path
) -> None:
    cluster, admin = shedding, shedding.admin_url
    requests.put(
        f"{admin}/admin/v2/namespaces/{NAMESPACE}",
        json={"bundles": {"numBundles": BUNDLES}},
        timeout=30,
    ).raise_for_status()
    recorder = Recorder(cluster, tmp_path, namespaces=[NAMESPACE])
    client = logs.pulsar_client(cluster.service_url, operation_timeout_seconds=30)
    stop = threading.Event()
    try:
        producers = [
            client.create_producer(f"persistent://{NAMESPACE}/t{i}", batching_enabled=False)
            for i in range(16)
        ]
        first_poll = recorder.poll()
        # an admin unload of a bundle of the quiet broker to the other one: a move nobody's
        # shedder made (to a named broker, so that the next poll sees the owner change), of a
        # bundle that poll saw owned already (a producer's lookup can take a retry). The hot
        # broker is the one holding more of the namespace's bundles: see more_bundles_on()
        count = list(owners(cluster).values()).count
        quiet, hot = sorted(cluster.broker_ids, key=count)
        if not count(quiet):
            quiet, hot = hot, quiet
        polled = {f"{b.namespace}/{b.bundle}": b.owner_broker for b in first_poll.bundles}
        held = sorted(k for k, b in owners(cluster).items() if b == quiet == polled.get(k))
        assert held, f"{quiet} owns no bundle of {NAMESPACE} that the poll saw: {polled}"
        admin_key = held[0]
        mine = {f"persistent://{NAMESPACE}/t{i}" for i in range(len(producers))}
        moving = [
            t.topic
            for t in first_poll.topics
            if t.topic in mine and f"{t.namespace}/{t.bundle}" == admin_key
        ]
        unloaded_to(cluster, admin_key, hot)
        reconnected(cluster, moving, quiet, hot)  # the producers' topics: a system topic has none
        after_admin = first_poll_away(recorder, cluster, admin_key, quiet, hot)
        # judged once the polls read every window its count could show in (a count published
        # late may still come), not at the end: the shedder's wait below may take more polls
        # than the analyses' 60-poll windows hold, and the admin unload would be out of them
        admin_events = judged(recorder, admin_key)
        latency = recorder.run(discover().get("unload-latency"), namespace=NAMESPACE).result
        admin_rows = latency.frames["events"]
        admin_rows = admin_rows.assign(key=NAMESPACE + "/" + admin_rows["bundle"])
        more_bundles_on(cluster, hot, quiet)
        # all traffic on the other broker's topics, so the shedder moves bundles off it
        hot_port = next(b.broker_port for b in cluster.broker_processes if b.broker_id == hot)
        busy = [
            p
            for i, p in enumerate(producers)
            if requests.get(f"{admin}/lookup/v2/topic/persistent/{NAMESPACE}/t{i}", timeout=30)
            .json()["brokerUrl"]
            .endswith(f":{hot_port}")
        ]
        assert len(busy) >= 2, "the hot broker needs two bundles with traffic to shed one"

        results: Counter[str] = Counter()  # each send's result, as the client names it
        error = {"last": ""}

        def acked(result: object, _message_id: object) -> None:
            results[str(result)] += 1

        def send() -> None:
            deadline = time.monotonic() + SHED_WAIT + 60
            while not stop.is_set() and time.monotonic() < deadline:
                for producer in busy:
                    try:
                        producer.send_async(b"x" * 200, acked)
                    except Exception as exc:  # a full queue on a busy machine: keep sending
                        error["last"] = repr(exc)
                time.sleep(0.02)

        # the events from here on are the shedder's to explain: the admin moves above are in
        # the polls before this one, a quiet window away, so that no count is matched across
        # it; an unload the shedder made before (rare: the sends have not begun) is in
        # `earlier`
        start, earlier = quiet_poll(recorder, cluster)
        since, counted_since = start.collected_at, unloads_counted(start)
        assert counted_since is not None, start.brokers
        sender = threading.Thread(target=send, daemon=True)
        sender.start()

        def settled() -> list[tuple[str, str]] | None:
            """The shedder's unloads since `since` once the polls' events account for each of
            them, the log did not grow while the last poll ran, and the leader's counter as
            that poll read it holds them (it is published when the round's unloads returned)."""
            before = shed_by_log(cluster, earlier)
            snapshot = recorder.poll()
            if not before or shed_by_log(cluster, earlier) != before:
                return None
            counted = unloads_counted(snapshot)
            if counted is None or counted - counted_since < len(before):
                return None
            starts = shed_starts(recorder, since)
            return before if all(len(starts[k]) >= n for k, n in Counter(before).items()) else None

        shed = wait_for(
            settled,
            what="a shedder unload seen by a poll",
            timeout=SHED_WAIT,
            every=POLL_EVERY,
            seen=lambda: {
                "unloads in the brokers' logs": shed_by_log(cluster, earlier),
                "sends": {**results, "last error": error["last"]},
                **shedder_view(cluster),
            },
        )
        stop.set()
        for _ in range(2):  # the windows after it, where a count read a poll late would show
            time.sleep(POLL_EVERY)
            recorder.poll()
        assert shed_by_log(cluster, earlier) == shed, "the shedder unloaded again meanwhile"
        logged = shed_by_log(cluster)  # every unload of the test, `earlier` ones too
    finally:
        stop.set()
        client.close()
        recorder.close()

    result = recorder.run(WholeRun(), namespace=NAMESPACE).result
    events = result.frames["events"]
    events = events.assign(key=NAMESPACE + "/" + events["bundle"])

    # every unload the leader's shedder logged is one event from the broker its log names,
    # made by the load manager
    starts = shed_starts(recorder, since)
    for (key, broker), times in Counter(shed).items():
        assert starts[(key, broker)] == [BY_LOAD_MANAGER] * times, (key, broker, events)
    # the admin unload, seen by the poll after it, was not (the shedder may move that bundle
    # later too, when the admin unload put it on the busy broker)
    first = admin_events[
        (admin_events["key"] == admin_key) & admin_events["kind"].isin(STARTS)
    ].sort_values("at")
    told = f"{admin_key} (admin unload, poll at {after_admin}):\n{admin_events.to_string()}"
    assert len(first), told
    assert first["at"].iloc[0] == after_admin and first["by"].iloc[0] == NOT_LOAD_MANAGER, told

    # the leader's own counter equals its log; the other broker counted nothing
    brokers = recorder.store.read("brokers").to_pandas()
    grew = brokers.groupby("broker_id")["lb_bundles_unloaded"].agg(lambda s: s.max() - s.min())
    leader = brokers.loc[brokers["is_leader"], "broker_id"].iloc[-1]
    assert grew[leader] == len(logged) and grew.drop(leader).eq(0).all(), grew
    windows = result.frames["load_manager"]
    assert windows["broker"].tolist() == [leader] * len(windows)
    assert int(windows["unloaded"].sum()) == len(logged) and int(windows["unseen"].sum()) == 0

    # the collector's events say so too, and the Bundles & unloads page carries `by`
    stored = recorder.store.read("events").to_pandas()
    counted = stored[stored["kind"] == "load_manager_unloaded"]
    assert set(counted["subject"]) == {leader}
    assert sum(
        int(a) - int(b) for a, b in zip(counted["after"], counted["before"], strict=True)
    ) == len(logged)
    page = recorder.run(discover().get("unload-latency"), namespace=NAMESPACE).result
    rows = page.frames["events"].assign(key=NAMESPACE + "/" + page.frames["events"]["bundle"])
    for key, broker in shed:
        mine = rows[(rows["key"] == key) & (rows["from_broker"] == broker)]
        assert BY_LOAD_MANAGER in mine["by"].tolist(), rows
    mine = admin_rows[(admin_rows["key"] == admin_key) & (admin_rows["at"] == after_admin)]
    assert mine["by"].tolist() == [NOT_LOAD_MANAGER], admin_rows
    # the page's window may have lost an `earlier` one
    assert len(shed) <= page.summary["by_load_manager"] <= len(logged), page.summary
