"""examples/hello-plugin installs with pip and is found through its entry point.

It is installed into a throwaway directory (`pip install --target`) that only these tests put on
the path, never into the project's virtualenv: running the suite must not add an analysis to
the dashboard a developer starts afterwards.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_lens.plugins.registry import discover
from tests.lens_cli import clean_environ

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello-plugin"
DIST = "hello-pulsar-lens"


@pytest.fixture(scope="module")
def hello_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example installed (no deps, no build isolation) into a directory of its own."""
    target = tmp_path_factory.mktemp("hello-site")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    command += ["--no-compile", "--target", str(target), str(HELLO)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    yield target


@pytest.fixture
def hello_on_path(hello_target: Path) -> Iterator[None]:
    """The throwaway install visible to this process for one test, then gone again."""
    sys.path.insert(0, str(hello_target))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(hello_target))
        for module in [m for m in sys.modules if m.split(".")[0] == "hello_pulsar_lens"]:
            del sys.modules[module]
        importlib.invalidate_caches()


def _env(target: Path) -> dict[str, str]:
    env = clean_environ()
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
    return env


def test_hello_is_not_installed_in_the_project_environment() -> None:
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution(DIST)


def test_hello_plugin_found_through_its_entry_point(hello_on_path: None) -> None:
    registry = discover(builtins=False, plugin_dirs=())
    loaded = registry.get("hello-namespaces")
    assert loaded.source == (
        "entry point hello = hello_pulsar_lens:HelloNamespaces (hello-pulsar-lens 0.1.0)"
    )
    assert loaded.version == "0.1.0"
    assert not [f for f in registry.failures if "hello" in f.source]


def test_hello_plugin_listed_by_the_cli(hello_target: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pulsar_lens.cli.main", "plugins", "--json"],
        cwd=ROOT,
        env=_env(hello_target),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    hello = [p for p in listing["loaded"] if p["name"] == "hello-namespaces"]
    assert hello == [
        {
            "name": "hello-namespaces",
            "title": "Hello: namespaces",
            "version": "0.1.0",
            "engine": "light",
            "api_version": 1,
            "requires": [],
            "source": "entry point hello = hello_pulsar_lens:HelloNamespaces "
            "(hello-pulsar-lens 0.1.0)",
        }
    ]


def test_hello_plugin_own_tests_pass(hello_target: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=HELLO,
        env=_env(hello_target),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
