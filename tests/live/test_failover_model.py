"""The failover model names the same active consumer as a real Pulsar 4.0 broker.

Consumers connect through libpulsar (see failover_clients.py: the Python client cannot set a
priority level); the broker's answer is `activeConsumerName` in topic stats. Each check waits
until the broker lists every expected consumer on every topic and two reads agree, then
compares once.
"""

from __future__ import annotations

import bisect
import functools
import re
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import quote

import pytest
import requests

from pulsar_lens.core.failover import (
    FailoverConsumer,
    build_ring,
    compute_topics,
    order_consumers,
    ring_index,
    select_active_consumer,
)
from pulsar_lens.core.hashing import murmur3_31
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.lab.processes import JVM_FLAGS
from pulsar_lens.lab.runtime import find_java
from tests.brokers import BrokerPool
from tests.live.failover_clients import FailoverClient

CONSISTENT = {"activeConsumerFailoverConsistentHashing": "true"}
NS = "public/default"

# "a10" < "a9" (code units, not numbers); "é" > ASCII; U+1F600 (surrogates D83D DE00) sorts
# before fullwidth z (U+FF5A) in Java although Python's code-point order says the opposite.
MIXED = (
    FailoverConsumer("b", 0),
    FailoverConsumer("a10", 0),
    FailoverConsumer("a9", 0),
    FailoverConsumer("é", 0),
    FailoverConsumer("\U0001f600x", 0),
    FailoverConsumer("\uff5ay", 0),
    FailoverConsumer("0-backup", 1),
    FailoverConsumer("last", 2),
)

Observed = dict[str, tuple[str | None, tuple[str, ...]]]


