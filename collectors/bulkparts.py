"""Each broker's bulk answer built into the tables of a snapshot on its own, in a worker
process when the poll has a pool (`PartPool`).

The `broker-stats/topics` answers are most of a poll's work: at 100,000 topics some 173 MB of
JSON decoded, 400,000 rows made and turned into Arrow columns, one interpreted call after
another under one lock. Each broker's answer is independent of the others', so a worker
process decodes it, parses it and builds its topics' rows (`part_of_answer`), as tuples
of the records' fields turned into columns, never as records; the poll gets
back a `BrokerPart`, Arrow tables and what the parsers noted, and lets go of the answer's
Python objects with the worker's memory. The assembly (`collectors.assemble`) then places
the topics (bundle, owner), drops what another broker or a per-topic call answers for, and
sorts the rows, column-wise.

A part holds every topic of its answer in name order (the first of a name given twice), but
those of namespaces the poll did not ask for. What its parsers refused, cut or found out of
range is kept per topic (`Noted`), so the snapshot counts it for the rows it keeps, in the
order a one-process assembly would: a poll's rows, ids and errors are the same either way.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import logging
import multiprocessing
import multiprocessing.queues
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.answers import collection_paused
from pulsar_lens.collectors.fields import WarningLines, field_warning_lines, reading
from pulsar_lens.collectors.notes import Notes, noting
from pulsar_lens.collectors.topics import TopicStats
from pulsar_lens.collectors.typedrecords import (
    Row,
    backlog_of,
    needs_details,
    parse_bulk,
    subscription_rows,
    subscriptions_of,
    topic_of,
    topic_row,
)
from pulsar_lens.collectors.typedstats import TypedBulk, decode_broker_stats
from pulsar_lens.core.childstart import starting_child
from pulsar_lens.core.cpus import usable_cpus
from pulsar_lens.core.errors import AdminApiError, CollectorError
from pulsar_lens.core.model import rows_content_table
from pulsar_lens.core.topicname import TopicName, parse_topic_name

log = logging.getLogger(__name__)

PART_TABLES = ("topics", "subscriptions", "consumers", "draining_hashes")
INDEX_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("bundle", pa.string()),  # as the answer files the topic
        pa.field("needs_details", pa.bool_(), nullable=False),  # `needs_details` of its stats
        pa.field("backlog", pa.int64(), nullable=False),  # its largest subscription backlog
    ]
)
"""One row per topic of a part, in the order of its rows in `topics`."""
POOL_MIN_BYTES = 4 * 1024 * 1024
"""Answers smaller than this (some 2,500 topics) are built in the poll's own process."""
MAX_WORKERS = 4
"""Workers at most, whatever the CPUs: each holds the answer it builds while it builds it
(some 500 MiB for 33,000 topics)."""


def default_workers(cpus: float) -> int:
    """One more worker than the CPUs (from two): the answers in flight share the cores, so
    the poll's last one is not built alone on one core while the other waits. At 100,000
    topics on two cores (three brokers) the answers took 0.3 s less with three workers than
    with two."""
    whole = int(cpus)
    return min(MAX_WORKERS, whole + 1 if whole >= 2 else 1)


@dataclass(frozen=True)
class Noted:
    """What making one topic's record, or its subscriptions, noted: refusals and cuts, and
    out-of-range fields. A part keeps them per topic, so the assembly counts those of the
    rows it keeps, where it keeps them: a topic another broker files or whose per-topic stats
    were read noted nothing, as before parts. They are made once more on their own for the
    few topics that note anything, so the others cost a counter's read."""

    notes: Notes
    warnings: WarningLines

    @staticmethod
    def of(make: Callable[[], object], topic: str) -> Noted:
        notes = Notes()
        with field_warning_lines(notes) as warnings, reading(topic):
            make()
        return Noted(notes, warnings)


