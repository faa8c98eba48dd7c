"""Stopping `serve` stops the collect process within its grace period: the analyses under
way (a /metrics refresh, the stored results, a Spark job) are cut short, not waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pulsar_lens.lab.localpulsar import free_port
from tests.fake_admin import FakeAdmin
from tests.lens_cli import ROOT, clean_environ

POLLS = 3  # enough for the analyses of a poll to be under way when serve is stopped


def test_serve_stops_collect_promptly_while_it_analyses(tmp_path: Path) -> None:
    port, metrics = free_port(), free_port()
    with FakeAdmin() as fake:
        env = clean_environ()
        argv = [sys.executable, "-m", "pulsar_lens.cli.main", "serve", "--admin-url", fake.url]
        argv += ["--port", str(port), "--metrics-port", str(metrics), "--interval", "2s"]
        with subprocess.Popen(
            [*argv, "--store", str(tmp_path / "store")],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as proc:
            try:
                seen = _until_polls(proc)
                os.killpg(proc.pid, signal.SIGTERM)  # as a terminal's Ctrl-C or docker stop
                code = proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            output = seen + (proc.stdout.read() if proc.stdout else "")
    assert code == 0, output[-3000:]
    assert "did not stop within" not in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


def _until_polls(proc: subprocess.Popen[str]) -> str:
    """The output up to the POLLS-th heartbeat of the collect process (3 minutes at most)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + 180
    lines: list[str] = []
    polls = 0
    while polls < POLLS:
        line = proc.stdout.readline()
        assert line, f"serve exited early:\n{''.join(lines)[-3000:]}"
        assert time.monotonic() < deadline, f"no {POLLS} polls in 3 minutes:\n{''.join(lines)}"
        lines.append(line)
        polls += line.startswith("[collect] poll ")
    return "".join(lines)
