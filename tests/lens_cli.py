"""Run `pulsar-lens` as a user would: a subprocess from the work tree, no PULSAR_* settings
unless a test passes them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from pulsar_lens.core.parts import SPARK_JAVA_OPTIONS_ENV

ROOT = Path(__file__).resolve().parents[1]
RUN_SETTINGS = (SPARK_JAVA_OPTIONS_ENV,)
"""The settings of the test run itself (tests/conftest.py) that its subprocesses keep."""


def clean_environ() -> dict[str, str]:
    """This process's environment without the Pulsar Lens and Pulsar settings of whoever runs
    the tests (PULSAR_*), but for the test run's own (RUN_SETTINGS)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_") or k in RUN_SETTINGS}


def run_lens(
    *args: str, timeout: float = 120.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command's exit code and output. One that outlives `timeout` is stopped with SIGABRT
    (with PYTHONFAULTHANDLER on, every thread's stack goes to its stderr) and the test fails
    showing where it hung."""
    clean = clean_environ()
    argv = [sys.executable, "-m", "pulsar_lens.cli.main", *args]
    with subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**clean, "PYTHONFAULTHANDLER": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                out, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            raise AssertionError(
                f"pulsar-lens {' '.join(args[:2])} still ran after {timeout:g}s; its output:\n"
                f"{out[-2000:]}\nits stderr (thread stacks last):\n{err[-6000:]}"
            ) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
