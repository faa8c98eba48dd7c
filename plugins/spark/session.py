"""One SparkSession per process, from PULSAR_LENS_SPARK_MASTER (default `local[2]`).

`local[N]`, `spark://host:port` (standalone), `yarn`, `k8s://...` and Spark Connect
`sc://host:port` all work. The session runs in UTC with Arrow on, its web UI off unless
PULSAR_LENS_SPARK_UI=1, and a local driver binds to 127.0.0.1 only; the JVM it starts never
gets the process's credentials. The process's entry point hands over the settings' Spark
part with `configure()` before the first `get()`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from tempfile import gettempdir
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pulsar_lens.core.errors import SparkUnavailable
from pulsar_lens.core.parts import DEFAULT_SPARK_LOCAL_MEMORY as DEFAULT_LOCAL_MEMORY
from pulsar_lens.core.parts import SPARK_DRIVER_MEMORY_ENV as DRIVER_MEMORY_ENV
from pulsar_lens.core.parts import SPARK_LOG_LEVEL_ENV as LOG_LEVEL_ENV
from pulsar_lens.core.parts import SPARK_MASTER_ENV as MASTER_ENV
from pulsar_lens.core.parts import SPARK_MASTER_PREFIXES as MASTER_PREFIXES
from pulsar_lens.core.parts import SPARK_UI_ENV as UI_ENV
from pulsar_lens.core.parts import SparkSettings, spark_master
from pulsar_lens.core.secrets import display_url, without_credentials
from pulsar_lens.core.settings import export

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "APP_NAME",
    "DEFAULT_LOCAL_MEMORY",
    "DRIVER_MEMORY_ENV",
    "LOG_LEVEL_ENV",
    "MASTER_ENV",
    "MASTER_PREFIXES",
    "UI_ENV",
    "SparkSettings",
    "Started",
    "configure",
    "configured",
    "get",
    "master_from_env",
    "started",
    "stop",
]

APP_NAME = "pulsar-lens"
CONNECT_PORT = 15002  # Spark Connect's own default, when the URL names none
# how long a Spark Connect server may take to accept a connection before the session is
# refused: PySpark's client would otherwise retry its first call for at least 10 minutes
CONNECT_REACH_TIMEOUT = 10.0
DRIVER_LISTING_LIMIT = "1000000"  # paths the driver looks up itself, never in a Spark job

_lock = threading.Lock()
_session: SparkSession | None = None
_started: Started | None = None
_settings = SparkSettings()


@dataclass(frozen=True, slots=True)
class Started:
    """How the process's session came up: its master and how long the JVM took."""

    master: str
    seconds: float
    connect: bool  # a Spark Connect client, no JVM of ours


def master_from_env(environ: Mapping[str, str]) -> str:
    """The master PULSAR_LENS_SPARK_MASTER of `environ` names; a value no Spark accepts is a
    SettingsError naming it."""
    return spark_master(environ.get(MASTER_ENV) or "")


def configure(spark: SparkSettings) -> None:
    """The settings the session of this process starts with (the settings' `spark` part):
    called by the entry point, before the first `get()`."""
    global _settings
    with _lock:
        _settings = spark


def configured() -> SparkSettings:
    """What `configure` was given (the defaults before)."""
    return _settings


def get(master: str | None = None) -> SparkSession:
    """The process's session, started on first use (thread-safe)."""
    global _session, _started
    with _lock:
        if _session is not None:
            return _session
        chosen = master or _settings.master
        started = time.perf_counter()
        _session = _build(chosen)
        _started = Started(chosen, time.perf_counter() - started, chosen.startswith("sc://"))
        log.info("Spark session on %s started in %.1fs", display_url(chosen), _started.seconds)
        return _session


def started() -> Started | None:
    """How the session came up, or None when this process has not started one."""
    return _started


def stop() -> None:
    """Stop the process's session (the next `get()` starts a new one)."""
    global _session, _started
    with _lock:
        if _session is not None:
            _session.stop()
        _session, _started = None, None


