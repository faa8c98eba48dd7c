"""poll() against a real Pulsar 4.0 broker: it sees exactly what pulsar-client set up, its
hash ranges, draining hashes, active consumers and bundles are the broker's own, and bad
endpoints (closed port, 401, malformed JSON) give a partial snapshot, never a crash.

Each test works in its own namespace and polls only that namespace.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pulsar as pulsar_client
import pytest
import requests

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.answers import decode_json
from pulsar_lens.collectors.poll import diff, poll
from pulsar_lens.collectors.typedrecords import parse_bulk, subscriptions_of, topic_of
from pulsar_lens.collectors.typedstats import typed_bulk
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.topicname import parse_topic_name
from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from tests.brokers import LIVE_LINES, BrokerPool
from tests.collectors.recorded import DATA, index

ConsumerType = pulsar_client.ConsumerType
PARTITIONS = 3
SUBSCRIPTIONS = {
    "ex": (ConsumerType.Exclusive, ["ex-1"]),
    "sh": (ConsumerType.Shared, ["sh-1", "sh-2"]),
    "fo": (ConsumerType.Failover, ["fo-a", "fo-b"]),
    "ks": (ConsumerType.KeyShared, ["ks-1", "ks-2"]),
}
PARTITIONED_SUBSCRIPTIONS = {
    "pfo": (ConsumerType.Failover, ["pfo-1", "pfo-2"]),
    "pks": (ConsumerType.KeyShared, ["pks-1", "pks-2"]),
}
TYPE_NAMES = {
    ConsumerType.Exclusive: "Exclusive",
    ConsumerType.Shared: "Shared",
    ConsumerType.Failover: "Failover",
    ConsumerType.KeyShared: "Key_Shared",
}


@dataclass
class Setup:
    """A namespace with a non-partitioned and a partitioned topic and live consumers."""

    broker: LocalPulsar
    namespace: str
    client: Any
    consumers: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    @property
    def plain(self) -> str:
        return f"persistent://{self.namespace}/plain"

    @property
    def parted(self) -> str:
        return f"persistent://{self.namespace}/parted"

    @property
    def partitions(self) -> list[str]:
        return [f"{self.parted}-partition-{i}" for i in range(PARTITIONS)]

    def subscribe(self, topic: str, sub: str, kind: Any, name: str, **kw: Any) -> Any:
        consumer = self.client.subscribe(topic, sub, consumer_type=kind, consumer_name=name, **kw)
        self.consumers.setdefault((topic, sub), []).append(consumer)
        return consumer

    def get(self, path: str) -> Any:
        resp = requests.get(f"{self.broker.admin_url}{path}", timeout=10)
        resp.raise_for_status()
        return resp.json() if resp.content else None

    def stats(self, topic: str) -> dict[str, Any]:
        stats: dict[str, Any] = self.get(
            "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/stats"
        )
        return stats

    def lookup_bundle(self, topic: str) -> str:
        path = "/lookup/v2/topic/persistent/" + topic.removeprefix("persistent://") + "/bundle"
        resp = requests.get(f"{self.broker.admin_url}{path}", timeout=10)
        resp.raise_for_status()
        return resp.text.strip().strip('"')

    def poll(self, **kwargs: Any) -> Snapshot:
        with AdminClient(self.broker.admin_url) as client:
            return poll(client, namespaces=[self.namespace], **kwargs)

    def wait_for_bulk(self, check: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> None:
        """Wait until the broker's bulk stats (rebuilt every 2 s here) satisfy `check`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            bulk = self.get("/admin/v2/broker-stats/topics") or {}
            if check(bulk.get(self.namespace, {})):
                return
            time.sleep(0.25)
        raise AssertionError(f"broker-stats/topics did not show the setup of {self.namespace}")

    def wait_for_consumers(self, names: set[str]) -> None:
        self.wait_for_bulk(lambda ns: _consumer_names(ns) == names)


