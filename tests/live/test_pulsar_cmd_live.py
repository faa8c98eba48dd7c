"""`pulsar-lens pulsar assemble|start|status|stop` as a user runs them: assemble finds the
cached jars, start leaves a standalone running on loopback that status reports and that
answers, stop ends it and status then says it is stopped. The state lives in a cache folder
of the test's own (the jars are linked into it), so the user's own standalone is untouched."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from pulsar_lens.lab import runtime
from tests.lens_cli import run_lens

START_SECONDS = 420.0  # a JVM start on a loaded 2-core machine


def lens_json(*args: str, env: dict[str, str], timeout: float = 120.0) -> tuple[int, Any]:
    done = run_lens("pulsar", *args, "--json", env=env, timeout=timeout)
    assert done.stdout.strip(), f"pulsar {args[0]} printed nothing; stderr:\n{done.stderr}"
    return done.returncode, json.loads(done.stdout)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_pulsar_commands_assemble_start_status_stop(tmp_path: Path) -> None:
    version = runtime.PULSAR_VERSION
    cached = runtime.cache_root() / f"pulsar-{version}"
    (tmp_path / f"pulsar-{version}").symlink_to(cached)
    env = {"PULSAR_LENS_CACHE_DIR": str(tmp_path)}

    code, assembled = lens_json("assemble", env=env)
    assert code == 0 and assembled["version"] == version
    assert assembled["lib"] == str(tmp_path / f"pulsar-{version}" / "lib")
    assert lens_json("status", env=env) == (1, {"running": False})

    try:
        code, started = lens_json("start", env=env, timeout=START_SECONDS)
        assert code == 0, started
        assert urlsplit(str(started["admin_url"])).hostname == "127.0.0.1"
        code, state = lens_json("status", env=env)
        assert code == 0 and state["running"] and state["pid"] == started["pid"]
        answer = requests.get(f"{started['admin_url']}/admin/v2/clusters", timeout=30)
        assert answer.json() == ["standalone"]
    finally:
        code, stopped = lens_json("stop", env=env)
    assert code == 0 and stopped == {"stopped": True}
    deadline = time.monotonic() + 60  # stop waits for the group; this only bounds the check
    while not gone(int(started["pid"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gone(int(started["pid"])), f"the standalone (pid {started['pid']}) still runs"
    assert lens_json("status", env=env) == (1, {"running": False})
    assert lens_json("stop", env=env) == (0, {"stopped": False})
