"""Demo workloads for `pulsar-lens demo`: bounded-rate traffic on a local broker.

Everything runs against one loopback standalone and shows each dashboard page something real:
a Key_Shared subscription fed skewed keys, a consumer that stops acknowledging so its hashes
get stuck draining, a consumer that joins and leaves, failover consumers on a partitioned
topic, a Shared subscription nobody reads, and a bundle unload now and then. The unloads
mutate the demo's own broker only. On a multi-broker cluster (`brokers` lists their ids) each
unload names another broker than the owner as destination, so bundles really move.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pulsar
import requests

from pulsar_lens.core.errors import CollectorError
from pulsar_lens.core.hashing import topic_bundle_hash
from pulsar_lens.core.logs import pulsar_client
from pulsar_lens.core.topicname import parse_topic_name

log = logging.getLogger(__name__)

ORDERS = "demo-orders"
PAYMENTS = "demo-payments"
ACCOUNTS = 40  # the payments topic's keys
EVENTS = "demo-events"
AUDIT = "demo-audit"


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """Rates and periods of the demo; every loop is paced by these."""

    namespace: str = "public/demo"
    orders_per_second: float = 20.0
    payments_per_second: float = 5.0
    events_per_second: float = 6.0
    audit_per_second: float = 1.0
    event_partitions: int = 6
    stuck_after: float = 8.0  # seconds before a second payments consumer takes hashes away
    restuck_every: float = 30.0  # how often the broker is asked whether payments still drains
    churn_every: float = 25.0  # a consumer joins, then leaves, on this period
    unload_every: float = 45.0  # one bundle unloaded per period; 0 disables
    customers: int = 200
    seed: int = 7


def skewed_keys(customers: int, *, seed: int) -> Iterator[str]:
    """Endless customer keys with a Zipf-like skew: a few customers send most messages."""
    rng = random.Random(seed)
    names = [f"customer-{i}" for i in range(customers)]
    weights = [1.0 / (i + 1) ** 1.1 for i in range(customers)]
    while True:
        yield from rng.choices(names, weights=weights, k=256)


def _ack(consumer: Any, message: Any) -> None:
    consumer.acknowledge(message)


@dataclass
class DemoWorkloads:
    """Start with start(), stop with stop(); also a context manager."""

    service_url: str
    admin_url: str
    settings: DemoSettings = field(default_factory=DemoSettings)
    brokers: tuple[str, ...] = ()  # broker ids (host:webPort) of a multi-broker cluster
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _threads: list[threading.Thread] = field(default_factory=list, init=False)
    _client: Any = field(default=None, init=False)
    _http: requests.Session = field(default_factory=requests.Session, init=False)
    unloads: int = field(default=0, init=False)
    held: int = field(default=0, init=False)  # messages payments-stuck holds unacknowledged
    _held_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def topic(self, name: str) -> str:
        return f"persistent://{self.settings.namespace}/{name}"

    def start(self) -> DemoWorkloads:
        # the C++ client logs every reconnect (each unload) at INFO: pulsar_client() keeps
        # those out of the console and routes its warnings through our log format
        self._client = pulsar_client(self.service_url, operation_timeout_seconds=15)
        try:
            self._create_namespace()
            self._create_partitioned(EVENTS, self.settings.event_partitions)
            self._start_orders()
            self._start_payments()
            self._start_events()
            self._start_audit()
            if self.settings.unload_every > 0:
                self._spawn("unloads", self._unload_loop)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)
        self._threads.clear()
        if self._client is not None:
            try:
                self._client.close()
            except pulsar.PulsarException as exc:
                log.debug("closing the demo client: %s", exc)
            self._client = None
        self._http.close()

    def __enter__(self) -> DemoWorkloads:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- workloads -----------------------------------------------------------------------

    def _start_orders(self) -> None:
        topic = self.topic(ORDERS)
        for name in ("orders-a", "orders-b", "orders-c"):
            self._subscribe(topic, "orders-by-customer", name, key_shared=True)
        keys = skewed_keys(self.settings.customers, seed=self.settings.seed)
        self._spawn(
            "orders-producer",
            self._produce_loop,
            topic,
            keys.__next__,
            self.settings.orders_per_second,
        )
        self._spawn(
            "orders-churn", self._churn_loop, topic, "orders-by-customer", "orders-churn", True
        )

    def _start_payments(self) -> None:
        topic = self.topic(PAYMENTS)
        self._subscribe(
            topic, "payments-by-account", "payments-stuck", key_shared=True, listener=self._hold
        )
        accounts = itertools.cycle([f"account-{i}" for i in range(ACCOUNTS)])
        self._spawn(
            "payments-producer",
            self._produce_loop,
            topic,
            accounts.__next__,
            self.settings.payments_per_second,
        )
        self._spawn("payments-join", self._keep_stuck, topic, "payments-by-account", "payments-ok")

    def _start_events(self) -> None:
        topic = self.topic(EVENTS)
        for name in ("events-1", "events-2", "events-3"):
            self._subscribe(topic, "events-failover", name, failover=True)
        devices = itertools.cycle([f"device-{i}" for i in range(30)])
        self._spawn(
            "events-producer",
            self._produce_loop,
            topic,
            devices.__next__,
            self.settings.events_per_second,
        )
        self._spawn("events-churn", self._churn_loop, topic, "events-failover", "events-4", False)

    def _start_audit(self) -> None:
        topic = self.topic(AUDIT)
        # a durable Shared subscription with no consumer: its backlog only grows
        self._subscribe(topic, "audit-archiver", "audit-once", key_shared=False).close()
        counter = itertools.count()
        self._spawn(
            "audit-producer",
            self._produce_loop,
            topic,
            lambda: f"audit-{next(counter) % 10}",
            self.settings.audit_per_second,
        )

    # --- building blocks -----------------------------------------------------------------

    def _subscribe(
        self,
        topic: str,
        subscription: str,
        name: str,
        *,
        key_shared: bool = False,
        failover: bool = False,
        listener: Callable[[Any, Any], None] = _ack,
    ) -> Any:
        if key_shared:
            kind = pulsar.ConsumerType.KeyShared
        elif failover:
            kind = pulsar.ConsumerType.Failover
        else:
            kind = pulsar.ConsumerType.Shared
        return self._client.subscribe(
            topic,
            subscription,
            consumer_type=kind,
            consumer_name=name,
            message_listener=listener,
            initial_position=pulsar.InitialPosition.Earliest,
            receiver_queue_size=100,
        )

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(
            target=self._guard, args=(target, *args), name=f"demo-{name}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _guard(self, target: Callable[..., None], *args: Any) -> None:
        try:
            target(*args)
        except Exception:
            log.exception("demo workload %s stopped", target.__name__)

    def _produce_loop(self, topic: str, next_key: Callable[[], str], rate: float) -> None:
        producer = self._client.create_producer(topic, send_timeout_millis=10000)
        period = 1.0 / max(rate, 0.1)
        sent = 0
        try:
            while not self._stop.wait(period):
                key = next_key()
                try:
                    producer.send(f"{key} #{sent}".encode(), partition_key=key)
                    sent += 1
                except pulsar.PulsarException as exc:  # e.g. during an unload
                    log.debug("demo send to %s failed: %s", topic, exc)
        finally:
            producer.close()

    def _churn_loop(self, topic: str, subscription: str, name: str, key_shared: bool) -> None:
        while not self._stop.wait(self.settings.churn_every):
            consumer = self._subscribe(
                topic, subscription, name, key_shared=key_shared, failover=not key_shared
            )
            self._stop.wait(self.settings.churn_every)
            consumer.close()

    def _hold(self, consumer: Any, message: Any) -> None:
        """payments-stuck's listener: never acknowledges, counts what it holds."""
        with self._held_lock:
            self.held += 1

    def _keep_stuck(self, topic: str, subscription: str, name: str) -> None:
        """payments-ok joins after `stuck_after`, once payments-stuck holds a message of
        every account: the hashes that move to payments-ok are then stuck draining.

        Then, every `restuck_every`, the broker is asked whether the subscription still has
        draining hashes. A reconnection of the demo's client (an unload of the topic's
        bundle, a closed connection) subscribes both consumers again; when payments-ok is
        back first it is given payments-stuck's held messages, acknowledges them, and
        nothing is stuck after. payments-ok then leaves and joins again the same way."""
        if self._stop.wait(self.settings.stuck_after):
            return
        consumer = self._join_once_held(topic, subscription, name, since=0)
        while consumer is not None and not self._stop.wait(self.settings.restuck_every):
            if self.draining_hashes(topic, subscription) != 0:  # stuck, or not known
                continue
            log.info("demo: %s drains no hashes any more; %s leaves and joins again", topic, name)
            held = self.held
            consumer.close()
            consumer = self._join_once_held(topic, subscription, name, since=held)

    def _join_once_held(self, topic: str, subscription: str, name: str, *, since: int) -> Any:
        """Subscribe `name` once payments-stuck has been handed a message of every account
        since its count was `since` (a slow start would leave it nothing to drain), at most a
        minute later; None when the demo stops meanwhile."""
        give_up = time.monotonic() + 60.0
        while self.held < since + ACCOUNTS and time.monotonic() < give_up:
            if self._stop.wait(0.2):
                return None
        return self._subscribe(topic, subscription, name, key_shared=True)

    def draining_hashes(self, topic: str, subscription: str) -> int | None:
        """The broker's drainingHashesCount of `subscription` on `topic` (Pulsar 4.0's topic
        stats), None when the broker did not say."""
        url = f"{self.admin_url}{parse_topic_name(topic).admin_path}/stats"
        try:  # not self._http: the unload thread uses that session
            stats = requests.get(url, timeout=10).json()
            count = stats["subscriptions"][subscription]["drainingHashesCount"]
        except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
            log.debug("demo: no draining hashes count of %s: %s", topic, exc)
            return None
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def _unload_loop(self) -> None:
        for bundle in itertools.cycle(self._unloadable_bundles()):
            if self._stop.wait(self.settings.unload_every):
                return
            self.unload(bundle)

    def _unloadable_bundles(self) -> list[str]:
        """The namespace's bundles, except the one holding the stuck payments topic."""
        url = f"{self.admin_url}/admin/v2/namespaces/{self.settings.namespace}/bundles"
        boundaries = [int(b, 16) for b in self._http.get(url, timeout=10).json()["boundaries"]]
        stuck = topic_bundle_hash(self.topic(PAYMENTS))
        bundles = []
        for lower, upper in itertools.pairwise(boundaries):
            if not lower <= stuck < upper:
                bundles.append(f"0x{lower:08x}_0x{upper:08x}")
        return bundles

    def unload(self, bundle: str) -> None:
        """PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/unload on the demo broker; on a
        cluster, to a broker other than the owner."""
        url = f"{self.admin_url}/admin/v2/namespaces/{self.settings.namespace}/{bundle}/unload"
        params = {}
        owner = self.owner(bundle) if len(self.brokers) > 1 else None
        others = [b for b in self.brokers if b != owner]
        if owner is not None and others:
            params["destinationBroker"] = others[self.unloads % len(others)]
        try:
            resp = self._http.put(url, params=params, timeout=30)
        except requests.RequestException as exc:
            log.warning("demo unload of %s failed: %s", bundle, exc)
            return
        if resp.status_code < 300:
            self.unloads += 1
            log.info("demo unloaded bundle %s/%s", self.settings.namespace, bundle)
        else:
            log.warning("demo unload of %s returned %s", bundle, resp.status_code)

    def owner(self, bundle: str) -> str | None:
        """The broker whose owned namespaces list `bundle` of the demo namespace, if any."""
        key = f"{self.settings.namespace}/{bundle}"
        cluster = self.cluster
        for broker in self.brokers:
            url = f"http://{broker}/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces"
            try:
                owned = self._http.get(url, timeout=10).json()
            except (requests.RequestException, ValueError):
                continue
            if isinstance(owned, dict) and key in owned:
                return broker
        return None

    @property
    def cluster(self) -> str:
        clusters = self._http.get(f"{self.admin_url}/admin/v2/clusters", timeout=10).json()
        return str(clusters[0]) if clusters else "standalone"

    def _create_namespace(self) -> None:
        """PUT /admin/v2/namespaces/{tenant}/{ns}; 409 means it exists."""
        url = f"{self.admin_url}/admin/v2/namespaces/{self.settings.namespace}"
        self._put(url, None)

    def _put(self, url: str, body: object) -> None:
        resp = self._http.put(url, json=body, timeout=30)
        if resp.status_code not in (200, 204, 409):
            raise CollectorError(
                f"PUT {url} returned {resp.status_code}: {resp.text[:200]}; "
                "the demo needs a broker it may create namespaces and topics on"
            )

    def _create_partitioned(self, name: str, partitions: int) -> None:
        """PUT /admin/v2/persistent/{tenant}/{ns}/{topic}/partitions; 409 means it exists."""
        url = f"{self.admin_url}/admin/v2/persistent/{self.settings.namespace}/{name}/partitions"
        self._put(url, partitions)