def _consumer_names(ns_bulk: dict[str, Any]) -> set[str]:
    text_names = set()
    for bundle in ns_bulk.values():
        for topics in bundle.values():
            for topic, stats in topics.items():
                if "/__" in topic:
                    continue
                for sub in stats.get("subscriptions", {}).values():
                    text_names |= {c.get("consumerName") for c in sub.get("consumers", [])}
    return text_names


@contextmanager
def new_setup(broker: LocalPulsar) -> Iterator[Setup]:
    namespace = f"public/lens-collect-{uuid.uuid4().hex[:8]}"
    resp = requests.put(f"{broker.admin_url}/admin/v2/namespaces/{namespace}", timeout=10)
    assert resp.status_code == 204, resp.text
    client = pulsar_client.Client(broker.service_url, operation_timeout_seconds=30)
    try:
        yield Setup(broker, namespace, client)
    finally:
        client.close()


def build_everything(s: Setup) -> None:
    resp = requests.put(
        f"{s.broker.admin_url}/admin/v2/persistent/{s.namespace}/parted/partitions",
        json=PARTITIONS,
        timeout=10,
    )
    assert resp.status_code == 204, resp.text
    for sub, (kind, names) in SUBSCRIPTIONS.items():
        for name in names:
            s.subscribe(s.plain, sub, kind, name, receiver_queue_size=10)
    for sub, (kind, names) in PARTITIONED_SUBSCRIPTIONS.items():
        for name in names:
            s.subscribe(s.parted, sub, kind, name)


def leave_unacked_then_join(s: Setup) -> None:
    """`kd-1` receives and never acks; `kd-2` joins, so hashes drain for kd-1."""
    stuck = s.subscribe(s.plain, "kd", ConsumerType.KeyShared, "kd-1", receiver_queue_size=30)
    producer = s.client.create_producer(s.plain, batching_enabled=False)
    for i in range(90):
        producer.send(f"m{i}".encode(), partition_key=f"key-{i % 30}")
    for _ in range(30):
        stuck.receive(timeout_millis=10_000)
    s.subscribe(s.plain, "kd", ConsumerType.KeyShared, "kd-2")


ALL_NAMES = {
    n for _, ns in [*SUBSCRIPTIONS.values(), *PARTITIONED_SUBSCRIPTIONS.values()] for n in ns
}


@pytest.fixture(scope="module")
def polled(pulsar: LocalPulsar) -> Iterator[tuple[Setup, Snapshot]]:
    with new_setup(pulsar) as s:
        build_everything(s)
        leave_unacked_then_join(s)
        s.wait_for_consumers(ALL_NAMES | {"kd-1", "kd-2"})
        yield s, s.poll()


def user(items: Any) -> list[Any]:
    return [x for x in items if "/__" not in x.topic]


def test_collector_poll_has_no_errors_and_knows_the_broker(polled: tuple[Setup, Snapshot]) -> None:
    s, snap = polled
    assert snap.errors == ()
    assert snap.cluster == "standalone"
    broker_id = s.broker.admin_url.removeprefix("http://")
    assert [(b.broker_id, b.is_leader, b.version) for b in snap.brokers] == [
        (broker_id, True, s.broker.version)
    ]


def test_collector_poll_sees_exactly_the_topics_and_partitions(
    polled: tuple[Setup, Snapshot],
) -> None:
    s, snap = polled
    topics = {t.topic: t for t in user(snap.topics)}
    assert set(topics) == {s.plain, *s.partitions}
    assert topics[s.plain].partitioned_topic is None
    assert sorted(
        (t.partition_index, t.partitioned_topic) for t in topics.values() if t.partitioned_topic
    ) == [(i, s.parted) for i in range(PARTITIONS)]
    assert all(
        t.startswith(f"persistent://{s.namespace}/__")
        for t in {x.topic for x in snap.topics} - set(topics)
    )


