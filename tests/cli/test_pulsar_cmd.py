"""`pulsar-lens pulsar --pulsar`: which release `assemble` and `status` speak of, without
starting a broker (the live tier starts them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pulsar_lens.lab import runtime
from tests.lens_cli import run_lens


def test_assemble_names_the_release_of_a_line(tmp_path: Path) -> None:
    """`--pulsar 3.0` is 3.0.7, assembled into its own cache folder (here the one
    scripts/setup.sh filled, so Maven does not run)."""
    (tmp_path / "pulsar-3.0.7").symlink_to(runtime.cache_root() / "pulsar-3.0.7")
    env = {"PULSAR_LENS_CACHE_DIR": str(tmp_path)}
    done = run_lens("pulsar", "assemble", "--pulsar", "3.0", "--json", env=env)
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert state["version"] == "3.0.7"
    assert state["lib"] == str(tmp_path / "pulsar-3.0.7" / "lib")


def test_status_with_a_release_fails_unless_that_release_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    # this test's own process stands for the running standalone
    (run / "standalone.json").write_text(json.dumps({"pid": os.getpid(), "version": "4.0.7"}))
    env = {"PULSAR_LENS_CACHE_DIR": str(tmp_path)}
    for flags, code in (((), 0), (("--pulsar", "4.0"), 0), (("--pulsar", "3.0.7"), 1)):
        done = run_lens("pulsar", "status", *flags, "--json", env=env)
        assert done.returncode == code, (flags, done.stdout, done.stderr)
        assert json.loads(done.stdout)["version"] == "4.0.7"


def test_an_unknown_release_is_refused_with_the_known_ones() -> None:
    done = run_lens("pulsar", "status", "--pulsar", "3.1")
    assert done.returncode == 2
    assert "3.0.7" in done.stderr and "4.0.7" in done.stderr
