"""A poll's bulk answers read on Spark (`plugins.spark.parts`, `PULSAR_LENS_SPARK_PARTS=1`) give
the parts, and so the snapshot, that the collect process builds itself: part for part and
snapshot for snapshot over HTTP on local[2] (tests/spark/test_cluster.py does it on a
standalone master and through Spark Connect). A body that is not JSON, or not an object,
fails as it does without Spark; a job that cannot run is said as the broker's error. (The JVM
a session starts never sees the admin token: tests/spark/test_engine.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.synth_server import SynthCluster
from pulsar_lens.cli.collect_cmd import part_builder
from pulsar_lens.collectors.bulkparts import BrokerPart, NotAnObject, PartPool, part_of_answer
from pulsar_lens.core.errors import CollectorError
from pulsar_lens.core.settings import Settings
from pulsar_lens.plugins.spark.parts import SparkParts
from tests.collectors.test_bulkparts import (
    assert_builds_the_parts_built_here,
    assert_polls_store_the_same,
    cluster,
)

pytestmark = pytest.mark.spark

__all__ = ["cluster"]  # the synthetic cluster's brokers on loopback, a fixture


@pytest.fixture(scope="module")
def parts(spark: Any) -> SparkParts:
    return SparkParts(lambda: spark, min_bytes=0)  # every answer on Spark, however small


def test_the_executors_build_the_part_this_process_builds(
    parts: SparkParts, cluster: tuple[SynthCluster, str]
) -> None:
    assert_builds_the_parts_built_here(parts.build, cluster[0])


def test_a_poll_with_its_answers_read_on_spark_stores_what_a_poll_without_it_does(
    parts: SparkParts, cluster: tuple[SynthCluster, str]
) -> None:
    assert_polls_store_the_same(parts.build, *cluster)


def test_a_body_not_json_or_not_an_object_fails_as_without_spark(parts: SparkParts) -> None:
    with pytest.raises(ValueError) as raised:
        parts.build(b"<html>not json</html>", "b:8080", None)
    with pytest.raises(ValueError) as here:
        part_of_answer(b"<html>not json</html>", "b:8080", None)
    assert str(raised.value) == str(here.value)
    assert parts.build(b"[1, 2]", "b:8080", None) == NotAnObject("[1, 2]")
    assert parts.build(b"null", "b:8080", None) == NotAnObject("None")
    empty = parts.build(b"{}", "b:8080", None)
    assert isinstance(empty, BrokerPart) and empty.index.num_rows == 0


def test_a_job_that_cannot_run_is_the_brokers_error() -> None:
    def no_session() -> Any:
        class Stopped:
            def createDataFrame(self, *_: Any) -> Any:
                raise RuntimeError("Cannot call methods on a stopped SparkContext.\nmore")

        return Stopped()

    with pytest.raises(CollectorError) as raised:
        SparkParts(no_session, min_bytes=0).build(b"{}", "b:8080", None)
    assert str(raised.value) == (
        "the broker-stats answer of b:8080 could not be read on Spark: "
        "Cannot call methods on a stopped SparkContext."
    )


def test_a_session_that_cannot_start_is_the_brokers_error() -> None:
    from pulsar_lens.core.errors import SparkUnavailable

    tried: list[int] = []

    def unreachable() -> Any:
        tried.append(1)
        raise SparkUnavailable("the Spark Connect server sc://h:15002 cannot be reached")

    parts = SparkParts(unreachable, min_bytes=0)
    with pytest.raises(CollectorError) as raised:
        parts.build(b"{}", "b:8080", None)
    assert str(raised.value) == (
        "the broker-stats answer of b:8080 could not be read on Spark: "
        "the Spark Connect server sc://h:15002 cannot be reached"
    )
    with pytest.raises(CollectorError):  # the next poll's answer tries the session again
        parts.build(b"{}", "b:8080", None)
    assert len(tried) == 2


def test_the_setting_chooses_spark_or_the_worker_processes() -> None:
    on = part_builder(Settings.from_env({"PULSAR_LENS_SPARK_PARTS": "1"}))
    off = part_builder(Settings.from_env({}))
    try:
        assert isinstance(on, SparkParts) and isinstance(off, PartPool)
    finally:
        off.close()  # `on` started nothing: its session starts at its first build


@pytest.mark.timeout(1500)
def test_collect_with_its_answers_read_on_spark_stores_all_the_cluster_served(
    tmp_path: Path,
) -> None:
    """The real `pulsar-lens collect` with `PULSAR_LENS_SPARK_PARTS=1` (local[2]): the store
    holds every topic, subscription and consumer each poll was served (the scale harness's
    check), and a JVM ran in its process tree."""
    from reliability import scale

    figures = scale.run_size(
        4_000,  # one answer of some 7 MB: over the 4 MiB under which it is built here
        polls=2,
        change=0.1,
        brokers=1,
        interval=None,
        work=tmp_path,
        pages=False,
        check=True,
        spark_parts=True,
    )
    assert figures["problems"] == []
    assert figures["server"]["not_found"] == {}
    assert [s["topics"] for s in figures["stages"]] == [4_000, 4_000]
    assert "java" in figures["collect"]["commands"], figures["collect"]


def test_closing_stops_only_a_session_a_build_started(spark: Any) -> None:
    """The process's session was running before (the test run's): closing the parts that
    used it leaves it running for whoever started it."""
    from pulsar_lens.plugins.spark import session

    assert session.started() is not None
    used = SparkParts(min_bytes=0)
    assert isinstance(used.build(b"{}", "b:8080", None), BrokerPart)
    used.close()
    assert session.get() is spark and spark.range(2).count() == 2  # type: ignore[attr-defined]


def test_an_answer_under_the_threshold_is_built_here_index_first() -> None:
    """A small answer never starts a Spark job (one costs more than building it): no session
    is asked for, and the index is told ahead as the worker processes tell it."""

    def no_session() -> Any:
        raise AssertionError("a small answer asked for a Spark session")

    body = b'{"public/default": {}}'
    told: list[Any] = []
    built = SparkParts(no_session).build(body, "b:8080", None, told.append)
    assert built == part_of_answer(body, "b:8080", None)
    assert len(told) == 1 and told[0].equals(built.index)  # type: ignore[union-attr]


def test_the_process_session_stops_when_the_last_of_its_users_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two clusters' sources of one collect process share the process's session: the first
    to close leaves it to the other; the last stops it, since one of them started it."""
    from pulsar_lens.plugins.spark import session

    running: list[object] = []
    stopped: list[object] = []
    monkeypatch.setattr(session, "started", lambda: running[0] if running else None)

    def get() -> Any:
        if not running:
            running.append(object())
        return running[0]

    def stop() -> None:
        stopped.append(running.pop())

    monkeypatch.setattr(session, "get", get)
    monkeypatch.setattr(session, "stop", stop)
    first, second, unused = (SparkParts(min_bytes=0) for _ in range(3))
    assert first._started() is second._started()
    unused.close()  # never built: nothing to do
    first.close()
    assert not stopped
    second.close()
    assert len(stopped) == 1 and not running
    second.close()  # twice: still once
    assert len(stopped) == 1