def test_collector_poll_sees_exactly_the_subscriptions_with_types(
    polled: tuple[Setup, Snapshot],
) -> None:
    s, snap = polled
    expected = {(s.plain, sub): TYPE_NAMES[kind] for sub, (kind, _) in SUBSCRIPTIONS.items()}
    expected[(s.plain, "kd")] = "Key_Shared"
    for partition in s.partitions:
        expected |= {
            (partition, sub): TYPE_NAMES[k] for sub, (k, _) in PARTITIONED_SUBSCRIPTIONS.items()
        }
    assert {(x.topic, x.subscription): x.type for x in user(snap.subscriptions)} == expected


def test_collector_poll_sees_exactly_the_named_consumers(polled: tuple[Setup, Snapshot]) -> None:
    s, snap = polled
    expected = {(s.plain, sub, n) for sub, (_, names) in SUBSCRIPTIONS.items() for n in names}
    expected |= {(s.plain, "kd", "kd-1"), (s.plain, "kd", "kd-2")}
    for partition in s.partitions:
        expected |= {
            (partition, sub, n) for sub, (_, ns) in PARTITIONED_SUBSCRIPTIONS.items() for n in ns
        }
    got = [(c.topic, c.subscription, c.consumer_name) for c in user(snap.consumers)]
    assert sorted(got) == sorted(expected)


def test_collector_key_shared_ranges_equal_the_brokers_stats(
    polled: tuple[Setup, Snapshot],
) -> None:
    s, snap = polled
    checked = 0
    for topic in (s.plain, *s.partitions):
        stats = s.stats(topic)["subscriptions"]
        for sub in ("ks", "kd", "pks"):
            if sub not in stats:
                continue
            broker = {
                c["consumerName"]: [tuple(r) for r in c["keyHashRangeArrays"]]
                for c in stats[sub]["consumers"]
            }
            ours = {
                c.consumer_name: list(c.hash_ranges)
                for c in snap.consumers
                if (c.topic, c.subscription) == (topic, sub)
            }
            assert ours == broker
            checked += 1
    assert checked == 2 + PARTITIONS


def test_collector_draining_hashes_equal_the_brokers_stats(polled: tuple[Setup, Snapshot]) -> None:
    s, snap = polled
    consumers = s.stats(s.plain)["subscriptions"]["kd"]["consumers"]
    broker = {
        (c["consumerName"], h["hash"], h["unackMsgs"])
        for c in consumers
        for h in c.get("drainingHashes", [])
    }
    ours = {
        (d.consumer_name, d.hash, d.unack_msgs) for d in snap.draining_hashes if d.topic == s.plain
    }
    assert ours == broker
    assert broker, "the setup should leave kd-1 with draining hashes"
    kd = next(x for x in snap.subscriptions if (x.topic, x.subscription) == (s.plain, "kd"))
    assert kd.draining_hashes_count == len(broker)
    assert kd.key_shared_mode == "AUTO_SPLIT"


def test_collector_active_consumers_equal_the_brokers(polled: tuple[Setup, Snapshot]) -> None:
    s, snap = polled
    for topic in (s.plain, *s.partitions):
        stats = s.stats(topic)["subscriptions"]
        for x in (x for x in snap.subscriptions if x.topic == topic):
            if x.type in ("Exclusive", "Failover"):
                assert x.active_consumer_name == stats[x.subscription]["activeConsumerName"]
            else:
                assert x.active_consumer_name is None


def test_collector_topic_bundles_equal_the_brokers_lookup(polled: tuple[Setup, Snapshot]) -> None:
    s, snap = polled
    broker_id = s.broker.admin_url.removeprefix("http://")
    for t in user(snap.topics):
        assert t.bundle == s.lookup_bundle(t.topic)
        assert t.owner_broker == broker_id
    owned = {b.bundle: b.owner_broker for b in snap.bundles}
    assert {t.bundle for t in user(snap.topics)} <= {b for b, o in owned.items() if o == broker_id}


