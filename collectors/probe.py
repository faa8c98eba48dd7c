"""Latency probes: a producer and a consumer per watched bundle, one message at a time.

A probe measures what a bundle unload costs an application, which a metric scrape averages
away. Each watched bundle gets one probe topic whose name hashes into that bundle (so it
moves with the bundle), and the probe publishes a small message on it at a low steady rate
(`rate`, default 10 per second). Each message carries its probe run, sequence number and
send time; the probe records, per message, when the broker acknowledged the publish and when
the consumer first received it, and how many times it arrived. A message never received
within `receive_timeout` is written as lost.

Probes change the cluster: they create a topic and a subscription (`pulsar-lens-probe`) per
watched bundle. They need PULSAR_LENS_ALLOW_MUTATIONS=1 and log what they create; `stop`
can delete the topics again (the drill does).

Memory is bounded: at most `max_pending` messages are tracked at once (a send beyond that
waits for the next tick); rows go to the sink in batches every `flush_every` seconds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulsar_lens.collectors.client_auth import client_options
from pulsar_lens.core.bundles import parse_bundle_name
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.errors import CollectorError, ModelError
from pulsar_lens.core.hashing import topic_bundle_hash
from pulsar_lens.core.logs import pulsar_client
from pulsar_lens.core.model import SLOW_PUBLISH_MS, ProbeRecord
from pulsar_lens.core.mutations import MutationSettings, require_mutations
from pulsar_lens.core.secrets import Secret, clean

log = logging.getLogger(__name__)

PROBE_PREFIX = "pulsar-lens-probe"
PROBE_SUBSCRIPTION = "pulsar-lens-probe"
MAX_NAME_TRIES = 5_000_000
Sink = Callable[[list[ProbeRecord]], None]


def probe_topic(namespace: str, bundle: str) -> str:
    """The probe topic of a bundle: `persistent://NS/pulsar-lens-probe-<lower>-<n>` with the
    smallest n whose name the broker hashes into `bundle` (so the topic moves with it)."""
    rng = parse_bundle_name(bundle)
    stem = f"persistent://{namespace}/{PROBE_PREFIX}-{rng.lower:08x}"
    for n in range(MAX_NAME_TRIES):
        name = f"{stem}-{n}"
        if rng.lower <= topic_bundle_hash(name) < rng.upper:
            return name
    raise ModelError(f"no probe topic name hashes into {namespace}/{bundle} (bundle too small)")


class ProbeStartError(CollectorError):
    """The probe's client could not subscribe to a probe topic or create its producer (the
    client's error says how: a lookup that outlasted the operation timeout, a refused
    connection, an authorization error). Nothing of the attempt is left open. `transient`:
    the error is one that another attempt may not meet (a timeout, a connection or lookup
    failure, a bundle being moved, the previous attempt's consumer not closed yet)."""

    def __init__(self, message: str, *, transient: bool = False, setting: str | None = None):
        super().__init__(message, setting=setting)
        self.transient = transient


TRANSIENT = (
    "Timeout",
    "ConnectError",
    "ServiceUnitNotReady",
    "LookupError",
    "TooManyLookupRequestException",
    "ConsumerBusy",
    "ProducerBusy",
)
"""The `pulsar` client's errors of a probe's start that are worth another attempt."""


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    namespace: str  # "tenant/ns"
    bundle: str  # "0x00000000_0x40000000"
    topic: str  # the probe topic, hashing into the bundle

    @classmethod
    def of(cls, namespace: str, bundle: str) -> ProbeTarget:
        return cls(namespace, bundle, probe_topic(namespace, bundle))


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    rate: float = 10.0  # messages per second per probe
    receive_timeout: float = 30.0  # seconds before an unreceived message counts as lost
    linger: float = 2.0  # seconds a finished message waits for a duplicate before it is written
    flush_every: float = 2.0  # seconds between writes to the sink
    max_pending: int = 50_000  # messages tracked at once, all probes together
    send_timeout_ms: int = 30_000  # the producer's send timeout (a failed send is an error row)
    slow_ms: float = SLOW_PUBLISH_MS  # a publish slower than this is noted (`last_slow_age`)

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1000:
            raise ValueError(f"probe rate must be in (0, 1000] messages/s, got {self.rate}")
        if self.receive_timeout <= 0 or self.flush_every <= 0 or self.max_pending < 1:
            raise ValueError("probe timeouts, flush interval and max_pending must be positive")


@dataclass
class _Message:
    target: ProbeTarget
    seq: int
    sent_at: dt.datetime
    sent_mono: int  # time.monotonic_ns() at send
    acked_at: dt.datetime | None = None
    publish_ms: float | None = None
    received_at: dt.datetime | None = None
    e2e_ms: float | None = None
    received: int = 0
    error: str | None = None
    done_mono: int | None = None  # when acked (or failed) and received

    def record(self, probe: str) -> ProbeRecord:
        return ProbeRecord(
            probe=probe,
            topic=self.target.topic,
            namespace=self.target.namespace,
            bundle=self.target.bundle,
            seq=self.seq,
            sent_at=self.sent_at,
            acked_at=self.acked_at,
            received_at=self.received_at,
            publish_ms=self.publish_ms,
            e2e_ms=self.e2e_ms,
            received=self.received,
            error=self.error,
        )


@dataclass
class ProbeCounts:
    sent: int = 0
    acked: int = 0
    received: int = 0
    duplicates: int = 0
    errors: int = 0
    written: int = 0
    foreign: int = 0  # messages of another probe run, acknowledged and ignored


@dataclass
class ProbeRunner:
    """Runs the probes of `targets` against `service_url` until stop(); rows go to `sink`."""

    service_url: str
    targets: Sequence[ProbeTarget]
    sink: Sink
    token: Secret | None = None
    settings: ProbeSettings = field(default_factory=ProbeSettings)
    # the connection settings (OAuth2, TLS) of the cluster probed; None: none beyond `token`
    connection: ClusterSettings | None = field(default=None, repr=False)
    mutations: MutationSettings = field(default_factory=MutationSettings, repr=False)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    counts: ProbeCounts = field(default_factory=ProbeCounts)
    _pending: dict[tuple[str, int], _Message] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _threads: list[threading.Thread] = field(default_factory=list, repr=False)
    _client: Any = field(default=None, repr=False)
    _producers: dict[str, Any] = field(default_factory=dict, repr=False)
    _consumers: dict[str, Any] = field(default_factory=dict, repr=False)
    _next_seq: dict[str, int] = field(default_factory=dict, repr=False)
    _newest_acked_send: dt.datetime | None = field(default=None, repr=False)
    _last_trouble_mono: int | None = field(default=None, repr=False)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> ProbeRunner:
        """Subscribe, then create the producers, then start sending; raises MutationsDisabled
        unless `mutations` are enabled."""
        require_mutations(f"probing {len(self.targets)} bundle(s) (creates topics)", self.mutations)
        import pulsar

        for target in self.targets:
            log.info(
                "probe %s creates topic %s and subscription %s (bundle %s/%s)",
                self.run_id,
                target.topic,
                PROBE_SUBSCRIPTION,
                target.namespace,
                target.bundle,
            )
        options: dict[str, Any] = {
            "operation_timeout_seconds": 30,
            "connection_timeout_ms": 10_000,
        }
        if self.connection is not None:  # OAuth2, client certificate, CA
            options |= client_options(self.connection)
        if self.token is not None:
            options["authentication"] = pulsar.AuthenticationToken(self.token.reveal())
        self._client = pulsar_client(self.service_url, **options)
        topic = ""
        try:
            for target in self.targets:
                topic = target.topic
                self._consumers[target.topic] = self._client.subscribe(
                    target.topic,
                    PROBE_SUBSCRIPTION,
                    consumer_type=pulsar.ConsumerType.Exclusive,
                    initial_position=pulsar.InitialPosition.Latest,
                    message_listener=self._on_message,
                    consumer_name=f"{PROBE_PREFIX}-{self.run_id}",
                )
                self._producers[target.topic] = self._client.create_producer(
                    target.topic,
                    producer_name=f"{PROBE_PREFIX}-{self.run_id}-{len(self._producers)}",
                    batching_enabled=False,
                    block_if_queue_full=False,
                    max_pending_messages=max(100, int(self.settings.rate * 120)),
                    send_timeout_millis=self.settings.send_timeout_ms,
                )
                self._next_seq[target.topic] = 0
        except BaseException as exc:
            self._close_client()
            if isinstance(exc, pulsar.PulsarException):
                transient = isinstance(exc, tuple(getattr(pulsar, name) for name in TRANSIENT))
                raise ProbeStartError(
                    f"the probe could not subscribe to or publish on {topic}: {exc}",
                    transient=transient,
                ) from exc
            raise
        for name, loop in (("send", self._send_loop), ("flush", self._flush_loop)):
            thread = threading.Thread(target=loop, name=f"probe-{name}-{self.run_id}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, *, drain: float = 5.0) -> ProbeCounts:
        """Stop sending, wait up to `drain` seconds for what is in flight, write every
        remaining row (unreceived ones as lost), close the client."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        deadline = time.monotonic() + drain
        while time.monotonic() < deadline and self._in_flight():
            time.sleep(0.05)
        self._flush(everything=True)
        self._close_client()
        return self.counts

    def delete_topics(self, admin: Any) -> list[str]:
        """Delete the probe topics (after stop); the names deleted. `admin` is an
        AdminClient; a topic that is already gone is fine."""
        deleted = []
        for target in self.targets:
            path = "/admin/v2/" + target.topic.replace("://", "/", 1)
            try:
                admin.delete(path, params={"force": "true"})
                deleted.append(target.topic)
            except Exception as exc:  # reported, never fatal: the drill's report goes on
                log.warning("could not delete probe topic %s: %s", target.topic, clean(str(exc)))
        return deleted

    def __enter__(self) -> ProbeRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def quiet_for(self) -> float | None:
        """Seconds since the last slow or failed publish; None when there was none."""
        with self._lock:
            last = self._last_trouble_mono
        return None if last is None else (time.monotonic_ns() - last) / 1e9

    def last_ack_sent_after(self, since: dt.datetime) -> bool:
        """Whether a message sent after `since` has been acknowledged."""
        with self._lock:
            return self._newest_acked_send is not None and self._newest_acked_send > since

    # --- sending and receiving ----------------------------------------------------------

    def _send_loop(self) -> None:
        interval = 1.0 / self.settings.rate
        next_tick = time.monotonic()
        while not self._stop.is_set():
            for target in self.targets:
                self._send_one(target)
            next_tick += interval
            delay = next_tick - time.monotonic()
            if delay < -interval:  # fell behind (a stall): skip the missed ticks
                next_tick = time.monotonic()
            elif delay > 0:
                self._stop.wait(delay)

    def _send_one(self, target: ProbeTarget) -> None:
        with self._lock:
            if len(self._pending) >= self.settings.max_pending:
                return
            seq = self._next_seq[target.topic]
            self._next_seq[target.topic] = seq + 1
            now_mono = time.monotonic_ns()
            message = _Message(target, seq, dt.datetime.now(dt.UTC), now_mono)
            self._pending[(target.topic, seq)] = message
            self.counts.sent += 1
        payload = json.dumps({"probe": self.run_id, "seq": seq, "topic": target.topic}).encode()

        def done(result: Any, _msg_id: Any) -> None:
            self._on_ack(target.topic, seq, result)

        try:
            self._producers[target.topic].send_async(payload, done)
        except Exception as exc:  # a full queue or a closed producer: an error row
            self._on_ack(target.topic, seq, exc)

    def _on_ack(self, topic: str, seq: int, result: Any) -> None:
        now_mono = time.monotonic_ns()
        with self._lock:
            message = self._pending.get((topic, seq))
            if message is None:
                return
            ok = str(result) in {"Ok", "Result.Ok"} or getattr(result, "name", "") == "Ok"
            if ok:
                message.acked_at = dt.datetime.now(dt.UTC)
                message.publish_ms = (now_mono - message.sent_mono) / 1e6
                self.counts.acked += 1
                newest = self._newest_acked_send
                if newest is None or message.sent_at > newest:
                    self._newest_acked_send = message.sent_at
                if message.publish_ms > self.settings.slow_ms:
                    self._last_trouble_mono = now_mono
            else:
                message.error = clean(str(result), limit=200)
                self.counts.errors += 1
                self._last_trouble_mono = now_mono
            self._mark_done(message, now_mono)

    def _on_message(self, consumer: Any, msg: Any) -> None:
        now_mono = time.monotonic_ns()
        with contextlib.suppress(Exception):
            consumer.acknowledge(msg)
        try:
            body = json.loads(msg.data())
            probe, seq, topic = str(body["probe"]), int(body["seq"]), str(body["topic"])
        except (ValueError, KeyError, TypeError):
            return
        with self._lock:
            if probe != self.run_id:
                self.counts.foreign += 1
                return
            message = self._pending.get((topic, seq))
            if message is None:  # already written: a late duplicate, counted only
                self.counts.duplicates += 1
                return
            message.received += 1
            if message.received == 1:
                message.received_at = dt.datetime.now(dt.UTC)
                message.e2e_ms = (now_mono - message.sent_mono) / 1e6
                self.counts.received += 1
            else:
                self.counts.duplicates += 1
            self._mark_done(message, now_mono)

    def _mark_done(self, message: _Message, now_mono: int) -> None:
        answered = message.acked_at is not None or message.error is not None
        if answered and message.received and message.done_mono is None:
            message.done_mono = now_mono

    # --- writing ------------------------------------------------------------------------

    def _in_flight(self) -> bool:
        with self._lock:
            return any(m.done_mono is None and m.error is None for m in self._pending.values())

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.settings.flush_every):
            self._flush(everything=False)

    def _flush(self, *, everything: bool) -> None:
        now = time.monotonic_ns()
        linger = int(self.settings.linger * 1e9)
        timeout = int(self.settings.receive_timeout * 1e9)
        with self._lock:
            ready = [
                key
                for key, m in self._pending.items()
                if everything
                or (m.done_mono is not None and now - m.done_mono >= linger)
                or now - m.sent_mono >= timeout
            ]
            rows = [self._pending.pop(key).record(self.run_id) for key in ready]
        if not rows:
            return
        rows.sort(key=lambda r: (r.topic, r.seq))
        try:
            self.sink(rows)
            self.counts.written += len(rows)
        except Exception as exc:  # reported, never fatal: the probe goes on
            log.warning("could not write %d probe rows: %s", len(rows), clean(str(exc)))

    def _close_client(self) -> None:
        for handle in [*self._producers.values(), *self._consumers.values()]:
            with contextlib.suppress(Exception):
                handle.close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._client = None
        self._producers.clear()
        self._consumers.clear()
