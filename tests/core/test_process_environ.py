"""The process environment, read and written by `core.settings` alone: a read-only copy for
the parsers, the environment of a child rendered from it, credentials left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.settings import (
    child_environ,
    duration_seconds,
    process_environ,
    without_credentials_while,
)


def test_process_environ_is_a_read_only_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_LENS_STORE", "/data/one")
    seen = process_environ()
    assert seen["PULSAR_LENS_STORE"] == "/data/one"
    with pytest.raises(TypeError):
        seen["PULSAR_LENS_STORE"] = "/elsewhere"  # type: ignore[index]
    monkeypatch.setenv("PULSAR_LENS_STORE", "/data/two")
    assert seen["PULSAR_LENS_STORE"] == "/data/one"  # a copy, taken when asked


def test_child_environ_leaves_credentials_out_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "t0k3n-for-the-child-test")
    monkeypatch.setenv("PULSAR_LENS_CONFIG", "/etc/lens.toml")
    monkeypatch.setenv("PULSAR_LENS_RETENTION", "2d")
    plain = child_environ(credentials=False, add={"PYTHONUNBUFFERED": "1"}, drop=["HOME"])
    assert "PULSAR_ADMIN_TOKEN" not in plain and "PULSAR_LENS_CONFIG" not in plain
    assert plain["PULSAR_LENS_RETENTION"] == "2d" and plain["PYTHONUNBUFFERED"] == "1"
    assert "HOME" not in plain
    full = child_environ(credentials=True)
    assert full["PULSAR_ADMIN_TOKEN"] == "t0k3n-for-the-child-test"


def inherited() -> dict[str, str]:
    """The environment a child started without one of its own gets."""
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found: dict[str, str] = json.loads(done.stdout)
    return found


def test_without_credentials_while_a_child_inherits_none_and_nothing_else_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "t0k3n-for-the-forkserver-test")
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    before = dict(os.environ)
    with without_credentials_while({"ARROW_DEFAULT_MEMORY_POOL": "system"}):
        child = inherited()
        assert "PULSAR_ADMIN_TOKEN" not in child
        assert child["ARROW_DEFAULT_MEMORY_POOL"] == "system"
        assert dict(os.environ) == before  # this process's own view is left alone
    child = inherited()
    assert child["PULSAR_ADMIN_TOKEN"] == "t0k3n-for-the-forkserver-test"
    assert "ARROW_DEFAULT_MEMORY_POOL" not in child
    assert dict(os.environ) == before


def test_without_credentials_while_never_breaks_a_thread_reading_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A poll thread walks os.environ (requests' proxy lookup) while a forkserver starts."""
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "t0k3n-for-the-thread-test")
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    problems: list[BaseException] = []
    stop = threading.Event()

    def walk() -> None:
        while not stop.is_set():
            try:
                dict(os.environ.items())
            except Exception as exc:  # KeyError, or a dict changed during iteration
                problems.append(exc)
                return

    reader = threading.Thread(target=walk)
    reader.start()
    try:
        for _ in range(2000):
            with without_credentials_while({"ARROW_DEFAULT_MEMORY_POOL": "system"}):
                pass
    finally:
        stop.set()
        reader.join(timeout=30)
    assert problems == []


def test_one_duration_parser_names_the_variable() -> None:
    env = {"PULSAR_LENS_PLUGIN_TIMEOUT": "1m30s", "BAD": "soon", "ZERO": "0s"}
    assert duration_seconds(env, "PULSAR_LENS_PLUGIN_TIMEOUT", 60.0) == 90.0
    assert duration_seconds(env, "UNSET", 60.0) == 60.0
    with pytest.raises(SettingsError, match=r"^BAD: "):
        duration_seconds(env, "BAD", 60.0)
    with pytest.raises(SettingsError, match="ZERO must be longer than zero"):
        duration_seconds(env, "ZERO", 60.0)