@dataclass(frozen=True)
class BrokerPart:
    """What one broker's bulk answer holds, as tables: `index` and `tables["topics"]` one row
    per topic (by name), the other tables the rows of those topics in the same order.
    `notes`: what parsing the answer noted; `noted`: what making each topic's rows noted, by
    topic, (record, subscriptions), for the topics that noted anything."""

    broker: str
    index: pa.Table
    tables: Mapping[str, pa.Table]
    notes: Notes = field(default_factory=Notes)
    noted: Mapping[str, tuple[Noted | None, Noted | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class NotAnObject:
    """An answer that is JSON but not an object: `shown` is its repr, as the error says it."""

    shown: str


IndexSink = Callable[[pa.Table], None]
"""Told a part's `index` as soon as it is made, before its rows are: the poll chooses its
per-topic calls from every broker's index while the workers still build the rows."""


class PartBuilder(Protocol):
    """`part_of_answer`, in this process or a pool's (`PartPool.build`)."""

    def __call__(
        self,
        body: bytes,
        broker: str,
        namespaces: frozenset[str] | None,
        early: IndexSink | None = None,
        /,
    ) -> BrokerPart | NotAnObject: ...


def part_of_answer(
    body: bytes,
    broker: str,
    namespaces: frozenset[str] | None,
    early: IndexSink | None = None,
    /,
) -> BrokerPart | NotAnObject:
    """The part of a broker's answer body (ValueError when it is not JSON); `namespaces`,
    when given, are those polled: topics of others are left out. `early` is told the part's
    index once it is made."""
    with collection_paused():  # see part_of_payload: from the decoding on
        return part_of_payload(decode_broker_stats(body), broker, namespaces, early)


def part_of_payload(
    payload: Any,
    broker: str,
    namespaces: frozenset[str] | None,
    early: IndexSink | None = None,
) -> BrokerPart | NotAnObject:
    """`part_of_answer` of an answer decoded already; its objects are let go once parsed."""
    if not isinstance(payload, (dict, TypedBulk)):  # null too: it tells nothing
        return NotAnObject(repr(payload))
    notes = Notes()
    # the collector held off until the answer's objects are gone: each of its passes would
    # walk all of them (some 15% of a part's CPU), and once they are freed there is nothing
    # left for it to find
    with collection_paused():
        with noting(notes):
            entries = parse_bulk(payload, broker)
        del payload
        part = part_of_entries(entries, broker, namespaces, notes, early=early)
        del entries
    return part


def part_of_entries(
    entries: Sequence[TopicStats],
    broker: str,
    namespaces: frozenset[str] | None,
    notes: Notes | None = None,
    *,
    early: IndexSink | None = None,
) -> BrokerPart:
    """The part of a broker's answer already parsed into `entries` (in the answer's order);
    `notes`, what parsing it noted; `early`, told the index before the rows are made."""
    kept = _kept(entries, namespaces)
    # what these readings find is noted where the rows are made, not here (nor was it
    # when the poll chose its per-topic calls from the entries)
    with field_warning_lines(Notes()):
        index = {
            "topic": [e.topic for e, _ in kept],
            "namespace": [n.namespace for _, n in kept],
            "bundle": [e.bundle for e, _ in kept],
            "needs_details": [needs_details(e.stats) for e, _ in kept],
            "backlog": [backlog_of(e.stats) for e, _ in kept],
        }
    table = pa.table(index, schema=INDEX_SCHEMA)
    if early is not None:
        early(table)
    rows: dict[str, list[Row]] = {name: [] for name in PART_TABLES}
    noted: dict[str, tuple[Noted | None, Noted | None]] = {}
    watch = Notes()  # only tells whether a topic noted anything: see `Noted`
    with field_warning_lines(watch) as lines, collection_paused():
        # rows as tuples, never records: each is a column's cell once the part is built
        for entry, name in kept:
            before = (watch.total, lines.total)
            topic = topic_row(name, entry.stats, bundle=entry.bundle, owner=entry.broker)
            between = (watch.total, lines.total)
            found = subscription_rows(entry.topic, entry.stats)
            if between != before or (watch.total, lines.total) != between:
                noted[entry.topic] = _noted_again(entry, name, before, between, watch, lines)
            rows["topics"].append(topic)
            rows["subscriptions"].extend(found.subscriptions)
            rows["consumers"].extend(found.consumers)
            rows["draining_hashes"].extend(found.draining_hashes)
        tables = {name: rows_content_table(name, table) for name, table in rows.items()}
        del rows, kept  # before the collector runs again, so that it never walks them
    return BrokerPart(
        broker,
        table,
        tables,
        notes=Notes() if notes is None else notes,
        noted=noted,
    )


def _noted_again(
    entry: TopicStats,
    name: TopicName,
    before: tuple[int, int],
    between: tuple[int, int],
    watch: Notes,
    lines: WarningLines,
) -> tuple[Noted | None, Noted | None]:
    """What a topic's record and its subscriptions noted, each made again on its own."""
    topic = subscriptions = None
    if between != before:
        topic = Noted.of(
            lambda: topic_of(name, entry.stats, bundle=entry.bundle, owner=entry.broker),
            entry.topic,
        )
    if (watch.total, lines.total) != between:
        subscriptions = Noted.of(lambda: subscriptions_of(entry.topic, entry.stats), entry.topic)
    return topic, subscriptions


def _kept(entries: Sequence[TopicStats], namespaces: frozenset[str] | None) -> list[Any]:
    """(entry, parsed name) of the topics a part holds, by name; a name given twice keeps
    its first entry, as `assemble.bulk_by_topic` does across brokers."""
    seen: set[str] = set()
    kept = []
    for entry in sorted(entries, key=lambda e: e.topic):
        if entry.topic in seen:
            continue
        seen.add(entry.topic)
        name = parse_topic_name(entry.topic)  # the parsers refused the names that do not parse
        if namespaces is None or name.namespace in namespaces:
            kept.append((entry, name))
    return kept


@dataclass(frozen=True)
class PartDecoder:
    """How `collect_broker_part` reads a broker's answer: its body built by `build` (in a
    worker process when that is a `PartPool`'s); `payload` builds an answer decoded already
    (a recorded one) in this process."""

    build: PartBuilder
    broker: str
    namespaces: frozenset[str] | None
    early: IndexSink | None = None

    def __call__(self, body: bytes) -> BrokerPart | NotAnObject:
        return self.build(body, self.broker, self.namespaces, self.early)

    def payload(self, decoded: Any) -> BrokerPart | NotAnObject:
        return part_of_payload(decoded, self.broker, self.namespaces, self.early)


def collect_broker_part(
    client: AdminClient,
    web_url: str,
    broker: str,
    namespaces: frozenset[str] | None,
    *,
    timeout: float,
    build: PartBuilder = part_of_answer,
    early: IndexSink | None = None,
) -> BrokerPart:
    """GET /admin/v2/broker-stats/topics of the broker at `web_url`, built into its part by
    `build` (`early` told its index first). Answer:
    {namespace: {bundle: {"persistent"|"non-persistent": {topic: stats}}}}; anything but an
    object is an error (null too: no broker answers it, and it tells nothing)."""
    path = "/admin/v2/broker-stats/topics"
    decode = PartDecoder(build, broker, namespaces, early)
    part = client.get_json(path, base_url=web_url, timeout=timeout, decode=decode)
    if not isinstance(part, BrokerPart):
        shown = part.shown if isinstance(part, NotAnObject) else repr(part)
        raise AdminApiError("GET", path, None, shown, "expected a JSON object")
    return part


# --- the pool --------------------------------------------------------------------------------


class PartPool:
    """Worker processes that build the parts of a poll's bulk answers, one answer each.

    Started fresh (`spawn`: the collect process runs threads, which a fork would copy
    mid-lock) by `starting_child` (no `__main__` of ours run again, no credential in their
    environment), and kept for the next polls. A worker that dies fails the parts it was
    building (said among the poll's errors) and the pool starts again at the next answer.

    A part's index comes back ahead of its rows (`build`'s `early`), through a queue the
    workers are given when they start; a thread here hands each index to its sink. Should
    that queue break (a worker killed while writing to it), the indexes stop coming early
    and the poll reads them from the parts, as it would without them."""

    def __init__(self, workers: int | None = None, *, min_bytes: int = POOL_MIN_BYTES) -> None:
        self.workers = max(1, workers if workers is not None else default_workers(usable_cpus()))
        self.min_bytes = min_bytes
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        self._indexes: multiprocessing.queues.Queue[Any] | None = None
        self._sinks: dict[int, IndexSink] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._delivering: threading.Thread | None = None

    def _pool(self) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                context = multiprocessing.get_context("spawn")
                indexes: multiprocessing.queues.Queue[Any] = context.Queue()
                self._executor = concurrent.futures.ProcessPoolExecutor(
                    self.workers,
                    mp_context=context,
                    initializer=_worker_started,
                    initargs=(indexes,),
                )
                self._indexes = indexes
                self._delivering = threading.Thread(
                    target=self._deliver, args=(indexes,), name="part-indexes", daemon=True
                )
                self._delivering.start()
            return self._executor

    def _deliver(self, indexes: multiprocessing.queues.Queue[Any]) -> None:
        """Hand each index a worker sent to the sink of its part, until told to stop (None)
        or the queue cannot be read (the parts then bring their indexes)."""
        while True:
            try:
                message = indexes.get()
            except Exception as exc:  # a worker died mid-message: the rest cannot be read
                log.warning("the part workers' early indexes stopped: %r", exc)
                return
            if message is None:
                indexes.close()
                return
            token, index = message
            with self._lock:
                sink = self._sinks.pop(token, None)
            if sink is not None:
                try:
                    sink(index)
                except Exception:  # a sink is ours: its bug must not end the delivery
                    log.exception("an early part index could not be handed on")

    @staticmethod
    def _submit(
        pool: concurrent.futures.ProcessPoolExecutor, fn: Callable[..., Any], *args: Any
    ) -> concurrent.futures.Future[Any]:
        """`pool.submit`, which starts a worker when none is idle: without our `__main__`
        and without credentials (`starting_child`)."""
        with starting_child():
            return pool.submit(fn, *args)

    def build(
        self,
        body: bytes,
        broker: str,
        namespaces: frozenset[str] | None,
        early: IndexSink | None = None,
        /,
    ) -> BrokerPart | NotAnObject:
        """`part_of_answer` in a worker (ValueError when the body is not JSON); a body under
        `min_bytes` in this process, which costs less than sending it. `early` is told the
        index when it arrives ahead of the part, from another thread, or not at all."""
        if len(body) < self.min_bytes:
            return part_of_answer(body, broker, namespaces, early)
        pool = self._pool()
        token = None
        if early is not None:
            token = next(self._tokens)
            with self._lock:
                self._sinks[token] = early
        try:
            found: BrokerPart | NotAnObject
            found = self._submit(pool, _part_in_worker, body, broker, namespaces, token).result()
            return found
        except BrokenProcessPool as exc:
            self._discard(pool)
            raise CollectorError(
                f"the broker-stats answer of {broker} could not be read: its worker process "
                "ended (out of memory?)"
            ) from exc
        finally:
            if token is not None:
                with self._lock:
                    self._sinks.pop(token, None)

    def _discard(self, pool: concurrent.futures.ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is not pool:
                return
            self._executor, indexes, self._indexes = None, self._indexes, None
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_delivery(indexes)

    def close(self, timeout: float = 10.0) -> None:
        """Shut the workers down, then wait (at most `timeout` s) for the delivering thread to
        read the end of its queue: a process that exits right after would otherwise close
        the queue under the thread's read, which then said the indexes stopped."""
        with self._lock:
            pool, self._executor = self._executor, None
            indexes, self._indexes = self._indexes, None
            delivering, self._delivering = self._delivering, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        _stop_delivery(indexes)
        if delivering is not None:
            delivering.join(timeout)


def _stop_delivery(indexes: multiprocessing.queues.Queue[Any] | None) -> None:
    """Tell a pool's delivering thread to end (and close the queue), once the pool is shut
    down: closed here, the thread's read would fail under it."""
    if indexes is not None:
        indexes.put(None)


_INDEXES: multiprocessing.queues.Queue[Any] | None = None
"""In a worker: where its parts' indexes go ahead of the parts (`PartPool._deliver`)."""


def _worker_started(indexes: multiprocessing.queues.Queue[Any]) -> None:
    global _INDEXES
    indexes.cancel_join_thread()  # an index not sent yet never holds up the worker's exit
    _INDEXES = indexes


def _part_in_worker(
    body: bytes, broker: str, namespaces: frozenset[str] | None, token: int | None = None
) -> BrokerPart | NotAnObject:
    """`part_of_answer` (its index sent ahead when `token` names a sink), then the memory its
    decoded answer and rows took given back to the system: a worker kept between polls would
    otherwise hold its largest answer's worth (the C allocator keeps what Python frees,
    Arrow's pool what the tables did not keep)."""
    queue = _INDEXES
    early = None
    if token is not None and queue is not None:

        def early(index: pa.Table) -> None:
            queue.put((token, index))

    try:
        return part_of_answer(body, broker, namespaces, early)
    finally:
        pa.default_memory_pool().release_unused()
        _trim()


def _trim() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to call
        return
    libc.malloc_trim(0)