def test_collector_bulk_stats_lack_what_per_topic_stats_fill_in(
    polled: tuple[Setup, Snapshot],
) -> None:
    """Why the poll asks `.../stats` for Key_Shared and Failover topics: in 4.0.7 the bulk
    answer has their consumers but no ranges, draining hashes, mode or active consumer."""
    s, _ = polled
    bulk = s.get("/admin/v2/broker-stats/topics")[s.namespace]
    plain = next(t[s.plain] for b in bulk.values() for t in b.values() if s.plain in t)
    subs = plain["subscriptions"]
    assert {c["consumerName"] for c in subs["kd"]["consumers"]} == {"kd-1", "kd-2"}
    for consumer in subs["kd"]["consumers"] + subs["ks"]["consumers"]:
        assert not {"keyHashRangeArrays", "keyHashRanges", "drainingHashes"} & set(consumer)
    assert not {"keySharedMode", "drainingHashesCount"} & set(subs["kd"])
    assert "activeConsumerName" not in subs["fo"] and "activeConsumerName" not in subs["ex"]


def test_collector_poll_costs_o_brokers_plus_namespaces(polled: tuple[Setup, Snapshot]) -> None:
    _, snap = polled
    # leader, clusters, brokers; 4 per broker + version; 3 per namespace; stats for the plain
    # topic (Key_Shared, 2-consumer Failover) and each partition (Key_Shared, Failover)
    assert snap.requests == 3 + (4 + 1) + 3 + (1 + PARTITIONS)


def _backlog_of(ns_bulk: dict[str, Any], topic: str, sub: str) -> int:
    for bundle in ns_bulk.values():
        for topics in bundle.values():
            stats = topics.get(topic)
            if stats is not None:
                return int(stats["subscriptions"].get(sub, {}).get("msgBacklog", 0))
    return 0


def test_collector_earliest_publish_time_in_backlog_is_the_brokers(pulsar: LocalPulsar) -> None:
    # The time lag of a subscription needs the publish time of its oldest unacked message,
    # which the broker computes only when asked (getEarliestTimeInBacklog=true).
    with new_setup(pulsar) as s:
        s.subscribe(s.plain, "lagging", ConsumerType.Shared, "lag-1").close()
        producer = s.client.create_producer(s.plain, batching_enabled=False)
        for i in range(5):
            producer.send(f"m{i}".encode())
        s.wait_for_bulk(lambda ns: _backlog_of(ns, s.plain, "lagging") == 5)
        snapshot = s.poll()
        path = "/admin/v2/persistent/" + s.plain.removeprefix("persistent://") + "/stats"
        broker = s.get(path + "?getEarliestTimeInBacklog=true")
    expected_ms = broker["subscriptions"]["lagging"]["earliestMsgPublishTimeInBacklog"]
    assert expected_ms > 0
    (record,) = [
        r for r in snapshot.subscriptions if r.topic == s.plain and r.subscription == "lagging"
    ]
    assert record.msg_backlog == 5
    assert record.earliest_msg_publish_time_in_backlog is not None
    assert int(record.earliest_msg_publish_time_in_backlog.timestamp() * 1000) == expected_ms


def test_collector_diff_sees_consumers_move_and_the_active_one_change(pulsar: LocalPulsar) -> None:
    with new_setup(pulsar) as s:
        first_ks = s.subscribe(s.plain, "ks", ConsumerType.KeyShared, "ks-1")
        s.subscribe(s.plain, "ks", ConsumerType.KeyShared, "ks-2")
        s.subscribe(s.plain, "fo", ConsumerType.Failover, "fo-a")
        s.subscribe(s.plain, "fo", ConsumerType.Failover, "fo-b")
        s.wait_for_consumers({"ks-1", "ks-2", "fo-a", "fo-b"})
        before = s.poll()
        active = next(
            x.active_consumer_name for x in before.subscriptions if x.subscription == "fo"
        )
        first_ks.close()
        s.subscribe(s.plain, "ks", ConsumerType.KeyShared, "ks-3")
        next(c for c in s.consumers[(s.plain, "fo")] if c.consumer_name() == active).close()
        remaining = {"ks-2", "ks-3", "fo-a", "fo-b"} - {active}
        s.wait_for_consumers(remaining)
        after = s.poll()
    events = {(e.kind, e.consumer_name or e.after) for e in diff(before, after)}
    assert ("consumer_left", "ks-1") in events
    assert ("consumer_joined", "ks-3") in events
    assert ("consumer_left", active) in events
    assert ("hash_ranges_changed", "ks-2") in events
    assert ("active_consumer_changed", ({"fo-a", "fo-b"} - {active}).pop()) in events


