"""The Spark engine's parts on local[2]: schemas, windowed reads of the store, hashing; a
session's JVM and Python workers without the process's credentials."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.core.errors import (
    JvmHashUnavailable,
    LocalPulsarError,
    SettingsError,
    SparkUnavailable,
)
from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.parts import SPARK_JAVA_OPTIONS_ENV
from pulsar_lens.core.store import STORE_SCHEMAS, Store
from pulsar_lens.plugins.spark import hashing, jvm
from pulsar_lens.plugins.spark.hashing import with_sticky_hash
from pulsar_lens.plugins.spark.reader import read
from pulsar_lens.plugins.spark.schemas import spark_schema
from pulsar_lens.plugins.spark.session import master_from_env
from tests.core.snapshots import make_snapshot

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
BEFORE_MIDNIGHT = dt.datetime(2026, 11, 21, 23, 59, 0, tzinfo=dt.UTC)
POLLS = [BEFORE_MIDNIGHT + dt.timedelta(seconds=30 * i) for i in range(5)]  # 2 days


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    written = Store(tmp_path_factory.mktemp("spark-store"))
    for i, at in enumerate(POLLS):
        written.write(make_snapshot(at=at, topics=i + 1, backlog=i))
    return written


@pytest.mark.parametrize("name", sorted(STORE_SCHEMAS))
def test_every_store_table_has_an_explicit_schema_with_its_day(name: str) -> None:
    schema = spark_schema(name)
    assert schema.names == [*STORE_SCHEMAS[name].names, "date"]


def test_an_unknown_table_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no store table 'nope'; known: brokers"):
        spark_schema("nope")


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["collected_at", "topic"]).reset_index(drop=True)


def test_a_windowed_read_equals_the_stores_own_read(spark: object, store: Store) -> None:
    since, until = POLLS[1], POLLS[3]
    frame = read(spark, store.root, "topics", since=since, until=until)
    got = _sorted(frame.drop("date").toPandas())
    want = _sorted(store.read("topics", since=since, until=until).to_pandas())
    assert len(got) == 2 + 3 + 4
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_a_window_inside_one_day_lists_only_that_days_folder(spark: object, store: Store) -> None:
    frame = read(spark, store.root, "topics", since=POLLS[2], until=POLLS[4])
    plan = frame._jdf.queryExecution().executedPlan().toString()  # type: ignore[attr-defined]
    assert "PartitionFilters: [isnotnull(date" in plan
    assert {str(d) for d in frame.select("date").distinct().toPandas()["date"]} == {"2026-11-22"}


def test_snapshot_ids_narrow_the_read(spark: object, store: Store) -> None:
    newest = str(store.snapshots()["snapshot_id"].iloc[-1])
    frame = read(spark, store.root, "topics", snapshot_ids=[newest])
    assert frame.count() == 5


def test_a_read_of_many_files_starts_no_spark_job(spark: object, tmp_path: Path) -> None:
    from pulsar_lens.plugins.spark import progress, session

    many = Store(tmp_path)
    for i in range(40):  # each poll a file of its own, more than Spark looks up on the driver
        many.write(make_snapshot(at=POLLS[0] + dt.timedelta(seconds=i), topics=1))
    seen: list[progress.Counts] = []
    with progress.tracked(spark, "many-files", seen.append):
        frame = read(spark, many.root, "topics")
    assert len(many.live_files("topics")) == 40 < int(session.DRIVER_LISTING_LIMIT)
    assert seen[-1] == progress.Counts()  # no job: the files were looked up on the driver
    assert frame.count() == 40


def test_the_last_progress_report_counts_every_task_of_the_job(spark: Any) -> None:
    from pyspark.sql import functions as F

    from pulsar_lens.plugins.spark import progress

    assert progress._drain(spark._sc, 60.0)  # Spark's internal call is there and answers
    seen: list[progress.Counts] = []
    with progress.tracked(spark, "every-task", seen.append, every=3600):
        spark.range(0, 1000, numPartitions=7).groupBy(F.col("id") % 3).count().collect()
    last = seen[-1]
    assert last.tasks_total >= 7 and last.tasks_done == last.tasks_total
    assert last.stages_done == last.stages_total >= 1


def test_a_table_without_files_is_empty_with_its_schema(spark: object, store: Store) -> None:
    frame = read(spark, store.root, "probes", since=POLLS[0])
    assert frame.count() == 0 and frame.schema == spark_schema("probes")


def test_a_naive_window_is_refused(spark: object, store: Store) -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        read(spark, store.root, "topics", since=dt.datetime(2026, 11, 21))


@pytest.mark.parametrize("path", ["jvm", "arrow"])
@pytest.mark.parametrize("selector", ["consistent", "auto-split", "sticky"])
def test_hashing_in_spark_equals_the_scalar_hash(spark: object, selector: str, path: str) -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019-_/ éü中😀"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(5000)]
    keys += ["", "9", "3", "customer-42"]
    frame = spark.createDataFrame(pd.DataFrame({"key": keys}))  # type: ignore[attr-defined]
    hashed = with_sticky_hash(frame, selector=selector, path=path)  # type: ignore[arg-type]
    assert (
        not hashed.schema["hash"].nullable and hashed.schema["hash"].dataType.typeName() == "long"
    )
    hashed = hashed.toPandas()
    want = [sticky_key_hash(k.encode("utf-8"), selector=selector) for k in hashed["key"]]
    assert hashed["hash"].tolist() == want


@pytest.mark.parametrize("path", ["jvm", "arrow"])
def test_a_null_key_hashes_as_the_empty_key(spark: object, path: str) -> None:
    frame = spark.createDataFrame([("a",), (None,)], "key string")  # type: ignore[attr-defined]
    hashed = with_sticky_hash(frame, path=path).toPandas()  # type: ignore[arg-type]
    assert hashed["hash"].tolist() == [sticky_key_hash(b"a"), sticky_key_hash(b"")]


def test_without_a_jdk_the_hash_goes_through_python_and_says_why(
    spark: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_java() -> str:
        raise LocalPulsarError("no Java 17.0.17+ or 21.0.8+ found")

    monkeypatch.setattr(jvm, "find_java", no_java)
    monkeypatch.setattr(jvm, "jar_path", lambda: Path("/nonexistent/pulsar-lens-spark.jar"))
    monkeypatch.setattr(jvm, "_registered", {})
    monkeypatch.setattr(hashing, "_fell_back", [])
    with pytest.raises(JvmHashUnavailable, match="no JDK to compile the Spark sticky-key hash"):
        jvm.compile_jar()
    frame = spark.createDataFrame([("a",)], "key string")  # type: ignore[attr-defined]
    with pytest.raises(JvmHashUnavailable):
        with_sticky_hash(frame, path="jvm")
    hashed = with_sticky_hash(frame).toPandas()
    assert hashed["hash"].tolist() == [sticky_key_hash(b"a")]
    assert "go through Python" in caplog.text and "no Java 17" in caplog.text
    assert hashing.jvm_fallback_reason() is not None


def test_the_master_comes_from_the_environment_and_a_bad_one_is_named() -> None:
    assert master_from_env({}) == "local[2]"
    assert master_from_env({"PULSAR_LENS_SPARK_MASTER": "sc://127.0.0.1:15002"}).startswith("sc")
    with pytest.raises(SettingsError, match="PULSAR_LENS_SPARK_MASTER='http://x'"):
        master_from_env({"PULSAR_LENS_SPARK_MASTER": "http://x"})


def test_a_connect_server_whose_name_never_resolves_is_refused_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reach check bounds the name lookup too: a resolver that never answers does not
    hold the session's start (nor this test) past the check's timeout."""
    import socket
    import threading

    from pulsar_lens.plugins.spark import session

    released = threading.Event()
    asked: list[str] = []

    def hung(host: str, *args: object, **kwargs: object) -> list[Any]:
        asked.append(host)
        released.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hung)
    try:
        with pytest.raises(SparkUnavailable, match=r"no answer within 0\.5 s, name lookup"):
            session._reach_connect_server("sc://connect.example:15002/;token=t0k", timeout=0.5)
    finally:
        released.set()
    assert asked == ["connect.example"]


