"""Real Spark processes for the cluster tests, started from the pyspark distribution.

`start_standalone(folder)` runs a standalone master and one worker, `start_connect(folder,
master=...)` a Spark Connect server. Every process listens on 127.0.0.1 only, writes its log,
work and scratch files under `folder`, runs in its own process group and is stopped with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_lens.core.parts import SPARK_JAVA_OPTIONS_ENV
from pulsar_lens.lab.processes import free_port
from tests.lens_cli import RUN_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
RUNNER = "tests.spark.run_on_master"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class Process:
    """One Spark JVM (or a script that execs one), leader of its own process group."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise RuntimeError(f"{self.name} exited with {code}; log tail:\n{self.tail()}")

    def stop(self, *, grace: float = 15.0) -> None:
        """SIGTERM the whole group (the worker's executors too), SIGKILL what outlives grace."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=wait)
                return


@dataclass
class Standalone:
    master: Process
    worker: Process
    url: str  # spark://127.0.0.1:PORT
    ui: str  # the master's web UI, for its /json

    def stop(self) -> None:
        self.worker.stop()
        self.master.stop()


@dataclass
class Connect:
    server: Process
    url: str  # sc://127.0.0.1:PORT

    def stop(self) -> None:
        self.server.stop()


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def spark_defaults() -> str:
    """spark-defaults.conf of every process here, as an operator would set it: few shuffle
    partitions for a small store (Spark's 200 cost more than the data), and a default
    filesystem that is HDFS, as on a cluster with Hadoop settings, and that nothing serves: the
    store must still be read from its path."""
    defaults = (
        "spark.sql.shuffle.partitions 8\n"
        f"spark.hadoop.fs.defaultFS hdfs://{LOOPBACK}:{free_port()}\n"
    )
    options = run_java_options()
    if options:  # the test run's (tests/conftest.py): its drivers and executors alike
        defaults += f"spark.driver.extraJavaOptions {options}\n"
        defaults += f"spark.executor.extraJavaOptions {options}\n"
    return defaults


def run_java_options() -> str:
    return os.environ.get(SPARK_JAVA_OPTIONS_ENV, "")


def spark_env(folder: Path, **extra: str) -> dict[str, str]:
    """The environment of every process here: loopback only, this interpreter for Python
    workers, this checkout importable, settings and scratch files under `folder`."""
    scratch, conf = folder / "scratch", folder / "conf"
    scratch.mkdir(parents=True, exist_ok=True)
    conf.mkdir(exist_ok=True)
    if not (conf / "spark-defaults.conf").exists():
        (conf / "spark-defaults.conf").write_text(spark_defaults())
    # as deployed: no test-only Spark behaviour, no settings of the test process but the
    # JVM options of the test run (its master and worker daemons take them too)
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("PULSAR_LENS_") or k in RUN_SETTINGS) and k != "SPARK_TESTING"
    }
    env.update(
        SPARK_DAEMON_JAVA_OPTS=run_java_options(),
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOCAL_DIRS=str(scratch),
        SPARK_CONF_DIR=str(conf),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        **extra,
    )
    return env


def launch(name: str, argv: Sequence[str], folder: Path, env: dict[str, str]) -> Process:
    log = folder / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            list(argv),
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Process(name, popen, log)


def wait_until(check: Callable[[], bool], *, what: str, process: Process, timeout: float) -> None:
    """Poll `check` every 0.25 s until it holds; fail with the log tail after `timeout` s or
    as soon as `process` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.check_alive()
        if check():
            return
        time.sleep(0.25)
    process.check_alive()
    raise RuntimeError(
        f"{process.name}: {what} not within {timeout:.0f}s; log tail:\n{process.tail()}"
    )


def start_standalone(
    folder: Path, *, cores: int = 2, memory: str = "2g", timeout: float = 90.0
) -> Standalone:
    """A master and one registered worker. The worker offers `cores`, so a second
    application capped at fewer (`spark.cores.max`) can run beside another one."""
    folder.mkdir(parents=True, exist_ok=True)
    # no REST submission server: it would listen on a fixed port (6066)
    env = spark_env(folder, SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    url, ui = f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ui_port}"
    master = launch(
        "master",
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
         "--port", str(port), "--webui-port", str(ui_port)],
        folder,
        env,
    )  # fmt: skip
    try:
        wait_until(lambda: master_state(ui) is not None, what="web UI", process=master,
                   timeout=timeout)  # fmt: skip
        work = folder / "work"
        worker = launch(
            "worker",
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", LOOPBACK,
             "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
             "--work-dir", str(work)],
            folder,
            env,
        )  # fmt: skip
    except BaseException:
        master.stop()
        raise
    cluster = Standalone(master, worker, url, ui)
    try:
        wait_until(lambda: alive_workers(ui) >= 1, what="worker registered with the master",
                   process=worker, timeout=timeout)  # fmt: skip
    except BaseException:
        cluster.stop()
        raise
    return cluster


