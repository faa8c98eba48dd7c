"""core.oidc: the login settings from the environment and the secrets.toml Streamlit reads."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.core import oidc
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.secrets import redact

ENV = {
    oidc.METADATA_ENV: "https://idp.example.com/.well-known/openid-configuration",
    oidc.CLIENT_ID_ENV: "pulsar-lens",
    oidc.CLIENT_SECRET_ENV: "client-secret-Zq81",
}


def test_no_variables_means_no_login() -> None:
    assert oidc.OidcSettings.from_env({}, address="127.0.0.1", port=8501) is None


def test_some_variables_name_the_missing_ones() -> None:
    partial = {oidc.CLIENT_ID_ENV: "pulsar-lens"}
    with pytest.raises(SettingsError, match=r"PULSAR_LENS_OIDC_METADATA_URL, .*CLIENT_SECRET miss"):
        oidc.OidcSettings.from_env(partial, address="127.0.0.1", port=8501)


def test_redirect_defaults_to_the_bind_address_and_port() -> None:
    settings = oidc.OidcSettings.from_env(ENV, address="127.0.0.1", port=8600)
    assert settings is not None
    assert settings.redirect_uri == "http://127.0.0.1:8600/oauth2callback"


def test_wildcard_address_needs_an_explicit_redirect() -> None:
    with pytest.raises(SettingsError, match="PULSAR_LENS_OIDC_REDIRECT_URI is needed"):
        oidc.OidcSettings.from_env(ENV, address="0.0.0.0", port=8501)
    env = {**ENV, oidc.REDIRECT_ENV: "https://lens.example.com/oauth2callback"}
    settings = oidc.OidcSettings.from_env(env, address="0.0.0.0", port=8501)
    assert settings is not None and settings.redirect_uri == env[oidc.REDIRECT_ENV]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (oidc.METADATA_ENV, "idp.example.com/.well-known", "absolute http"),
        (oidc.REDIRECT_ENV, "https://lens.example.com/callback", "must end with /oauth2callback"),
        (oidc.COOKIE_SECRET_ENV, "short", "at least 16 characters"),
    ],
)
def test_malformed_values_are_refused(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=f"{name}.*{message}"):
        oidc.OidcSettings.from_env({**ENV, name: value}, address="127.0.0.1", port=8501)


def test_secrets_never_show_themselves() -> None:
    settings = oidc.OidcSettings.from_env(ENV, address="127.0.0.1", port=8501)
    assert settings is not None
    assert "client-secret-Zq81" not in repr(settings)
    assert settings.cookie_secret.reveal() not in repr(settings)
    assert redact("secret is client-secret-Zq81") == "secret is ***"


def test_random_cookie_secret_differs_at_each_start() -> None:
    first = oidc.OidcSettings.from_env(ENV, address="127.0.0.1", port=8501)
    second = oidc.OidcSettings.from_env(ENV, address="127.0.0.1", port=8501)
    assert first is not None and second is not None
    assert len(first.cookie_secret.reveal()) >= oidc.MIN_COOKIE_SECRET
    assert first.cookie_secret != second.cookie_secret


def test_secrets_file_is_streamlits_auth_table_readable_by_its_owner_only(tmp_path: Path) -> None:
    env = {**ENV, oidc.COOKIE_SECRET_ENV: "cookie-secret-0123456789"}
    settings = oidc.OidcSettings.from_env(env, address="127.0.0.1", port=8501)
    assert settings is not None
    path = oidc.write_secrets_file(settings, folder=tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tomllib.loads(path.read_text()) == {
        "auth": {
            "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
            "cookie_secret": "cookie-secret-0123456789",
            "client_id": "pulsar-lens",
            "client_secret": "client-secret-Zq81",
            "server_metadata_url": ENV[oidc.METADATA_ENV],
        }
    }


def test_default_folder_is_private(tmp_path: Path) -> None:
    settings = oidc.OidcSettings.from_env(ENV, address="127.0.0.1", port=8501)
    assert settings is not None
    path = oidc.write_secrets_file(settings)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))
def test_toml_string_round_trips_any_text(value: str) -> None:
    assert tomllib.loads(f"v = {oidc.toml_string(value)}") == {"v": value}