def test_a_connect_server_that_refuses_is_named_without_its_token() -> None:
    import socket

    from pulsar_lens.plugins.spark import session

    with socket.socket() as held:  # a port nothing listens at once it is closed
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    with pytest.raises(SparkUnavailable, match="Connection refused") as refused:
        session._reach_connect_server(f"sc://127.0.0.1:{port}/;token=t0k-77", timeout=5)
    assert "t0k-77" not in str(refused.value) and ";token=***" in str(refused.value)


def test_a_local_session_keeps_its_scratch_files_in_the_process_temporary_folder(
    spark: object,
) -> None:
    """The part's TMPDIR (scripts/test.sh gives each part its own), not the JVM's /tmp."""
    jvm_system = spark.sparkContext._jvm.java.lang.System  # type: ignore[attr-defined]
    assert jvm_system.getProperty("java.io.tmpdir") == tempfile.gettempdir()
    assert list(Path(tempfile.gettempdir()).glob("blockmgr-*")), "the block manager's folder"


def test_the_runs_java_options_reach_the_drivers_jvm(spark: object) -> None:
    """PULSAR_LENS_SPARK_JAVA_OPTIONS (tests/conftest.py sets the run's) is among the JVM's
    own arguments."""
    options = os.environ[SPARK_JAVA_OPTIONS_ENV]
    assert options
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # type: ignore[attr-defined]
    arguments = list(bean.getInputArguments())
    assert set(options.split()) <= set(arguments), arguments


def test_the_run_shares_one_session(spark: object) -> None:
    from pulsar_lens.plugins.spark import session

    assert session.get() is spark
    started = session.started()
    assert started is not None and started.master == "local[2]" and not started.connect
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"  # type: ignore[attr-defined]
    assert spark.conf.get("spark.ui.enabled") == "false"  # type: ignore[attr-defined]


def test_store_root_is_a_path(store: Store) -> None:
    assert Path(store.root).is_dir()


ENVIRON_PROBE = """
import json, os, sys
import pyarrow as pa
from pulsar_lens.plugins.spark import session

session.configure(session.SparkSettings(master="local[1]"))
spark = session.get()

def names(batches):
    for batch in batches:
        yield pa.record_batch([pa.array([" ".join(sorted(os.environ))])], names=["names"])

worker = spark.range(1).mapInArrow(names, "names string").collect()[0][0].split()
jvm = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{jvm}/environ", "rb") as f:
    jvm_names = [e.split(b"=", 1)[0].decode() for e in f.read().split(b"\\0") if e]
session.stop()
print(json.dumps({"worker": worker, "jvm": jvm_names, "here": "PULSAR_ADMIN_TOKEN" in os.environ}))
"""


def test_the_jvm_a_session_starts_and_its_python_workers_never_see_the_token(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PULSAR_ADMIN_TOKEN": "s3cr3t-token", "SPARK_TESTING": "1"}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", ENVIRON_PROBE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["here"] is True  # the process keeps its own (a collect process polls with it)
    assert found["jvm"] and found["worker"]
    assert "PULSAR_ADMIN_TOKEN" not in found["jvm"]
    assert "PULSAR_ADMIN_TOKEN" not in found["worker"]
