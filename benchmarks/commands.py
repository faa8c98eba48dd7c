"""What the command benchmarks share: timing one run of a command in a child process, the
environment that lets its interpreter write bytecode where the benchmark says (cold runs get a
fresh folder), and the load average printed beside the figures."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def timed(argv: Sequence[str], env: Mapping[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=dict(env), check=True, stdout=subprocess.DEVNULL, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def bytecode_env(pycache: Path) -> dict[str, str]:
    """This process's environment, with bytecode written under `pycache` (a shell's
    PYTHONDONTWRITEBYTECODE would make every run cold)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