@functools.cache
def broker_charset() -> str:
    """The default charset of the brokers' JVM (the ring hashes `String.getBytes()`).

    Java 17 takes it from the locale of the environment the brokers inherit from this run;
    the same `java` with the same flags reports it.
    """
    flags = [f for f in JVM_FLAGS if f.startswith("-Dfile.encoding")]
    probe = subprocess.run(
        [find_java(), *flags, "-XshowSettings:properties", "-version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    found = re.search(r"file\.encoding = (\S+)", probe.stderr + probe.stdout)
    assert found, probe.stderr[-500:]
    return found.group(1)


@pytest.fixture(scope="module")
def consistent_broker(broker_pool: BrokerPool) -> LocalPulsar:
    return broker_pool.get(CONSISTENT)


@pytest.fixture
def client(pulsar: LocalPulsar) -> Iterator[FailoverClient]:
    with FailoverClient(pulsar.service_url) as c:
        yield c


@pytest.fixture
def consistent_client(consistent_broker: LocalPulsar) -> Iterator[FailoverClient]:
    with FailoverClient(consistent_broker.service_url) as c:
        yield c


def unique(prefix: str) -> str:
    return f"persistent://{NS}/{prefix}-{uuid.uuid4().hex[:8]}"


def rest_path(topic: str) -> str:
    return "/admin/v2/persistent/" + quote(topic.removeprefix("persistent://"), safe="/")


def create_partitioned(admin_url: str, topic: str, partitions: int) -> None:
    resp = requests.put(
        f"{admin_url}{rest_path(topic)}/partitions",
        json=partitions,
        timeout=10,
    )
    assert resp.status_code == 204, resp.text


def read_subscription(admin_url: str, topic: str, partitions: int, sub: str) -> Observed:
    """(activeConsumerName, consumer names) per topic or partition, as the broker reports."""
    if partitions > 0:
        url = f"{admin_url}{rest_path(topic)}/partitioned-stats?perPartition=true"
        resp = requests.get(url, timeout=10)
        resp.raise_for_status()
        stats = resp.json()["partitions"]
    else:
        resp = requests.get(f"{admin_url}{rest_path(topic)}/stats", timeout=10)
        resp.raise_for_status()
        stats = {topic: resp.json()}
    observed: Observed = {}
    for name, topic_stats in stats.items():
        sub_stats = topic_stats.get("subscriptions", {}).get(sub, {})
        names = tuple(sorted(c["consumerName"] for c in sub_stats.get("consumers", [])))
        observed[name] = (sub_stats.get("activeConsumerName"), names)
    return observed


def settled_active(
    admin_url: str,
    topics: Mapping[str, int],
    sub: str,
    consumers: Sequence[FailoverConsumer],
    *,
    timeout: float = 30.0,
) -> dict[str, str | None]:
    """Active consumer per topic/partition once all `consumers` are listed and reads agree."""
    expected = tuple(sorted(c.name for c in consumers))
    deadline = time.monotonic() + timeout
    previous: Observed | None = None
    while True:
        observed: Observed = {}
        for topic, partitions in topics.items():
            observed.update(read_subscription(admin_url, topic, partitions, sub))
        complete = all(names == expected for _, names in observed.values())
        if complete and observed == previous:
            return {name: active for name, (active, _) in observed.items()}
        if time.monotonic() > deadline:
            raise AssertionError(f"broker did not settle on consumers {expected}: {observed}")
        previous = observed if complete else None
        time.sleep(0.3)


def expected(
    topics: Mapping[str, int], consumers: Sequence[FailoverConsumer], *, consistent: bool = False
) -> dict[str, str | None]:
    """The model's active consumer name per topic/partition, for the brokers' JVM charset."""
    chosen = compute_topics(
        topics, consumers, consistent_hashing=consistent, charset=broker_charset()
    )
    return {topic: consumer.name for topic, consumer in chosen.items()}


def subscribe_all(
    client: FailoverClient,
    topics: str | Sequence[str],
    sub: str,
    consumers: Sequence[FailoverConsumer],
) -> dict[str, int]:
    return {
        c.name: client.subscribe(topics, sub, name=c.name, priority_level=c.priority_level)
        for c in consumers
    }


# --- partitioned topics ------------------------------------------------------------------


def test_failover_partitioned_modulo_matches_broker(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    topic = unique("fo-modulo")
    create_partitioned(pulsar.admin_url, topic, 7)
    subscribe_all(client, topic, "s", MIXED)
    got = settled_active(pulsar.admin_url, {topic: 7}, "s", MIXED)
    assert got == expected({topic: 7}, MIXED)


def test_failover_partitioned_modulo_uses_java_string_order(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    # Two consumers whose Java order differs from Python's: partition 0 goes to the first.
    topic = unique("fo-order")
    pair = (FailoverConsumer("\uff5ay"), FailoverConsumer("\U0001f600x"))
    create_partitioned(pulsar.admin_url, topic, 2)
    subscribe_all(client, topic, "s", pair)
    got = settled_active(pulsar.admin_url, {topic: 2}, "s", pair)
    assert got == {f"{topic}-partition-0": "\U0001f600x", f"{topic}-partition-1": "\uff5ay"}
    assert got == expected({topic: 2}, pair)


def test_failover_partitioned_only_leading_priority_group_serves(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    # No consumer at level 0: the best level present (3) forms the group.
    topic = unique("fo-prio")
    group = (
        FailoverConsumer("p5-a", 5),
        FailoverConsumer("p3-b", 3),
        FailoverConsumer("p3-a", 3),
        FailoverConsumer("p4", 4),
    )
    create_partitioned(pulsar.admin_url, topic, 7)
    subscribe_all(client, topic, "s", group)
    got = settled_active(pulsar.admin_url, {topic: 7}, "s", group)
    assert set(got.values()) == {"p3-a", "p3-b"}
    assert got == expected({topic: 7}, group)


def test_failover_partitioned_consistent_matches_broker(
    consistent_broker: LocalPulsar, consistent_client: FailoverClient
) -> None:
    topic = unique("fo-ring")
    create_partitioned(consistent_broker.admin_url, topic, 7)
    subscribe_all(consistent_client, topic, "s", MIXED)
    got = settled_active(consistent_broker.admin_url, {topic: 7}, "s", MIXED)
    assert got == expected({topic: 7}, MIXED, consistent=True)


# --- non-partitioned topics and multi-topic subscriptions --------------------------------


def telling_topics(prefix: str, consumers: Sequence[FailoverConsumer], count: int) -> list[str]:
    """Topics whose ring owner differs when hashing the short name instead of the full one."""
    found: list[str] = []
    for i in range(10_000):
        topic = f"persistent://{NS}/{prefix}-{uuid.uuid4().hex[:6]}-{i}"
        full = select_active_consumer(topic, consumers, charset=broker_charset())
        short = select_active_consumer(topic.rsplit("/", 1)[1], consumers, charset=broker_charset())
        if full is not None and short is not None and full.name != short.name:
            found.append(topic)
        if len(found) == count:
            return found
    raise AssertionError("no telling topic names found")


def test_failover_non_partitioned_ring_hashes_full_topic_name(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    topics = telling_topics("fo-np", MIXED, 6)
    for topic in topics:
        subscribe_all(client, topic, "s", MIXED)
    got = settled_active(pulsar.admin_url, dict.fromkeys(topics, 0), "s", MIXED)
    assert got == expected(dict.fromkeys(topics, 0), MIXED)


def test_failover_multi_topic_subscription_matches_broker(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    plain = telling_topics("fo-multi", MIXED, 4)
    parted = unique("fo-multi-pt")
    create_partitioned(pulsar.admin_url, parted, 3)
    topics = {**dict.fromkeys(plain, 0), parted: 3}
    subscribe_all(client, list(topics), "s", MIXED)
    got = settled_active(pulsar.admin_url, topics, "s", MIXED)
    assert got == expected(topics, MIXED)


def test_failover_multi_topic_consistent_matches_broker(
    consistent_broker: LocalPulsar, consistent_client: FailoverClient
) -> None:
    plain = telling_topics("fo-multi-ring", MIXED, 3)
    parted = unique("fo-multi-ring-pt")
    create_partitioned(consistent_broker.admin_url, parted, 5)
    topics = {**dict.fromkeys(plain, 0), parted: 5}
    subscribe_all(consistent_client, list(topics), "s", MIXED)
    got = settled_active(consistent_broker.admin_url, topics, "s", MIXED)
    assert got == expected(topics, MIXED, consistent=True)


# --- ring collisions ---------------------------------------------------------------------


def colliding_topics(pair: Sequence[FailoverConsumer], count: int) -> list[str]:
    """Topics whose ceiling ring point is shared by both consumers ("a"+"1j" == "a1"+"j")."""
    ordered = order_consumers(pair)
    first_points = {murmur3_31(f"{ordered[0].name}{j}".encode()) for j in range(100)}
    ring = build_ring(ordered)
    shared = {
        p for p, owner in zip(ring.points, ring.owners, strict=True) if owner and p in first_points
    }
    assert shared, "the pair must share ring points"
    found: list[str] = []
    for i in range(200_000):
        topic = f"persistent://{NS}/fo-clash-{uuid.uuid4().hex[:6]}-{i}"
        at = bisect.bisect_left(ring.points, murmur3_31(topic.encode()))
        if ring.points[at % len(ring.points)] in shared:
            found.append(topic)
            if len(found) == count:
                return found
    raise AssertionError("no topic lands on a shared ring point")


def test_failover_ring_collision_goes_to_later_consumer_in_order(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    pair = (FailoverConsumer("a1"), FailoverConsumer("a"))  # "a" sorts first
    topics = colliding_topics(pair, 3)
    for topic in topics:
        # arrival order reversed on purpose: the sort order decides, not who came first
        subscribe_all(client, topic, "s", pair)
    got = settled_active(pulsar.admin_url, dict.fromkeys(topics, 0), "s", pair)
    assert got == dict.fromkeys(topics, "a1")
    assert got == expected(dict.fromkeys(topics, 0), pair)


# --- consumers leaving -------------------------------------------------------------------


@pytest.mark.parametrize("consistent", [False, True], ids=["modulo", "consistent"])
def test_failover_consumers_leaving_match_broker(broker_pool: BrokerPool, consistent: bool) -> None:
    broker = broker_pool.get(CONSISTENT if consistent else None)
    topic = unique("fo-leave")
    create_partitioned(broker.admin_url, topic, 7)
    plain = telling_topics("fo-leave-np", MIXED, 2)
    topics = {topic: 7, **dict.fromkeys(plain, 0)}
    with FailoverClient(broker.service_url) as c:
        handles = subscribe_all(c, list(topics), "s", MIXED)
        remaining = list(MIXED)
        # the active consumer of partition 0 leaves, then a backup, then another active one
        for leaving in ("a10", "0-backup", "é"):
            c.close_consumer(handles.pop(leaving))
            remaining = [x for x in remaining if x.name != leaving]
            got = settled_active(broker.admin_url, topics, "s", remaining)
            want = expected(topics, remaining, consistent=consistent)
            assert got == want, f"after {leaving!r} left"


# --- partition-like names ----------------------------------------------------------------


def ring_pick(topic: str, consumers: Sequence[FailoverConsumer]) -> str:
    ordered = order_consumers(consumers)
    size = sum(1 for c in ordered if c.priority_level == ordered[0].priority_level)
    return ordered[ring_index(build_ring(ordered[:size], charset=broker_charset()), topic)].name


def test_failover_partition_index_comes_from_the_name(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    # Non-partitioned topics whose names end like partitions: the broker parses the suffix
    # (Java parseInt, so an Arabic-Indic 3 counts) and uses modulo over the six level-0
    # consumers; "-partition-05" is not canonical, so the ring decides.
    suffixes = ("-partition-5", "-partition-\u0663", "-partition-05")
    modulo = ("\uff5ay", "é", "\uff5ay")  # sorted level-0 consumers [5 % 6], [3 % 6], [5 % 6]
    for _ in range(1000):
        base = unique("fo-fake")
        topics = [base + s for s in suffixes]
        ring = [ring_pick(t, MIXED) for t in topics]
        if all(r != m for r, m in zip(ring, modulo, strict=True)):
            break
    else:
        raise AssertionError("no base name separates modulo from the ring")
    for topic in topics:
        subscribe_all(client, topic, "s", MIXED)
    got = settled_active(pulsar.admin_url, dict.fromkeys(topics, 0), "s", MIXED)
    assert got == {topics[0]: modulo[0], topics[1]: modulo[1], topics[2]: ring[2]}
    assert got == expected(dict.fromkeys(topics, 0), MIXED)


def charset_topics(pair: tuple[FailoverConsumer, FailoverConsumer]) -> list[str]:
    """Topics where UTF-8 picks "é" and ASCII (both names become "?") picks "ü"."""
    topics = []
    for i in range(10_000):
        topic = f"{unique('fo-charset')}-{i}"
        utf8 = select_active_consumer(topic, pair, charset="utf-8")
        ascii_ = select_active_consumer(topic, pair, charset="ascii")
        if utf8 is not None and utf8.name == "é" and ascii_ is not None and ascii_.name == "ü":
            topics.append(topic)
        if len(topics) == 3:
            return topics
    raise AssertionError("no topic separates the two charsets")


def test_failover_ring_hashes_names_in_the_jvm_charset(
    pulsar: LocalPulsar, client: FailoverClient
) -> None:
    # The ring hashes String.getBytes(): the JVM's default charset. The harness pins UTF-8,
    # as on Java 18+ brokers; in UTF-8 "é" and "ü" get distinct points.
    assert broker_charset().lower().replace("-", "") == "utf8"
    pair = (FailoverConsumer("é"), FailoverConsumer("ü"))
    topics = charset_topics(pair)
    for topic in topics:
        subscribe_all(client, topic, "s", pair)
    got = settled_active(pulsar.admin_url, dict.fromkeys(topics, 0), "s", pair)
    assert got == {t: "é" for t in topics}
    assert got == expected(dict.fromkeys(topics, 0), pair)


def test_failover_ring_on_an_ascii_jvm_turns_non_ascii_names_into_question_marks(
    broker_pool: BrokerPool,
) -> None:
    # A Java 17 broker under a POSIX locale hashes in ASCII: both names become "?" and the
    # later one in order ("ü") overwrites every point of the ring.
    broker = broker_pool.get(jvm_options=("-Dfile.encoding=US-ASCII",))
    pair = (FailoverConsumer("é"), FailoverConsumer("ü"))
    topics = charset_topics(pair)
    with FailoverClient(broker.service_url) as ascii_client:
        for topic in topics:
            subscribe_all(ascii_client, topic, "s", pair)
        got = settled_active(broker.admin_url, dict.fromkeys(topics, 0), "s", pair)
    assert got == {t: "ü" for t in topics}
    assert got == {
        t: (select_active_consumer(t, pair, charset="ascii") or pair[0]).name for t in topics
    }
