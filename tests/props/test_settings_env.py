"""Settings.from_env over generated environments: it works, or raises SettingsError naming
the variable; a secret's value is never quoted; what it accepts is within bounds."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from pulsar_lens.core.config import CLUSTER_ENV, CONFIG_ENV, GLOBAL_ENV
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.settings import MAX_DETAIL_BUDGET, MAX_DURATION, Settings
from tests.props.strategies import HUGE_NUMBERS, NUMBER_TEXTS, props, weird_names

TOKEN = "tok-Zq8v-secret-value"
DURATIONS = ("PULSAR_LENS_POLL_INTERVAL", "PULSAR_LENS_RETENTION", "PULSAR_LENS_POLL_DEADLINE")
VARIABLES = (*GLOBAL_ENV.values(), *CLUSTER_ENV.values(), CONFIG_ENV)


def _env_text(text: str) -> bool:
    """What an environment variable can hold: no NUL; only the surrogates of non-UTF-8 bytes."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return "\0" not in text


values = st.one_of(
    st.sampled_from(
        ["30s", "2m", "1h30m", "7d", "250ms", "0", "0s", "-1s", "99999d", "1e3", "nan", "3650d"]
    ),
    st.sampled_from([str(n) for n in HUGE_NUMBERS] + list(NUMBER_TEXTS)),
    st.sampled_from(["1", "0", "true", "off", "maybe", "²", "٣", "１０", " 5 ", "500", "100001"]),
    st.sampled_from(
        ["http://localhost:8080", "https://h:0", "http://[::1", "ftp://x", "http://h:99999", "h"]
    ),
    st.sampled_from(["/nonexistent/settings.toml", "/proc/self", "/", "./var/store"]),
    weird_names.filter(_env_text),
    st.integers(0, 10**6).map(lambda n: f"{n}s"),
)
SECRETS = ("PULSAR_ADMIN_TOKEN", "PULSAR_LENS_OAUTH2_PRIVATE_KEY")
environments = st.builds(
    lambda env, secrets: {**env, **dict.fromkeys(secrets, TOKEN)},
    st.dictionaries(st.sampled_from(VARIABLES), values, max_size=4),
    st.sets(st.sampled_from(SECRETS), max_size=2),
)


@props(300)
@given(environments)
@example({"PULSAR_LENS_DETAIL_BUDGET": "²"}).via("a digit int() does not read")
@example({"PULSAR_LENS_POLL_INTERVAL": "99999999999999999999d"}).via("longer than ten years")
@example({"PULSAR_ADMIN_URL": "http://[::1"}).via("a URL urlsplit refuses")
@example({"PULSAR_ADMIN_TOKEN": " "}).via("a blank token")
@example({"PULSAR_LENS_CONFIG": "/nonexistent/settings.toml"}).via("a missing settings file")
def test_settings_from_env_work_or_name_the_variable(env: dict[str, str]) -> None:
    assume(_whole_oauth2(env))  # half of one: see the test below
    try:
        settings = Settings.from_env(env)
    except SettingsError as exc:
        message = str(exc)
        assert any(name in message for name in env), (env, message)
        assert TOKEN not in message
        return
    for value in (settings.poll_interval, settings.retention, settings.poll_deadline):
        assert dt.timedelta() < value <= MAX_DURATION
    assert 0 <= settings.detail_budget <= MAX_DETAIL_BUDGET
    assert TOKEN not in repr(settings)


PRIVATE_KEY = "PULSAR_LENS_OAUTH2_PRIVATE_KEY"


def _whole_oauth2(env: dict[str, str]) -> bool:
    """The OAuth2 credentials file a client needs, or no OAuth2 variable at all."""
    return PRIVATE_KEY in env or not any(n.startswith("PULSAR_LENS_OAUTH2_") for n in env)


@pytest.mark.parametrize(
    "name",
    ["PULSAR_LENS_OAUTH2_ISSUER_URL", "PULSAR_LENS_OAUTH2_AUDIENCE", "PULSAR_LENS_OAUTH2_SCOPE"],
)
def test_half_an_oauth2_setting_names_the_missing_variable(name: str) -> None:
    """OAuth2 settings without the credentials file, from the environment: the message must
    name the variable to set, not the settings file's key (clusters[0].oauth2)."""
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({name: "http://issuer"})
    assert PRIVATE_KEY in str(refused.value), str(refused.value)
