"""The Spark drop-in example's own tests pass as docs/plugins.md tells to run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_the_spark_drop_in_examples_own_tests_pass() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=ROOT / "examples" / "spark-drop-in",
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