def test_collector_reads_classic_dispatcher_range_strings(broker_pool: BrokerPool) -> None:
    broker = broker_pool.get({"subscriptionKeySharedUseClassicPersistentImplementation": "true"})
    with new_setup(broker) as s:
        s.subscribe(s.plain, "ks", ConsumerType.KeyShared, "c-1")
        s.subscribe(s.plain, "ks", ConsumerType.KeyShared, "c-2")
        s.wait_for_consumers({"c-1", "c-2"})
        snap = s.poll()
        raw = {c["consumerName"]: c for c in s.stats(s.plain)["subscriptions"]["ks"]["consumers"]}
    assert snap.errors == ()
    for c in user(snap.consumers):
        strings = raw[c.consumer_name]["keyHashRanges"]
        assert [f"[{a}, {b}]" for a, b in c.hash_ranges] == sorted(
            strings, key=lambda t: int(t[1:].split(",")[0])
        )
        assert c.read_position_when_joining == raw[c.consumer_name].get("readPositionWhenJoining")


# --- bad input: a closed port, a 401, malformed JSON ---------------------------------------

TOKEN = "live-test-token.c2VjcmV0.SIGNATURE-never-log-me"


class _Handler(BaseHTTPRequestHandler):
    answer: Callable[[BaseHTTPRequestHandler], tuple[int, str]]

    def do_GET(self) -> None:
        status, text = type(self).answer(self)
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # keep the test output quiet
        pass


