"""`pulsar-lens demo --pulsar`: which release the demo starts is checked before anything
starts (the live tier runs it on a 3.0 cluster: tests/live/test_serve_demo_live.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pulsar_lens.cli.main import build_parser
from tests.lens_cli import run_lens


def _pulsar_flag(command: str) -> argparse.Action:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices[command]._actions if "--pulsar" in a.option_strings)


def test_demo_takes_the_releases_pulsar_start_takes() -> None:
    demo, pulsar = _pulsar_flag("demo"), _pulsar_flag("pulsar")
    assert demo.choices == pulsar.choices and demo.default is pulsar.default is None
    assert {"4.0.7", "4.0", "3.0.7", "3.0"} <= set(demo.choices or ())
    args = build_parser("demo").parse_args(["demo", "--pulsar", "3.0"])
    assert args.pulsar == "3.0"


def test_demo_refuses_an_unknown_release_with_the_known_ones() -> None:
    done = run_lens("demo", "--pulsar", "3.1", "--metrics-port", "0")
    assert done.returncode == 2
    assert "3.0.7" in done.stderr and "4.0.7" in done.stderr
    assert not done.stdout


def test_demo_of_a_release_not_assembled_names_the_assemble_command(tmp_path: Path) -> None:
    """One line, exit 2, and no Pulsar started: the cache here holds no jars at all."""
    env = {"PULSAR_LENS_CACHE_DIR": str(tmp_path / "cache")}
    store = tmp_path / "store"
    done = run_lens(
        "demo", "--pulsar", "3.0", "--metrics-port", "0", "--store", str(store), env=env
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Pulsar 3.0.7 is not assembled" in lines[0], done.stderr
    assert "`pulsar-lens pulsar assemble --pulsar 3.0.7`" in lines[0]
    assert "Starting" not in done.stdout
    assert not (tmp_path / "cache").exists()  # nothing fetched or begun
