"""The container image, built from the Dockerfile with buildah and run for real.

Both variants are built on a stand-in for python:3.11-slim (scripts/base-image.sh). The
light image's command runs against the live broker, as the image's non-root user, with a
temporary directory as its /data volume: the health endpoint answers, a poll lands in /data,
/metrics serves, and a token given at run time reaches neither the store, the logs, /metrics
nor the container's files. A marker in the build's environment reaches neither the image's
config nor any layer. The Spark variant has Java and pyspark and starts healthy.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from tests.deploy.image import (
    BUILD_MARKER,
    IMAGE,
    ROOT,
    Built,
    Container,
    Prebuild,
    archive_hits,
    container,
    container_pids,
    docker_config,
    image_env,
    inspect,
    push_archive,
    size_bytes,
    start_prebuild,
    uids,
)
from tests.waits import wait_until_ok

pytestmark = [pytest.mark.live, pytest.mark.timeout(3600)]

RUN_MARKER = f"run-token-marker-{uuid.uuid4().hex}"
LENS_UID = 10001
READY_TIMEOUT = 240
BUILD_TIMEOUT = 2700  # a cold base and two variants, behind the rest of the run


@pytest.fixture(scope="session")
def prebuild() -> Prebuild:
    return start_prebuild(ROOT / "artifacts")


@pytest.fixture(scope="session")
def base(prebuild: Prebuild) -> str:
    return prebuild.base.result(timeout=BUILD_TIMEOUT)


@pytest.fixture(scope="session")
def image(prebuild: Prebuild) -> Built:
    return prebuild.light.result(timeout=BUILD_TIMEOUT)


@pytest.fixture(scope="session")
def spark_image(prebuild: Prebuild) -> Built:
    return prebuild.spark.result(timeout=BUILD_TIMEOUT)


@dataclass
class Served:
    box: Container
    port: int
    metrics_port: int
    data: Path


def serve_argv(image: str, port: int) -> list[str]:
    """The image's CMD, on `port` (the host network is shared: 8501 may be taken)."""
    cmd = docker_config(image)["Cmd"]
    assert isinstance(cmd, list) and cmd[:2] == ["pulsar-lens", "serve"], cmd
    argv = [str(a) for a in cmd]
    argv[argv.index("--port") + 1] = str(port)
    return argv


def wait_healthy(served: Served) -> None:
    def exit_code() -> int | None:
        proc = served.box.proc
        return -1 if proc is None else proc.poll()

    # the dashboard, then the collect process the command starts beside it (on a busy machine
    # its /health listened a while after the dashboard's, and the image's health check read it
    # as "nothing polls here")
    for url in (
        f"http://127.0.0.1:{served.port}/_stcore/health",
        f"http://127.0.0.1:{served.metrics_port}/health",
    ):
        wait_until_ok(
            url,
            timeout=READY_TIMEOUT,
            exit_code=exit_code,
            output=served.box.output,
            what="the container's command",
            interval=2.0,
        )


def start_serving(
    box: Container, image: str, admin_url: str, data: Path, *, spark_jobs: bool = False
) -> Served:
    port, metrics_port = free_port(), free_port()
    data.chmod(0o755)
    # a bind mount keeps the host's owner, and the image's /data belongs to lens
    os.chown(data, LENS_UID, LENS_UID)
    env = {
        "PULSAR_ADMIN_URL": admin_url,
        "PULSAR_ADMIN_TOKEN": RUN_MARKER,
        # loopback only in tests; the image itself binds 0.0.0.0
        "PULSAR_LENS_BIND_ADDRESS": "127.0.0.1",
        "PULSAR_LENS_METRICS_ADDRESS": "127.0.0.1",
        "PULSAR_LENS_METRICS_PORT": str(metrics_port),
        "PULSAR_LENS_POLL_INTERVAL": "2s",
        # a Spark job worker's JVM per test would not fit the machine (as in tests/conftest.py)
        "PULSAR_LENS_SPARK_JOBS": "1" if spark_jobs else "0",
    }
    box.start(serve_argv(image, port), env=env, volumes={data: "/data"})
    served = Served(box=box, port=port, metrics_port=metrics_port, data=data)
    wait_healthy(served)
    return served


