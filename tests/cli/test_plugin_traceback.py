"""A drop-in's `analyze` that divides by zero: `pulsar-lens analyze` names the plugin, the phase
and the file and line of the author's code in one line, and prints the author's traceback with
-v, whether the failure happens now (in the plugin worker) or was stored when the collector
analysed the snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_lens.core.store import Store
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.cli.test_plugins_cmd import stalled_store
from tests.crashing_plugin import SLUG, raising_line, write_plugin
from tests.lens_cli import run_lens

TRACEBACK = "Traceback (most recent call last):"


@pytest.fixture(params=["now", "stored"])
def failing(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    """(the drop-in's file, the store): analysed now by the command, or stored before."""
    plugin = write_plugin(tmp_path / "plugins")
    store = stalled_store(tmp_path / "store")
    if request.param == "stored":
        loaded = discover(plugin_dirs=[plugin.parent]).get(SLUG)
        (outcome,) = compute_results(Store(store), [loaded], results=ResultStore(store))
        assert outcome.status == "failed"
    return plugin, store


def _analyze(plugin: Path, store: Path, *flags: str, before: bool = False) -> str:
    args = ["analyze", SLUG, "--store", str(store)]
    done = run_lens(
        *(["-v", *args] if before else [*args, *flags]),
        env={"PULSAR_LENS_PLUGIN_DIRS": str(plugin.parent)},
    )
    assert done.returncode == 2, done.stderr
    return done.stderr


def _message(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("pulsar-lens: ")]
    return line


def test_without_v_one_line_names_plugin_phase_file_and_line(failing: tuple[Path, Path]) -> None:
    plugin, store = failing
    stderr = _analyze(plugin, store)
    line = _message(stderr)
    assert line.startswith(
        f"pulsar-lens: plugin '{SLUG}' failed: analyze raised ZeroDivisionError: "
        f"division by zero (at {plugin}:{raising_line()})"
    ), line
    assert line.endswith("; -v prints the traceback")
    assert TRACEBACK not in stderr


@pytest.mark.parametrize("before", [False, True], ids=["after", "before"])
def test_with_v_the_authors_traceback_is_printed(failing: tuple[Path, Path], before: bool) -> None:
    plugin, store = failing
    stderr = _analyze(plugin, store, "-v", before=before)
    assert f"(at {plugin}:{raising_line()})" in _message(stderr)
    traceback = stderr[stderr.index(TRACEBACK) :]
    assert f'File "{plugin}", line {raising_line()}, in share' in traceback
    assert "return total / parts" in traceback
    assert traceback.rstrip().endswith("ZeroDivisionError: division by zero")
    # it starts at the author's code: the product's frames that called it are not shown
    frames = [line for line in traceback.splitlines() if line.lstrip().startswith("File ")]
    assert len(frames) == 2, frames
    assert all(str(plugin) in frame for frame in frames), frames