def _answered(part: bytes) -> Any:
    """A session whose one job sends back `part` as a built part."""

    class Answered:
        def createDataFrame(self, *_: Any) -> Any:
            return self

        def mapInArrow(self, *_: Any) -> Any:
            return self

        def toArrow(self) -> Any:
            import pyarrow as pa

            return pa.table(
                {"outcome": ["built"], "detail": [""], "part": pa.array([part], pa.binary())}
            )

    return lambda: Answered()


def test_a_part_that_names_anything_but_a_parts_classes_is_refused_unrun(tmp_path: Path) -> None:
    """The collect process holds the admin token: what an executor sends back is read as a
    part only, never as code to run."""
    import os
    import pickle

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> Any:
            return (os.mkdir, (str(marker),))

    with pytest.raises(CollectorError) as raised:
        SparkParts(_answered(pickle.dumps(Payload())), min_bytes=0).build(b"{}", "b:8080", None)
    assert not marker.exists()
    assert str(raised.value) == (
        "the part of b:8080 that Spark sent back was refused: "
        "it names posix.mkdir, which no part holds"
    )
    with pytest.raises(CollectorError, match="was refused"):
        SparkParts(_answered(b"not a pickle"), min_bytes=0).build(b"{}", "b:8080", None)


def test_every_part_reads_back_through_the_names_a_part_may_hold(
    cluster: tuple[SynthCluster, str],
) -> None:
    """Parts with what parsing noted (wrong types, unknown fields, nulls, numbers past range,
    names past ASCII) pickle with only the names `PART_GLOBALS` allows."""
    import json
    import pickle

    from tests.collectors.test_bulkparts import is_same_part

    for broker, body in cluster[0].current.bulk.items():
        answer = json.loads(body)
        stats = [
            st for b in answer.values() for k in b.values() for t in k.values() for st in t.values()
        ]
        for i, st in enumerate(stats[:6]):
            st["msgRateIn"] = "fast" if i == 0 else st.get("msgRateIn")
            st["unknownField"] = {"x": [1, 2]}
            st["msgThroughputIn"] = None if i == 1 else st.get("msgThroughputIn")
            st["storageSize"] = 10**30 if i == 2 else st.get("storageSize")
            for sub in st.get("subscriptions", {}).values():
                sub["msgBacklog"] = -5 if i == 3 else sub.get("msgBacklog")
                for consumer in sub.get("consumers", []):
                    consumer["consumerName"] = "ü-名前"
                    if i == 4:
                        consumer["keyHashRanges"] = ["bad"]
        for damaged in (body, json.dumps(answer).encode()):
            here = part_of_answer(damaged, broker, None)
            assert isinstance(here, BrokerPart)
            sent = pickle.dumps(here, protocol=pickle.HIGHEST_PROTOCOL)
            there = SparkParts(_answered(sent), min_bytes=0).build(damaged, broker, None)
            assert is_same_part(there, here)
        assert here.noted  # the damage was noted, so Noted and its warnings were read back
