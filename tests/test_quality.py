"""The code base stays lint-clean, formatted and type-checked (mypy strict on core/,
collectors/ and plugins/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


def test_quality_ruff_lint_is_clean() -> None:
    done = _run(str(BIN / "ruff"), "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_quality_ruff_format_is_clean() -> None:
    done = _run(str(BIN / "ruff"), "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_quality_mypy_strict_core_collectors_plugins() -> None:
    done = _run(sys.executable, str(ROOT / "scripts" / "typecheck.py"))
    assert done.returncode == 0, done.stdout + done.stderr
