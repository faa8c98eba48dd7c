"""examples/hello-plugin installs with pip and is found through its entry point."""

from __future__ import annotations

import fcntl
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.registry import discover

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello-plugin"
DIST = "hello-pulsar-lens"


def _installed_is_current() -> bool:
    """Whether the installed copy has exactly the example's sources (skip the reinstall)."""
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        return False
    installed = {str(f): f for f in dist.files or () if str(f).startswith("hello_pulsar_lens/")}
    sources = sorted((HELLO / "hello_pulsar_lens").glob("*.py"))
    for source in sources:
        entry = installed.get(f"hello_pulsar_lens/{source.name}")
        if entry is None or Path(str(dist.locate_file(entry))).read_bytes() != source.read_bytes():
            return False
    return bool(sources) and dist.version == "0.1.0"


@pytest.fixture(scope="module")
def hello_installed() -> Iterator[None]:
    """Install the example into this virtualenv (no deps, no build isolation), once."""
    lock_path = ROOT / ".venv" / ".hello-plugin.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed_is_current():
            command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
            command += ["--no-build-isolation", "--force-reinstall", str(HELLO)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
        fcntl.flock(lock, fcntl.LOCK_UN)
    importlib.invalidate_caches()
    yield


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}


def test_hello_plugin_found_through_its_entry_point(hello_installed: None) -> None:
    registry = discover(builtins=False, plugin_dirs=())
    loaded = registry.get("hello-namespaces")
    assert loaded.source == (
        "entry point hello = hello_pulsar_lens:HelloNamespaces (hello-pulsar-lens 0.1.0)"
    )
    assert loaded.version == "0.1.0"
    assert not [f for f in registry.failures if "hello" in f.source]


def test_hello_plugin_listed_by_the_cli(hello_installed: None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "plugins", "--json"],
        cwd=ROOT,
        env=_env(),
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
            "source": "entry point hello = hello_pulsar_lens:HelloNamespaces "
            "(hello-pulsar-lens 0.1.0)",
        }
    ]


def test_hello_plugin_own_tests_pass(hello_installed: None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=HELLO,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
