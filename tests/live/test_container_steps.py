"""The Dockerfile's steps, run outside Docker (no engine here): the build stage's wheel is made
from exactly the paths it copies, installs into a clean virtualenv, and the image's CMD, run
from another directory with the image's environment, passes the image's HEALTHCHECK against a
real broker, then stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import requests

from lab.localpulsar import LocalPulsar, free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def build_stage_copies() -> list[str]:
    """The sources the build stage copies (`COPY <src> <dst>` lines before the second FROM)."""
    build_stage = DOCKERFILE.split("\nFROM ", 2)[1]
    sources: list[str] = []
    for line in build_stage.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            sources.extend(line.split()[1:-1])
    return sources


def image_env() -> dict[str, str]:
    block = re.search(r"^ENV (.+?)(?:\n(?!\s)|\Z)", DOCKERFILE, re.M | re.S)
    assert block, "the Dockerfile sets no ENV"
    return dict(pair.split("=", 1) for pair in shlex.split(block.group(1).replace("\\\n", " ")))


def image_cmd() -> list[str]:
    found = re.search(r"^CMD (\[.*\])$", DOCKERFILE, re.M)
    assert found, "the Dockerfile has no exec-form CMD"
    cmd: list[str] = json.loads(found.group(1))
    return cmd


def healthcheck_cmd() -> str:
    found = re.search(r"^\s+CMD (python .+)$", DOCKERFILE, re.M)
    assert found, "the Dockerfile has no python HEALTHCHECK"
    return found.group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtualenv with only the wheel the build stage makes; dependencies come from
    the test environment's site-packages (no network), never from the work tree."""
    work = tmp_path_factory.mktemp("image")
    src = work / "src"
    src.mkdir()
    for name in build_stage_copies():
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, src / name)
    wheels = work / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(wheels), str(src)],
        check=True, timeout=300,
    )  # fmt: skip
    (wheel,) = wheels.glob("pulsar_lens-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--no-deps", str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    return venv


def test_container_wheel_holds_every_package_and_the_broker_recipe(installed: Path) -> None:
    site = Path(
        sysconfig.get_path("purelib", vars={"base": str(installed), "platbase": str(installed)})
    )
    for package in ("core", "collectors", "lab", "plugins", "exporter", "dashboard", "cli"):
        assert (site / package / "__init__.py").exists(), package
    assert (site / "dashboard" / "app.py").exists()
    assert (site / "lab" / "pulsar_runtime" / "pom.xml").exists()
    assert (site / "lab" / "pulsar_runtime" / "log4j2.properties").exists()
    assert (installed / "bin" / "pulsar-lens").exists()


def test_container_cmd_passes_the_healthcheck_and_stops_on_sigterm(
    installed: Path, pulsar: LocalPulsar, tmp_path: Path
) -> None:
    port, metrics_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")},
        **image_env(),
        # loopback only in tests; the image itself binds 0.0.0.0
        "PULSAR_LENS_BIND_ADDRESS": "127.0.0.1",
        "PULSAR_LENS_METRICS_ADDRESS": "127.0.0.1",
        "PULSAR_LENS_METRICS_PORT": str(metrics_port),
        "PULSAR_LENS_STORE": str(tmp_path / "data" / "store"),
        "PULSAR_LENS_PLUGIN_DIRS": str(tmp_path / "plugins"),
        "PULSAR_ADMIN_URL": pulsar.admin_url,
        "PULSAR_LENS_POLL_INTERVAL": "2s",
        "PATH": f"{installed / 'bin'}:{os.environ['PATH']}",
        "PYTHONPATH": sysconfig.get_path("purelib"),  # the test env's dependencies
    }
    (tmp_path / "plugins").mkdir()
    cmd = image_cmd()
    assert cmd[:2] == ["pulsar-lens", "serve"]
    cmd = [str(installed / "bin" / cmd[0]), *cmd[1:]]
    cmd[cmd.index("--port") + 1] = str(port)
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        health = healthcheck_cmd().replace("8501", str(port))
        deadline = time.monotonic() + 120
        ok = False
        while time.monotonic() < deadline and proc.poll() is None:
            check = subprocess.run(shlex.split(health), env=env, capture_output=True, timeout=10)
            if check.returncode == 0:
                ok = True
                break
            time.sleep(1)
        assert ok, f"healthcheck never passed; serve exited {proc.poll()}"
        page = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert page.status_code == 200
        store = tmp_path / "data" / "store"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(store.glob("snapshots/**/*.parquet")):
            time.sleep(1)
        assert list(store.glob("snapshots/**/*.parquet")), "the polling loop stored nothing"
        metrics = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30)
        assert metrics.status_code == 200 and "pulsar_lens_polls_total" in metrics.text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
