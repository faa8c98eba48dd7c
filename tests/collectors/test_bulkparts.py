"""Each broker's bulk answer built into its part in a worker process (`PartPool`) is the part
built in the poll's own process, and a poll with the pool stores the same snapshot: over
HTTP, from the synthetic cluster's brokers, tables compared as the store builds them and
errors line by line. A worker that dies fails that answer's call, said among the errors,
and the next poll gets a fresh pool; a body that is not JSON, or JSON but not an object,
fails it as it always did."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pytest

from benchmarks.synth_server import CLUSTER, SynthCluster, handler_for
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.bulkparts import (
    BrokerPart,
    IndexSink,
    NotAnObject,
    PartBuilder,
    PartPool,
    _part_in_worker,
    default_workers,
    part_of_answer,
)
from pulsar_lens.collectors.fields import MAX_WARNINGS, WarningLines, field_warning_lines, warn
from pulsar_lens.collectors.notes import Notes, refuse
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.sampling import choose_topics
from pulsar_lens.core.errors import CollectorError
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.tablerows import TableRows
from tests.collectors.test_decode_paths import assert_same_snapshots

BROKERS = 3
AT = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def pool() -> Iterator[PartPool]:
    parts = PartPool(2, min_bytes=0)  # every answer to a worker, however small
    yield parts
    parts.close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[SynthCluster, str]]:
    """The scale harness's synthetic cluster, each broker on its own loopback port."""
    servers = [
        ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) for _ in range(BROKERS)
    ]
    ids = [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    synth = SynthCluster(1_500, ids, change=0.1, seed=11)
    synth.index  # noqa: B018 -- built before any poll asks
    for server, broker in zip(servers, ids, strict=True):
        server.RequestHandlerClass = handler_for(synth, lambda b=broker: b)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    synth.render_next()
    try:
        yield synth, f"http://{ids[0]}"
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def same_parts(a: BrokerPart, b: BrokerPart) -> None:
    assert a.broker == b.broker
    assert a.index.equals(b.index)
    assert a.tables.keys() == b.tables.keys()
    for name, table in a.tables.items():
        assert table.equals(b.tables[name]), name
    assert a.notes.lines() == b.notes.lines()
    assert a.noted == b.noted


def is_same_part(a: BrokerPart, b: BrokerPart) -> bool:
    """`same_parts` as a yes or no, for a child process or a benchmark that reports it."""
    try:
        same_parts(a, b)
    except AssertionError:
        return False
    return True


def assert_builds_the_parts_built_here(build: PartBuilder, synth: SynthCluster) -> None:
    """`build` gives every answer of the cluster's current poll the part this process
    builds, with every namespace polled and with three."""
    for broker, body in synth.current.bulk.items():
        for polled in (None, frozenset(synth.namespaces[:3])):
            there, here = build(body, broker, polled), part_of_answer(body, broker, polled)
            assert isinstance(there, BrokerPart) and isinstance(here, BrokerPart)
            same_parts(there, here)
            assert there.tables["consumers"].num_rows > 0
            namespaces = set(there.index.column("namespace").to_pylist())
            assert namespaces <= (polled or namespaces) and namespaces


def assert_polls_store_the_same(build: PartBuilder, synth: SynthCluster, url: str) -> None:
    """Two polls over HTTP, each made with `build` and without it, store the same."""
    for _ in range(2):  # two generations: topics, consumers and a bundle's owner move
        # the cluster named, so no call moves the server on to its next generation meanwhile
        with AdminClient(url) as client:
            alone = poll(client, concurrency=4, cluster=CLUSTER)
        with AdminClient(url) as client:
            built = poll(client, concurrency=4, cluster=CLUSTER, build=build)
        assert isinstance(built.consumers, TableRows)
        assert len(built.topics) == len(synth.names)
        assert_same_snapshots(alone, built)
        synth.start_of_poll()


def test_a_worker_builds_the_part_this_process_builds(
    pool: PartPool, cluster: tuple[SynthCluster, str]
) -> None:
    assert_builds_the_parts_built_here(pool.build, cluster[0])


def test_a_poll_with_the_pool_stores_what_a_poll_without_it_does(
    pool: PartPool, cluster: tuple[SynthCluster, str]
) -> None:
    assert_polls_store_the_same(pool.build, *cluster)


def test_a_part_tells_its_index_before_it_makes_its_rows(
    cluster: tuple[SynthCluster, str],
) -> None:
    synth, _ = cluster
    broker, body = next(iter(synth.current.bulk.items()))
    told: list[pa.Table] = []
    part = part_of_answer(body, broker, None, told.append)
    assert isinstance(part, BrokerPart) and len(told) == 1 and told[0].equals(part.index)


def test_a_worker_sends_the_index_ahead_through_the_pools_queue(
    cluster: tuple[SynthCluster, str],
) -> None:
    """The worker's index reaches the sink registered for its token, on the pool's
    delivering thread, and equals the part's own."""
    synth, _ = cluster
    broker, body = next(iter(synth.current.bulk.items()))
    parts = PartPool(1, min_bytes=0)
    arrived = threading.Event()
    told: list[pa.Table] = []
    try:
        executor = parts._pool()
        parts._sinks[7] = lambda index: (told.append(index), arrived.set())
        part = parts._submit(executor, _part_in_worker, body, broker, None, 7).result()
        assert arrived.wait(60), "the index never came through the queue"
        assert isinstance(part, BrokerPart) and told[0].equals(part.index)
    finally:
        parts.close()
    assert not parts._sinks


def test_the_per_topic_calls_start_before_the_parts_rows_are_built(
    cluster: tuple[SynthCluster, str],
) -> None:
    """A part whose rows are held back until the poll's first per-topic call was answered:
    that call comes from its index, so the poll completes (it would wait the minute out and
    fail if the details round waited for the parts), with the snapshot a plain poll stores."""
    synth, url = cluster
    served = synth.served.requests
    start = served.get("topic_stats", 0)
    held: list[bool] = []

    def held_back(
        body: bytes, broker: str, namespaces: frozenset[str] | None, early: IndexSink | None = None
    ) -> BrokerPart | NotAnObject:
        part = part_of_answer(body, broker, namespaces, early)
        deadline = time.monotonic() + 60
        while served.get("topic_stats", 0) == start and time.monotonic() < deadline:
            time.sleep(0.01)
        held.append(served.get("topic_stats", 0) > start)
        return part

    with AdminClient(url) as client:
        early = poll(client, concurrency=4, cluster=CLUSTER, build=held_back)
    with AdminClient(url) as client:
        plain = poll(client, concurrency=4, cluster=CLUSTER)
    assert held == [True] * BROKERS
    assert_same_snapshots(plain, early)


def test_a_builder_that_never_tells_the_index_early_polls_the_same(
    cluster: tuple[SynthCluster, str],
) -> None:
    """The indexes come from the parts then (a pool whose queue broke, a builder of a
    plugin's tests)."""
    _, url = cluster

    def silent(
        body: bytes, broker: str, namespaces: frozenset[str] | None, early: IndexSink | None = None
    ) -> BrokerPart | NotAnObject:
        return part_of_answer(body, broker, namespaces)

    with AdminClient(url) as client:
        late = poll(client, concurrency=4, cluster=CLUSTER, build=silent)
    with AdminClient(url) as client:
        plain = poll(client, concurrency=4, cluster=CLUSTER)
    assert late.errors == plain.errors
    assert_same_snapshots(plain, late)


def test_a_body_not_json_or_not_an_object_fails_as_before(pool: PartPool) -> None:
    with pytest.raises(ValueError):
        pool.build(b"<html>not json</html>", "b:8080", None)
    assert pool.build(b"[1, 2]", "b:8080", None) == NotAnObject("[1, 2]")
    assert part_of_answer(b"null", "b:8080", None) == NotAnObject("None")
    empty = pool.build(b"{}", "b:8080", None)
    assert isinstance(empty, BrokerPart) and empty.index.num_rows == 0


def test_a_worker_that_dies_fails_its_answer_and_the_pool_starts_again() -> None:
    parts = PartPool(1, min_bytes=0)
    try:
        executor = parts._pool()
        with pytest.raises(Exception):  # noqa: B017 -- the worker is gone, whatever it says
            parts._submit(executor, os._exit, 9).result()
        with pytest.raises(CollectorError, match="worker process ended"):
            parts.build(b"{}", "b:8080", None)
        part = parts.build(b"{}", "b:8080", None)
        assert isinstance(part, BrokerPart) and parts._executor is not executor
    finally:
        parts.close()


def test_small_answers_stay_in_this_process() -> None:
    parts = PartPool(1)  # the default floor: nothing this small is sent
    try:
        assert isinstance(parts.build(b"{}", "b:8080", None), BrokerPart)
        assert parts._executor is None
    finally:
        parts.close()


def test_table_rows_read_as_the_records_they_hold(cluster: tuple[SynthCluster, str]) -> None:
    synth, _ = cluster
    broker, body = next(iter(synth.current.bulk.items()))
    part = part_of_answer(body, broker, None)
    assert isinstance(part, BrokerPart)
    rows = TableRows("consumers", part.tables["consumers"])
    records = rows.records()
    assert len(rows) == len(records) > 0 and rows and rows == records and records == rows
    assert rows[0] == records[0] and rows[-2:] == records[-2:] and list(rows) == list(records)
    again = TableRows("consumers", pa.concat_tables([rows.table.slice(0, 5), rows.table.slice(5)]))
    assert again == rows and not TableRows("consumers", rows.table.slice(0, 0))
    with pytest.raises(ValueError, match="columns of its records"):
        TableRows("topics", rows.table)


def test_notes_and_warnings_noted_apart_merge_as_if_noted_in_one_block() -> None:
    """A part's per-topic notes, merged in order, read as the same items noted one after the
    other: counts, the first examples, the kinds past the limit, the warnings past theirs."""
    items = [(f"kind {i % 60}", f"item {i}") for i in range(400)]
    texts = [f"field {i} out of range" for i in range(MAX_WARNINGS + 30)]

    def note(chosen: list[tuple[str, str]], said: list[str]) -> None:
        for what, name in chosen:
            refuse(what, "is wrong; left out", name)
        for text in said:
            warn(text)

    one = Notes()
    with field_warning_lines(one) as lines:
        note(items, texts)
    merged, merged_lines = Notes(), WarningLines()
    for start in range(0, 400, 37):
        part = Notes()
        with field_warning_lines(part) as some:
            note(items[start : start + 37], texts[start // 4 : (start + 37) // 4])
        merged.merge(part)
        merged_lines.add(some)
    assert merged.lines() == one.lines() and merged.total == one.total == 400
    assert merged.other_kinds == one.other_kinds > 0
    assert merged_lines.lines() == lines.lines()
    assert merged_lines.extra == lines.extra > 0


def test_key_sampling_chooses_the_same_topics_from_rows_held_as_tables(
    cluster: tuple[SynthCluster, str],
) -> None:
    synth, _ = cluster
    broker, body = next(iter(synth.current.bulk.items()))
    part = part_of_answer(body, broker, None)
    assert isinstance(part, BrokerPart)
    held = {n: TableRows(n, part.tables[n]) for n in ("topics", "subscriptions")}
    tables = Snapshot("c", AT, **held)  # type: ignore[arg-type]
    records = Snapshot("c", AT, **{n: rows.records() for n, rows in held.items()})
    patterns = (None, "persistent://*/ns-1*", "*-partition-1*", "tenant-*/ns-2/*", "*/events-0")
    for pattern in patterns:
        chosen = choose_topics(tables, pattern=pattern, limit=50, offset=7)
        assert chosen == choose_topics(records, pattern=pattern, limit=50, offset=7)
    assert choose_topics(tables, limit=50)


def environment() -> dict[str, str]:
    return dict(os.environ)


def test_workers_start_whatever_runs_as_main_and_see_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test run or an app may have a script of its own as `__main__`, which a spawned
    child would run again (and here die of); a token in the environment stays out."""
    script = tmp_path / "main.py"
    script.write_text("raise SystemExit('the main script ran again in a worker')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "token-that-stays-out")
    parts = PartPool(1, min_bytes=0)
    try:
        assert isinstance(parts.build(b"{}", "b:8080", None), BrokerPart)
        seen = parts._submit(parts._pool(), environment).result()
        assert "PULSAR_ADMIN_TOKEN" not in seen and "token-that-stays-out" not in str(seen)
        assert sys.modules["__main__"] is main
    finally:
        parts.close()


@pytest.mark.parametrize(("cpus", "workers"), [(0.5, 1), (1, 1), (1.5, 1), (2, 3), (3, 4), (64, 4)])
def test_one_worker_more_than_the_cpus_from_two_up_to_the_cap(cpus: float, workers: int) -> None:
    assert default_workers(cpus) == workers


def test_a_closed_pool_ends_its_delivering_thread_quietly(
    cluster: tuple[SynthCluster, str], caplog: pytest.LogCaptureFixture
) -> None:
    synth, _ = cluster
    broker, body = next(iter(synth.current.bulk.items()))
    for _ in range(3):  # its read failed under a queue closed too early, now and then
        before = set(threading.enumerate())
        parts = PartPool(1, min_bytes=0)
        parts.build(body, broker, None, lambda index: None)
        delivering = [t for t in set(threading.enumerate()) - before if t.name == "part-indexes"]
        parts.close()
        deadline = time.monotonic() + 30
        while any(t.is_alive() for t in delivering) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(delivering) == 1 and not delivering[0].is_alive()
    assert not [r for r in caplog.records if r.name.endswith("bulkparts")]


EXIT_AFTER_CLOSE = """
import logging
from benchmarks.synth_server import SynthCluster
from pulsar_lens.collectors.bulkparts import PartPool

logging.basicConfig(level=logging.WARNING)
body = SynthCluster(3000, ["10.0.0.1:8080"], change=0.0, seed=3).current.bulk["10.0.0.1:8080"]
for _ in range(3):
    pool = PartPool(2, min_bytes=0)
    pool.build(body, "10.0.0.1:8080", None)
    pool.close()
print("closed")
"""


def test_a_process_that_exits_right_after_closing_its_pool_says_nothing() -> None:
    """The delivering thread used to be left reading its queue when `close()` returned: a
    process that exited then (a collect process stopping) closed the queue under that read,
    and logged that the early indexes had stopped, at one stop in two."""
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", EXIT_AFTER_CLOSE],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0 and done.stdout.strip() == "closed", done.stderr[-3000:]
        assert "early indexes stopped" not in done.stderr, done.stderr[-3000:]
