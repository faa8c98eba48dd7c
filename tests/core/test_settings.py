"""Settings from PULSAR_* variables: defaults, durations, errors, and tokens that never print."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path

import pytest

from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.settings import Settings, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("2m", 120),
        ("1h", 3600),
        ("7d", 604800),
        ("1h30m", 5400),
        ("250ms", 0.25),
        ("45", 45),
        ("1.5s", 1.5),
        (" 10S ", 10),
    ],
)
def test_parse_duration_accepts_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "abc", "10x", "-5s", "nan", "inf", "s", "1h 30m"])
def test_parse_duration_rejects_malformed_values(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(30, "30s"), (5400, "1h30m"), (604800, "7d"), (0.25, "250ms"), (1.5, "1s500ms")],
)
def test_format_duration_spells_the_shortest_form(seconds: float, text: str) -> None:
    assert format_duration(dt.timedelta(seconds=seconds)) == text


def test_settings_defaults_without_environment() -> None:
    settings = Settings.from_env({})
    assert settings.admin_url is None
    assert settings.store_dir == Path("var/store")
    assert settings.poll_interval == dt.timedelta(seconds=30)
    assert settings.retention == dt.timedelta(days=7)
    assert settings.plugin_dirs == ()
    assert settings.spark_master == "local[2]"
    assert settings.spark.java_options == ""
    assert settings.admin_token is None


def test_settings_read_every_variable() -> None:
    env = {
        "PULSAR_ADMIN_URL": "http://broker:8080/",
        "PULSAR_SERVICE_URL": "pulsar://broker:6650",
        "PULSAR_LENS_STORE": "/data/store",
        "PULSAR_LENS_POLL_INTERVAL": "2m",
        "PULSAR_LENS_RETENTION": "30d",
        "PULSAR_LENS_PLUGIN_DIRS": os.pathsep.join(["/plugins", "", "/more"]),
        "PULSAR_LENS_SPARK_MASTER": "spark://master:7077",
        "PULSAR_LENS_SPARK_JAVA_OPTIONS": " -XX:TieredStopAtLevel=1 -Dx=y ",
        "PULSAR_ADMIN_TOKEN_FILE": "/run/token",
    }
    settings = Settings.from_env(env)
    assert settings.admin_url == "http://broker:8080"
    assert settings.service_url == "pulsar://broker:6650"
    assert settings.store_dir == Path("/data/store")
    assert settings.poll_interval == dt.timedelta(minutes=2)
    assert settings.retention == dt.timedelta(days=30)
    assert settings.plugin_dirs == (Path("/plugins"), Path("/more"))
    assert settings.spark_master == "spark://master:7077"
    assert settings.spark.java_options == "-XX:TieredStopAtLevel=1 -Dx=y"
    assert settings.admin_token_file == Path("/run/token")


def test_settings_read_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_LENS_RETENTION", "1d")
    assert Settings.from_env().retention == dt.timedelta(days=1)


def test_settings_treat_empty_variables_as_unset() -> None:
    settings = Settings.from_env({"PULSAR_ADMIN_URL": " ", "PULSAR_LENS_RETENTION": ""})
    assert settings.admin_url is None
    assert settings.retention == dt.timedelta(days=7)


@pytest.mark.parametrize("value", ["soon", "0s"])
def test_settings_name_the_variable_of_a_bad_duration(value: str) -> None:
    with pytest.raises(SettingsError, match="PULSAR_LENS_POLL_INTERVAL"):
        Settings.from_env({"PULSAR_LENS_POLL_INTERVAL": value})


def test_settings_never_print_the_token() -> None:
    settings = Settings.from_env({"PULSAR_ADMIN_TOKEN": "s3cr3t-token"})
    assert settings.admin_token is not None
    assert settings.admin_token.reveal() == "s3cr3t-token"
    shown = [
        repr(settings),
        str(settings),
        repr(dataclasses.asdict(settings)),
        f"{settings.admin_token}",
        repr(settings.admin_token),
    ]
    assert all("s3cr3t" not in text for text in shown)


def test_secret_compares_by_value() -> None:
    assert Secret("a") == Secret("a") != Secret("b")


@pytest.mark.parametrize(
    ("text", "expected"), [("1", True), ("on", True), ("0", False), ("", False)]
)
def test_settings_key_sampling_flag(text: str, expected: bool) -> None:
    assert Settings.from_env({"PULSAR_LENS_KEY_SAMPLING": text}).key_sampling is expected


def test_settings_key_sampling_rejects_other_words() -> None:
    with pytest.raises(SettingsError, match="PULSAR_LENS_KEY_SAMPLING"):
        Settings.from_env({"PULSAR_LENS_KEY_SAMPLING": "maybe"})


def test_settings_answer_cap_reads_a_broker_of_half_a_100k_topic_cluster() -> None:
    # a broker's broker-stats/topics at the measured bytes a topic: 100,000 topics on two
    # brokers is 50,000 a broker, which the cap of 64 MiB cut
    from pulsar_lens.core.parts import BULK_BYTES_PER_TOPIC

    cap = Settings.from_env({}).max_response
    assert cap == 256 * 1024 * 1024
    assert cap > 50_000 * BULK_BYTES_PER_TOPIC
    assert Settings.from_env({"PULSAR_LENS_MAX_RESPONSE": "64"}).max_response == 64 * 1024 * 1024


def test_settings_poll_deadline_not_set_follows_a_longer_interval() -> None:
    settings = Settings.from_env({})
    assert settings.poll_deadline_at(dt.timedelta(seconds=30)) == dt.timedelta(minutes=2)
    assert settings.poll_deadline_at(dt.timedelta(minutes=30)) == dt.timedelta(minutes=30)
    slow = Settings.from_env({"PULSAR_LENS_POLL_INTERVAL": "20m"})
    assert slow.poll_deadline_at(slow.poll_interval) == dt.timedelta(minutes=20)


def test_settings_poll_deadline_set_is_kept_whatever_the_interval(tmp_path: Path) -> None:
    from_env = Settings.from_env({"PULSAR_LENS_POLL_DEADLINE": "2m"})
    assert from_env.poll_deadline_at(dt.timedelta(minutes=30)) == dt.timedelta(minutes=2)
    config = tmp_path / "lens.toml"
    config.write_text('poll_deadline = "5m"\n')
    from_file = Settings.from_env({}, config=config)
    assert from_file.poll_deadline_at(dt.timedelta(minutes=30)) == dt.timedelta(minutes=5)
    built = Settings(poll_deadline=dt.timedelta(minutes=3))  # no origins: set when not default
    assert built.poll_deadline_at(dt.timedelta(minutes=30)) == dt.timedelta(minutes=3)