def master_state(ui: str) -> dict[str, object] | None:
    """The master's JSON status, or None while it does not answer with it (while it starts,
    its web UI can answer /json/ with the HTML page)."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        with direct.open(f"{ui}/json/", timeout=2) as answer:
            state: dict[str, object] = json.load(answer)
            return state
    except (OSError, ValueError):
        return None


def alive_workers(ui: str) -> int:
    return sum(1 for w in _listed(ui, "workers") if w.get("state") == "ALIVE")


def completed_apps(ui: str) -> list[dict[str, Any]]:
    """The applications the master saw finish, as its /json lists them."""
    return _listed(ui, "completedapps")


def active_apps(ui: str) -> list[dict[str, Any]]:
    """The applications running on the cluster now, as the master's /json lists them."""
    return _listed(ui, "activeapps")


def _listed(ui: str, field: str) -> list[dict[str, Any]]:
    listed = (master_state(ui) or {}).get(field) or []
    assert isinstance(listed, list), f"{field}: {listed!r}"
    return listed


def start_connect(folder: Path, *, master: str, timeout: float = 120.0) -> Connect:
    """A Spark Connect server on `master`, ready once a client's query answers. It takes at
    most one core of a standalone cluster, so other applications still get executors."""
    folder.mkdir(parents=True, exist_ok=True)
    env = spark_env(folder)
    port = free_port()
    url = f"sc://{LOOPBACK}:{port}"
    confs = {
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.cores.max": "1",
        "spark.executor.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
    }
    argv = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_CLASS,
            "--name", "pulsar-lens-connect", "--master", master]  # fmt: skip
    for key, value in confs.items():
        argv += ["--conf", f"{key}={value}"]
    server = launch("connect", [*argv, "spark-internal"], folder, env)
    try:
        wait_until(lambda: accepts(port), what="gRPC port open", process=server, timeout=timeout)
        ping = run_child(["--master", url, "--ping"], folder, timeout=timeout)
        if ping.returncode != 0:
            raise RuntimeError(
                f"a query on {url} failed ({ping.returncode}):\n{ping.stdout[-3000:]}\n"
                f"server log tail:\n{server.tail()}"
            )
    except BaseException:
        server.stop()
        raise
    return Connect(server, url)


def accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((LOOPBACK, port)) == 0


def run_child(
    args: Sequence[str], folder: Path, *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`python -m tests.spark.run_on_master ARGS` in its own process (and session), output
    captured; killed with its group after `timeout` s."""
    popen = subprocess.Popen(
        [sys.executable, "-m", RUNNER, *args],
        cwd=folder,
        env=spark_env(folder),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        out, _ = popen.communicate()
        raise RuntimeError(
            f"{RUNNER} {' '.join(args)} ran past {timeout:.0f}s:\n{out[-3000:]}"
        ) from None
    return subprocess.CompletedProcess(popen.args, popen.returncode, out, "")
