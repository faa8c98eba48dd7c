"""The process environment, read and written by `core.settings` alone: a read-only copy for
the parsers, the environment of a child rendered from it, credentials left out."""

from __future__ import annotations

import os

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


def test_without_credentials_while_restores_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "t0k3n-for-the-forkserver-test")
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    before = dict(os.environ)
    with without_credentials_while({"ARROW_DEFAULT_MEMORY_POOL": "system"}):
        assert "PULSAR_ADMIN_TOKEN" not in os.environ
        assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    assert dict(os.environ) == before


def test_one_duration_parser_names_the_variable() -> None:
    env = {"PULSAR_LENS_PLUGIN_TIMEOUT": "1m30s", "BAD": "soon", "ZERO": "0s"}
    assert duration_seconds(env, "PULSAR_LENS_PLUGIN_TIMEOUT", 60.0) == 90.0
    assert duration_seconds(env, "UNSET", 60.0) == 60.0
    with pytest.raises(SettingsError, match=r"^BAD: "):
        duration_seconds(env, "BAD", 60.0)
    with pytest.raises(SettingsError, match="ZERO must be longer than zero"):
        duration_seconds(env, "ZERO", 60.0)
