"""The key sampler: reads the recent messages of topics with a Reader and records their keys.

For every message read it records the sticky key the broker routes it by, that key's 4.0
consistent-hashing sticky hash and the publish time (`KeySampleRecord`). Reading message keys
is reading data, so callers run it only when sampling is switched on.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pulsar_lens.collectors.client_auth import client_options
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.hashing import resolve_sticky_key, sticky_key_hash
from pulsar_lens.core.logs import pulsar_client
from pulsar_lens.core.model import KeySampleRecord
from pulsar_lens.core.secrets import Secret

log = logging.getLogger(__name__)

DEFAULT_PER_TOPIC = 200
DEFAULT_WINDOW = dt.timedelta(minutes=5)
DEFAULT_TIMEOUT = 10.0
READ_WAIT = 1.0  # seconds one read_next() may block before the loop checks its budget again
RECONNECT_PAUSE = 0.2  # seconds between asks while the reader reconnects after its seek
RECONNECT_ASKS = 25  # at most this many asks fail so before the topic is given up as failed
READER_NAME = "pulsar-lens-key-sampler"

StopReason = Literal["caught-up", "limit", "time", "error"]


class MessageLike(Protocol):
    """What the sampler reads from a message (pulsar-client's `Message` has all of it)."""

    def ordering_key(self) -> str: ...
    def partition_key(self) -> str: ...
    def producer_name(self) -> str: ...
    def publish_timestamp(self) -> int: ...
    def message_id(self) -> Any: ...


class ReaderLike(Protocol):
    def has_message_available(self) -> bool: ...
    def read_next(self, timeout_millis: int | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class TopicSample:
    """What sampling one topic (or one partition) found.

    `read` counts the messages read inside the window, `unresolved` those among them whose
    sticky key this client cannot see (see `resolve_message_key`); only the others have a
    record. `stopped` says why reading ended.
    """

    topic: str
    records: tuple[KeySampleRecord, ...] = ()
    read: int = 0
    unresolved: int = 0
    stopped: StopReason = "caught-up"
    error: str | None = None


def resolve_message_key(message: MessageLike) -> bytes | None:
    """The sticky key a 4.0 broker hashes for this message, or None when it is not visible.

    The broker's order (`Commands.peekStickyKey`): ordering key, else partition key, else
    `producer_name + "-" + sequence_id`, else `NONE_KEY`. What pulsar-client 3.13 shows of it:

    * `ordering_key()` and `partition_key()` return "" when the field is absent, so an empty
      key cannot be told from no key: both count as absent.
    * the partition key's base64 flag (a Java producer's `keyBytes(...)`) is not exposed: such
      a key is read, and hashed, as its base64 text, while the broker hashes the decoded bytes.
    * a key-less message's sequence id is not exposed, so its 4.0 fallback key cannot be
      built: the message is unresolved (None) rather than given a made-up hash. A message
      object that does offer `sequence_id()` gets the fallback key.
    * a key that is not valid UTF-8 cannot be read through the client (it raises): unresolved.
    """
    try:
        ordering = message.ordering_key()
        if ordering:
            return ordering.encode("utf-8")
        partition = message.partition_key()
        if partition:
            return resolve_sticky_key(partition_key=partition)
        sequence = _sequence_id(message)
        producer = message.producer_name()
    except UnicodeDecodeError:
        return None
    if sequence is None or not producer:
        return None
    return resolve_sticky_key(producer_name=producer, sequence_id=sequence)


def _sequence_id(message: Any) -> int | None:
    getter = getattr(message, "sequence_id", None)
    if not callable(getter):
        return None
    value = getter()
    return int(value) if value is not None and int(value) >= 0 else None


def to_record(topic: str, message: MessageLike) -> KeySampleRecord | None:
    """The sample of one message, or None when its sticky key is not visible."""
    key = resolve_message_key(message)
    if key is None:
        return None
    published = message.publish_timestamp()
    return KeySampleRecord(
        topic=topic,
        key=key.decode("utf-8"),
        sticky_hash=sticky_key_hash(key),
        publish_time=_from_ms(published) if published > 0 else None,
    )


def _from_ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def read_window(
    reader: ReaderLike,
    topic: str,
    *,
    since_ms: int,
    limit: int,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    timeout_error: type[BaseException] = TimeoutError,
    reconnecting: tuple[type[BaseException], ...] = (),
    pause: Callable[[float], None] = time.sleep,
) -> TopicSample:
    """Read from a positioned reader until caught up, `limit` messages in the window were
    read, or the `clock` passes `deadline`; messages published before `since_ms` are skipped.

    Every iteration reads one message or ends the loop; at most `limit` messages are kept and
    at most `limit` skipped, so the loop is bounded by both count and time. `timeout_error` is
    what `read_next` raises when nothing came in time (pulsar.Timeout). `reconnecting` are the
    errors of asking while the reader reconnects: a seek makes the broker drop the reader's
    consumer, and an ask for the last message id that reaches the broker before the consumer
    is back fails ("Consumer not found"). Those asks are repeated, `RECONNECT_PAUSE` apart, at
    most `RECONNECT_ASKS` times and never past the deadline.
    """
    records: list[KeySampleRecord] = []
    seen: set[str] = set()
    read = unresolved = skipped = failed_asks = 0
    stopped: StopReason = "caught-up"
    while True:
        if read >= limit or skipped >= limit:
            stopped = "limit"
            break
        left = deadline - clock()
        if left <= 0:
            stopped = "time"
            break
        try:
            available = reader.has_message_available()
        except reconnecting:
            failed_asks += 1
            if failed_asks >= RECONNECT_ASKS:
                raise
            pause(min(RECONNECT_PAUSE, left))
            continue
        if not available:
            break
        try:
            message = reader.read_next(max(1, int(min(left, READ_WAIT) * 1000)))
        except timeout_error:
            continue  # the deadline check above ends the loop
        ident = str(message.message_id())
        if ident in seen or message.publish_timestamp() < since_ms:
            skipped += 1  # a redelivery after the seek, or older than the window
            continue
        seen.add(ident)
        read += 1
        record = to_record(topic, message)
        if record is None:
            unresolved += 1
        else:
            records.append(record)
    return TopicSample(topic, tuple(records), read, unresolved, stopped)


def open_client(
    service_url: str,
    *,
    token: Secret | None,
    timeout: float,
    connection: ClusterSettings | None = None,
) -> Any:
    """A pulsar.Client for sampling: token auth when given, else the OAuth2 or client
    certificate of `connection` (and its CA), timeouts bounded by `timeout`."""
    import pulsar

    options: dict[str, Any] = {
        "operation_timeout_seconds": max(1, math.ceil(timeout)),
        "connection_timeout_ms": max(1000, min(int(timeout * 1000), 10_000)),
    }
    if connection is not None:  # OAuth2, client certificate, CA of the cluster
        options |= client_options(connection)
    if token is not None:
        options["authentication"] = pulsar.AuthenticationToken(token.reveal())
    return pulsar_client(service_url, **options)


def collect_key_samples(
    service_url: str,
    topics: Iterable[str],
    *,
    per_topic: int = DEFAULT_PER_TOPIC,
    window: dt.timedelta = DEFAULT_WINDOW,
    timeout: float = DEFAULT_TIMEOUT,
    token: Secret | None = None,
    connection: ClusterSettings | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    clock: Callable[[], float] = time.monotonic,
) -> list[TopicSample]:
    """Sample the keys of the messages published in the last `window` of each topic.

    Uses a Reader per topic: a non-durable subscription that the broker drops when the reader
    closes, so sampling creates no durable subscription and moves no cursor of anyone. Each
    reader seeks to `now - window` by publish time, so on a busy topic the sample is the first
    `per_topic` messages of the window. A partitioned topic is read partition by partition
    (one `TopicSample` each): the sticky hash does not depend on the partition. At most
    `per_topic` messages are read per partition; the whole call spends at most about
    `timeout` seconds, shared fairly by the topics still to read. A topic that fails (not
    found, not authorized, timeout) gets a sample with `error` and the others go on.
    """
    deadline = clock() + timeout
    since_ms = int((now() - window).timestamp() * 1000)
    client = open_client(service_url, token=token, timeout=timeout, connection=connection)
    try:
        names = _partitions(client, list(topics), deadline, clock)
        samples: list[TopicSample] = []
        for i, name in enumerate(names):
            left = deadline - clock()
            if left <= 0:
                samples.extend(TopicSample(n, stopped="time") for n in names[i:])
                break
            share = clock() + left / (len(names) - i)
            samples.append(_sample_one(client, name, since_ms, per_topic, share, clock))
        return samples
    finally:
        client.close()


def _partitions(
    client: Any, topics: Sequence[str], deadline: float, clock: Callable[[], float]
) -> list[str]:
    import pulsar

    names: list[str] = []
    for topic in topics:
        if clock() >= deadline:
            names.append(topic)
            continue
        try:
            names.extend(client.get_topic_partitions(topic))
        except pulsar.PulsarException as exc:
            log.warning("could not list the partitions of %s: %s", topic, exc)
            names.append(topic)
    return list(dict.fromkeys(names))


def _sample_one(
    client: Any,
    topic: str,
    since_ms: int,
    limit: int,
    deadline: float,
    clock: Callable[[], float],
) -> TopicSample:
    import pulsar

    reader = None
    try:
        reader = client.create_reader(
            topic,
            pulsar.MessageId.earliest,
            receiver_queue_size=max(1, min(limit, 1000)),
            reader_name=READER_NAME,
        )
        if since_ms > 0:
            reader.seek(since_ms)
        return read_window(
            reader,
            topic,
            since_ms=since_ms,
            limit=limit,
            deadline=deadline,
            clock=clock,
            timeout_error=pulsar.Timeout,
            reconnecting=(pulsar.BrokerMetadataError, pulsar.NotConnected),
        )
    except pulsar.PulsarException as exc:
        log.warning("could not sample the keys of %s: %s", topic, exc)
        return TopicSample(topic, stopped="error", error=f"{type(exc).__name__}: {exc}"[:300])
    finally:
        if reader is not None:
            _close(reader, topic)


def _close(reader: Any, topic: str) -> None:
    import pulsar

    try:
        reader.close()
    except pulsar.PulsarException as exc:
        log.warning("closing the key sampler's reader of %s failed: %s", topic, exc)


def sample_keys(
    service_url: str,
    topics: Iterable[str],
    *,
    per_topic: int = DEFAULT_PER_TOPIC,
    window: dt.timedelta = DEFAULT_WINDOW,
    timeout: float = DEFAULT_TIMEOUT,
    token: Secret | None = None,
    connection: ClusterSettings | None = None,
) -> list[KeySampleRecord]:
    """The key samples of `collect_key_samples` (same arguments), one record per message.

    Reads with a non-durable Reader: no durable subscription is created, no cursor moves.
    Messages whose sticky key this client cannot see are left out (see
    `resolve_message_key`); a failing topic is logged and contributes nothing.
    """
    samples = collect_key_samples(
        service_url,
        topics,
        per_topic=per_topic,
        window=window,
        timeout=timeout,
        token=token,
        connection=connection,
    )
    return [record for sample in samples for record in sample.records]