def _quiet_query_context_loggers() -> None:
    """PySpark logs each analysis error with its query context as it raises it: the error
    then reaches the plugin's failure, which says it once, so these loggers stay quiet."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark without them logs nothing of the kind
        return
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _build(master: str) -> SparkSession:
    from pyspark.sql import SparkSession

    # Python workers run our hashing over Arrow batches: they need this interpreter (and the
    # packages it sees), not whichever python3 comes first on PATH.
    # PySpark reads them from this process's environment when it starts the JVM and workers.
    export({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    if master.startswith("local"):
        export({"SPARK_LOCAL_IP": "127.0.0.1"})  # no "resolves to loopback" guess
    spark = _settings
    # PySpark's own notice about pandas 3 says nothing an operator can act on.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    _quiet_query_context_loggers()
    builder = SparkSession.builder.appName(APP_NAME)
    if master.startswith("sc://"):
        _reach_connect_server(master)
        builder = builder.remote(master)
    else:
        builder = builder.master(master).config("spark.ui.enabled", "true" if spark.ui else "false")
        # Spark's log in the product's shape, without its start-up banner on the console;
        # its scratch folders (spark-*, blockmgr-*) and unpacked native libraries in the
        # temporary folder this process was given (TMPDIR), not always /tmp: a killed driver
        # leaves them there; then the operator's own options (PULSAR_LENS_SPARK_JAVA_OPTIONS).
        log4j = Path(__file__).with_name("log4j2.properties")
        options = f'-Dlog4j2.configurationFile={log4j.as_uri()} "-Djava.io.tmpdir={gettempdir()}"'
        if spark.java_options:
            options = f"{options} {spark.java_options}"
        builder = builder.config("spark.driver.extraJavaOptions", options)
        # Progress goes to the job's status (and the CLI's own bar), not Spark's console bar.
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        if master.startswith("local"):
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1"
            )
            builder = builder.config("spark.sql.shuffle.partitions", "4")
            # In local mode the driver is the executor: the default 1g is too little for
            # weeks of polls. Read before the JVM starts, like every setting here.
            builder = builder.config("spark.driver.memory", spark.driver_memory)
        # A static setting: a Spark Connect server keeps its own and warns when a client asks.
        builder = builder.config("spark.log.level", spark.log_level)
    # Joins broadcast only where an analysis asks (F.broadcast): Spark's size guess of a
    # filtered store read is the whole read, and a wrong guess at a day of polls failed with
    # "Not enough memory to build and broadcast the table". A session setting: Connect too.
    builder = builder.config("spark.sql.autoBroadcastJoinThreshold", "-1")
    # The reader hands Spark every file of a window by path (plugins.spark.reader); past this
    # many paths Spark would look them up in a job of one task per file, seconds on local[2]
    # for what the driver does in milliseconds. A session setting: Connect too.
    builder = builder.config(
        "spark.sql.sources.parallelPartitionDiscovery.threshold", DRIVER_LISTING_LIMIT
    )
    builder = builder.config("spark.sql.session.timeZone", "UTC").config(
        "spark.sql.execution.arrow.pyspark.enabled", "true"
    )
    with _jvm_without_credentials():
        return builder.getOrCreate()


def _reach_connect_server(master: str, timeout: float = CONNECT_REACH_TIMEOUT) -> None:
    """Refuse, with what to do, a Spark Connect master nothing accepts connections at: the
    client retries a refused call with backoff for at least ten minutes, and again at exit."""
    shown = display_url(master)
    try:
        parts = urlsplit("http" + master[2:])  # as the client reads it
        host, port = parts.hostname, parts.port or CONNECT_PORT
    except ValueError as exc:
        raise SparkUnavailable(f"{MASTER_ENV}={shown}: not a Spark Connect URL ({exc})") from None
    if not host:
        raise SparkUnavailable(f"{MASTER_ENV}={shown}: names no host")
    why = _connect_within((host, port), timeout)
    if why:
        raise SparkUnavailable(
            f"the Spark Connect server {shown} cannot be reached ({why}); start it, or set "
            f"{MASTER_ENV} to a master that runs"
        )


def _connect_within(address: tuple[str, int], timeout: float) -> str:
    """Why a TCP connection to `address` could not be made within `timeout` seconds, name
    lookup included ("" when it was made, and closed): `create_connection` bounds the connect
    only, and a resolver that never answers would hold the session's start with it. The
    attempt runs in a daemon thread, left behind when it overruns."""
    outcome: list[str] = []

    def attempt() -> None:
        try:
            socket.create_connection(address, timeout=timeout).close()
            outcome.append("")
        except OSError as exc:
            outcome.append(exc.strerror or type(exc).__name__)

    thread = threading.Thread(target=attempt, name="spark-connect-reach", daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome[0] if outcome else f"no answer within {timeout:g} s, name lookup included"


@contextlib.contextmanager
def _jvm_without_credentials() -> Iterator[None]:
    """While the session starts, the JVM PySpark launches (and the Python workers it starts
    later, which inherit its environment) gets this process's environment without its
    credentials: PySpark hands `spark-submit` a copy of `os.environ` explicitly, so what a
    process that polls a cluster holds (the admin token) would reach them. Nothing else
    changes: `os.environ` stays whole for this process's other threads."""
    from pyspark import java_gateway

    launch = java_gateway.Popen  # type: ignore[attr-defined]

    def popen(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("env") is not None:
            kwargs["env"] = without_credentials(kwargs["env"])
        return launch(*args, **kwargs)

    java_gateway.Popen = popen  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        java_gateway.Popen = launch  # type: ignore[attr-defined]
