"""Running an example plugin's own tests as docs/plugins.md tells its author to."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.lens_cli import clean_environ

ROOT = Path(__file__).resolve().parents[1]


def run_example_tests(folder: str, *, timeout: float) -> str:
    """`pytest -q` in examples/<folder>, with no Pulsar Lens setting of this run; the output
    of a passing run (a failing one fails the calling test with it)."""
    env = clean_environ()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=ROOT / "examples" / folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
