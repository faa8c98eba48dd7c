"""How serve starts the dashboard: login secrets by private file, never by argv or env."""

from __future__ import annotations

import datetime as dt
import importlib.util
import logging
import stat
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from pulsar_lens.cli.dashboard_access import streamlit_args
from pulsar_lens.cli.serve_cmd import streamlit_child
from pulsar_lens.core import oidc
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.logs import FORMAT
from pulsar_lens.core.settings import Settings

OIDC_ENV = {
    oidc.METADATA_ENV: "https://idp.example.com/.well-known/openid-configuration",
    oidc.CLIENT_ID_ENV: "pulsar-lens",
    oidc.CLIENT_SECRET_ENV: "client-secret-Zq81",
    oidc.COOKIE_SECRET_ENV: "cookie-secret-0123456789",
}


def option(argv: Sequence[str], name: str) -> str | None:
    given = list(argv)
    return given[given.index(name) + 1] if name in given else None


def test_dashboard_with_a_login_reads_its_secrets_from_a_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in OIDC_ENV.items():
        monkeypatch.setenv(name, value)
    child = streamlit_child(
        tmp_path,
        dt.timedelta(seconds=5),
        address="127.0.0.1",
        port=8765,
        settings=Settings.from_env(),
    )
    secrets_file = option(child.argv, "--secrets.files")
    assert secrets_file is not None
    path = Path(secrets_file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    auth = tomllib.loads(path.read_text())["auth"]
    assert auth["client_secret"] == "client-secret-Zq81"
    assert auth["redirect_uri"] == "http://127.0.0.1:8765/oauth2callback"
    child_env = child.env or {}
    assert not any(name in child_env for name in oidc.ALL_VARS)
    shown = " ".join(child.argv) + " ".join(child_env.values())
    assert "client-secret-Zq81" not in shown and "cookie-secret-0123456789" not in shown


def test_dashboard_without_a_login_gets_no_secrets_file(tmp_path: Path) -> None:
    child = streamlit_child(
        tmp_path,
        dt.timedelta(seconds=5),
        address="127.0.0.1",
        port=8765,
        settings=Settings.from_env(),
    )
    assert "--secrets.files" not in child.argv


def test_streamlit_logs_in_the_one_format_and_level() -> None:
    args = streamlit_args(
        "127.0.0.1", 8501, Settings.from_env({"PULSAR_LENS_LOG_LEVEL": "warning"})
    )
    assert option(args, "--logger.messageFormat") == FORMAT
    assert option(args, "--logger.level") == "warning"


def test_open_dashboard_on_every_address_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pulsar_lens.cli.dashboard_access"):
        streamlit_args("0.0.0.0", 8501, Settings.from_env({}))
    assert any("has no login" in r.getMessage() for r in caplog.records)


def test_login_without_its_http_client_fails_at_start_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("httpx", "httpx2") else real(name, *a),
    )
    with pytest.raises(SettingsError, match=r"pip install 'streamlit\[auth\]'"):
        streamlit_args("127.0.0.1", 8501, Settings.from_env(OIDC_ENV))