@contextmanager
def loopback(answer: Callable[[BaseHTTPRequestHandler], tuple[int, str]]) -> Iterator[str]:
    handler = type("Handler", (_Handler,), {"answer": staticmethod(answer)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_collector_unreachable_url_gives_a_partial_snapshot() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with AdminClient(url, retries=1, backoff=0.05, timeout=2.0) as client:
        snap = poll(client)
    assert snap.partial and snap.topics == () and snap.brokers == ()
    assert all(
        e.status is None and "could not reach the admin API" in e.message for e in snap.errors
    )
    assert {e.endpoint for e in snap.errors} == {
        "GET /admin/v2/clusters",
        "GET /admin/v2/tenants",
        "GET /admin/v2/brokers/leaderBroker",
    }
    assert time.monotonic() - started < 30  # bounded retries of refused calls, not a hang


def test_collector_wrong_token_is_a_clear_401_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(request: BaseHTTPRequestHandler) -> tuple[int, str]:
        echoed = request.headers.get("Authorization", "")
        return 401, json.dumps({"reason": f"Authentication required; got {echoed}"})

    caplog.set_level(logging.DEBUG)
    with loopback(refuse) as url, AdminClient(url, token=TOKEN) as client:
        snap = poll(client)
    assert snap.partial and {e.status for e in snap.errors} == {401}
    assert all("was refused" in e.message for e in snap.errors)
    texts = [e.message for e in snap.errors] + [r.getMessage() for r in caplog.records]
    assert all(TOKEN not in t for t in texts)
    assert any("Bearer ***" in e.message for e in snap.errors)


def test_collector_malformed_json_mid_poll_keeps_the_rest() -> None:
    """A server replaying the recorded 4.0.7 poll, except that broker-stats/topics is cut."""
    recorded = {(e["path"], e["query"]): e for e in index("default")}
    host: dict[str, str] = {}

    def replay(request: BaseHTTPRequestHandler) -> tuple[int, str]:
        path, _, query = request.path.partition("?")
        if path == "/admin/v2/broker-stats/topics":
            return 200, '{"public/default": {"0x00000000_0x40000000": {"persistent": {'
        entry = recorded.get((path.replace(host["id"], "127.0.0.1:8080"), query))
        if entry is None:
            return 404, json.dumps({"reason": "not recorded"})
        text = (DATA / "default" / entry["file"]).read_text() if entry["file"] else ""
        return entry["status"], text.replace("127.0.0.1:8080", host["id"])

    with loopback(replay) as url:
        host["id"] = url.removeprefix("http://")
        with AdminClient(url) as client:
            snap = poll(client)
    (error,) = snap.errors
    assert error.endpoint == f"GET {url}/admin/v2/broker-stats/topics"
    assert error.status is None and "unreadable body" in error.message
    assert "persistent://public/default/orders" in {t.topic for t in snap.topics}
    assert len(snap.bundles) >= 4 and snap.brokers[0].version == "4.0.7"


@pytest.fixture(scope="module", params=LIVE_LINES)
def bulk_on_each_line(
    request: pytest.FixtureRequest, broker_pool: BrokerPool
) -> Iterator[tuple[Setup, bytes]]:
    """The bulk answer of a broker of each tested line, after the setup of `polled` and a
    topic, subscription and consumer named outside ASCII: the part of this module's namespace,
    byte for byte as the broker wrote it (other tests share the broker). 4.0.7 writes such
    names as `\\u` escapes here."""
    with new_setup(broker_pool.get(None, version=str(request.param))) as s:
        build_everything(s)
        leave_unacked_then_join(s)
        s.subscribe(ODD_TOPIC.format(s.namespace), ODD_SUBSCRIPTION, ConsumerType.Shared, ODD)
        s.wait_for_consumers(ALL_NAMES | {"kd-1", "kd-2", ODD})
        resp = requests.get(f"{s.broker.admin_url}/admin/v2/broker-stats/topics", timeout=30)
        resp.raise_for_status()
        parts = msgspec.json.decode(resp.content, type=dict[str, msgspec.Raw])
        key = json.dumps(s.namespace).encode()
        part = bytes(parts[s.namespace])
        if str(request.param) == "4.0":  # the case this reads: names past ASCII as escapes
            assert b"\\u" in part, part[:2000]
        yield s, b"{" + key + b":" + part + b"}"


ODD_TOPIC = "persistent://{}/名前-é"
ODD_SUBSCRIPTION = "s:日本"
ODD = "c-ü"


def test_collector_reads_the_brokers_bulk_answer_typed(
    bulk_on_each_line: tuple[Setup, bytes],
) -> None:
    """Each line's own bulk answer (Key_Shared with draining hashes, Failover, Exclusive,
    partitions, a producer) is read by the typed reader, and into the very records the
    tolerant reader makes of it: a field the broker writes that the Structs lack, or the
    escapes of names outside ASCII, would send every poll of that line down the slower
    path."""
    s, body = bulk_on_each_line
    typed = typed_bulk(body)
    assert typed is not None, body[:2000]
    both = parse_bulk(typed, "b"), parse_bulk(decode_json(body), "b")
    assert [(t.topic, t.bundle) for t in both[0]] == [(t.topic, t.bundle) for t in both[1]]
    odd = ODD_TOPIC.format(s.namespace)
    assert {s.plain, *s.partitions, odd} <= {t.topic for t in both[0]}
    (entry,) = [t for t in both[0] if t.topic == odd]
    consumers = subscriptions_of(odd, entry.stats).consumers
    assert [(c.subscription, c.consumer_name) for c in consumers] == [(ODD_SUBSCRIPTION, ODD)]
    for fast, slow in zip(*both, strict=True):
        name = parse_topic_name(fast.topic)
        assert topic_of(name, fast.stats, bundle=fast.bundle, owner="o") == topic_of(
            name, slow.stats, bundle=slow.bundle, owner="o"
        )
        assert subscriptions_of(fast.topic, fast.stats) == subscriptions_of(slow.topic, slow.stats)