@pytest.fixture(scope="module")
def served(
    image: Built, pulsar: LocalPulsar, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The light image's command, serving against the live broker until the module ends."""
    work = tmp_path_factory.mktemp("served")
    (work / "data").mkdir()
    with container(image.name, work / "container.log") as box:
        yield start_serving(box, image.name, pulsar.admin_url, work / "data")


def stored_snapshots(served: Served) -> list[Path]:
    return sorted((served.data / "store").glob("snapshots/**/*.parquet"))


def wait_for_snapshot(served: Served) -> list[Path]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not stored_snapshots(served):
        time.sleep(1)
    return stored_snapshots(served)


def test_image_health_endpoint_answers_200(served: Served) -> None:
    response = requests.get(f"http://127.0.0.1:{served.port}/_stcore/health", timeout=10)
    assert response.status_code == 200
    assert requests.get(f"http://127.0.0.1:{served.port}/", timeout=10).status_code == 200


def test_image_healthcheck_command_passes_inside_the_container(served: Served) -> None:
    test = docker_config(IMAGE)["Healthcheck"]
    assert isinstance(test, dict)
    kind, command = test["Test"]
    assert kind == "CMD-SHELL"
    command = command.replace("8501", str(served.port))
    # the check's own process has the image's environment, not the one the test served with
    command = f"PULSAR_LENS_METRICS_PORT={served.metrics_port} {command}"
    done = served.box.run(["/bin/sh", "-c", command], timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"collect http://127.0.0.1:{served.metrics_port}/health: 200 " in done.stdout


def test_image_poll_lands_in_the_data_volume(served: Served) -> None:
    found = wait_for_snapshot(served)
    assert found, "no snapshot in the /data volume:\n" + served.box.output()[-3000:]
    for path in stored_snapshots(served):
        assert path.stat().st_uid == LENS_UID


def test_image_metrics_serve_on_the_port_the_image_sets(served: Served) -> None:
    assert image_env(IMAGE)["PULSAR_LENS_METRICS_PORT"] == "9464"
    wait_for_snapshot(served)
    url = f"http://127.0.0.1:{served.metrics_port}/metrics"
    response = requests.get(url, timeout=30)
    assert response.status_code == 200
    assert "pulsar_lens_polls_total" in response.text


def test_image_processes_run_as_the_non_root_user(served: Served) -> None:
    assert docker_config(IMAGE)["User"] == "lens"
    pids = container_pids(served.box.tag)
    assert len(pids) >= 3, pids  # the supervisor, the collect process, Streamlit
    assert {pid: uids(pid) for pid in pids} == {pid: [LENS_UID] * 4 for pid in pids}


def test_image_run_token_stays_out_of_store_logs_metrics_and_files(served: Served) -> None:
    assert wait_for_snapshot(served)
    marker = RUN_MARKER.encode()
    assert marker not in served.box.log.read_bytes()
    for path in served.data.rglob("*"):
        if path.is_file():
            assert marker not in path.read_bytes(), path
    metrics = requests.get(f"http://127.0.0.1:{served.metrics_port}/metrics", timeout=30)
    assert RUN_MARKER not in metrics.text
    done = subprocess.run(
        ["grep", "-rlF", "--binary-files=text", "--no-messages", RUN_MARKER, str(served.box.root)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.stdout == "", f"the token is in the container's files: {done.stdout}"


def test_image_stops_cleanly_on_sigterm(image: Built, pulsar: LocalPulsar, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with container(image.name, tmp_path / "container.log") as box:
        start_serving(box, image.name, pulsar.admin_url, tmp_path / "data")
        code = box.stop()
        assert code == 0, box.output()[-3000:]
        assert container_pids(box.tag) == []


def test_image_holds_the_app_and_no_build_tools_or_caches(image: Built, tmp_path: Path) -> None:
    with container(image.name, tmp_path / "container.log") as box:
        # checked inside, by its exit status: a run's stdout has come back empty once
        files = ("pom.xml", "log4j2.properties")
        check = (
            "import pulsar_lens.lab as lab, pathlib, sys;"
            " d = pathlib.Path(lab.__file__).parent / 'pulsar_runtime';"
            f" sys.exit(0 if all((d / f).is_file() for f in {files!r}) else 3)"
        )
        done = box.run(["python", "-c", check])
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        for tool in ("gcc", "cc", "make", "g++"):
            assert box.run(["sh", "-c", f"command -v {tool}"]).returncode != 0, tool
        for leftover in ("root/.cache/pip", "wheels", "src", "var/lib/apt/lists/partial"):
            path = box.root / leftover
            assert not path.exists() or not any(path.iterdir()), leftover


def test_image_layers_and_config_hold_no_secret(image: Built, tmp_path: Path) -> None:
    config = json.dumps(inspect(image.name))
    assert BUILD_MARKER not in config and RUN_MARKER not in config
    archive = push_archive(image.name, tmp_path / "image.tar")
    # lens's passwd line: proof that the scan reads the layers' files
    control = f"lens:x:{LENS_UID}:".encode()
    hits = archive_hits(archive, [BUILD_MARKER.encode(), RUN_MARKER.encode(), control])
    assert hits[control], "the scan found not even /etc/passwd's lens line"
    assert hits[BUILD_MARKER.encode()] == []
    assert hits[RUN_MARKER.encode()] == []


def test_spark_image_runs_java_and_pyspark_and_starts_healthy(
    spark_image: Built, pulsar: LocalPulsar, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    with container(spark_image.name, tmp_path / "container.log") as box:
        java = box.run(["java", "-version"])
        assert java.returncode == 0 and 'version "17.' in java.stderr, java.stderr
        pyspark = box.run(["python", "-c", "import pyspark; print(pyspark.__version__)"])
        assert pyspark.returncode == 0, pyspark.stderr
        served = start_serving(box, spark_image.name, pulsar.admin_url, tmp_path / "data")
        health = f"http://127.0.0.1:{served.port}/_stcore/health"
        assert requests.get(health, timeout=10).status_code == 200


def test_image_sizes_are_reported(image: Built, spark_image: Built, base: str) -> None:
    sizes = {"light": size_bytes(image.name), "spark": size_bytes(spark_image.name)}
    assert 0 < sizes["light"] < sizes["spark"]
    report: dict[str, dict[str, object]] = {
        variant: {
            "image": built.name,
            "size_bytes": sizes[variant],
            "size_mb": round(sizes[variant] / 1e6),
            "build_seconds": round(built.seconds, 1),
        }
        for variant, built in (("light", image), ("spark", spark_image))
    }
    report["base_image"] = {"image": base, "size_bytes": size_bytes(base)}
    out = ROOT / "artifacts" / "image.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
