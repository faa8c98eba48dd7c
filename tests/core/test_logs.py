"""core.logs: one format, the level variable, redaction, and the pulsar-client logger's floor."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import pytest

from pulsar_lens.core import logs
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.secrets import RedactingFilter, Secret

LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<msg>.*)$"
)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Each test starts without our handler and leaves the root logger as it found it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    client = logging.getLogger(logs.CLIENT_LOGGER)
    client_level = client.level
    before = [(h, h.formatter, list(h.filters)) for h in logs._all_handlers()]
    for handler in [h for h in root.handlers if isinstance(h, logs._LensHandler)]:
        root.removeHandler(handler)
    yield
    root.handlers[:] = handlers
    for handler, formatter, filters in before:  # pytest's own handlers, among others
        handler.setFormatter(formatter)
        handler.filters[:] = filters
    root.setLevel(level)
    client.setLevel(client_level)


def lines(stream: io.StringIO) -> list[re.Match[str]]:
    found = [LINE.match(line) for line in stream.getvalue().splitlines()]
    assert all(found), stream.getvalue()
    return [m for m in found if m is not None]


def test_parse_level_accepts_names_in_any_case() -> None:
    assert logs.parse_level(" debug ") == logging.DEBUG
    assert logs.parse_level("Warn") == logging.WARNING
    assert logs.parse_level("ERROR") == logging.ERROR


def test_parse_level_rejects_unknown_names_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"PULSAR_LENS_LOG_LEVEL must be one of DEBUG.*'loud'"):
        logs.parse_level("loud")
    with pytest.raises(SettingsError, match="PULSAR_LENS_LOG_LEVEL"):
        logs.setup_logging(logs.LogSettings.from_env({"PULSAR_LENS_LOG_LEVEL": "10"}))


def test_setup_logging_defaults_to_info() -> None:
    stream = io.StringIO()
    assert logs.setup_logging(logs.LogSettings.from_env({}), stream=stream) == logging.INFO
    logging.getLogger("tests.logs").debug("hidden")
    logging.getLogger("tests.logs").info("shown %d", 1)
    [line] = lines(stream)
    assert (line["level"], line["logger"], line["msg"]) == ("INFO", "tests.logs", "shown 1")


def test_setup_logging_reads_the_level_variable() -> None:
    stream = io.StringIO()
    logs.setup_logging(
        logs.LogSettings.from_env({"PULSAR_LENS_LOG_LEVEL": "warning"}), stream=stream
    )
    logging.getLogger("tests.logs").info("hidden")
    logging.getLogger("tests.logs").warning("shown")
    assert [m["msg"] for m in lines(stream)] == ["shown"]


def test_setup_logging_is_idempotent() -> None:
    stream = io.StringIO()
    for _ in range(3):
        logs.setup_logging(logs.LogSettings.from_env({}), stream=stream)
    logging.getLogger("tests.logs").info("once")
    assert [m["msg"] for m in lines(stream)] == ["once"]
    assert sum(isinstance(h, logs._LensHandler) for h in logging.getLogger().handlers) == 1


def test_setup_logging_redacts_secrets_and_keeps_one_line() -> None:
    stream = io.StringIO()
    logs.setup_logging(logs.LogSettings.from_env({}), stream=stream)
    token = Secret("s3cr3t-token-value")
    logging.getLogger("tests.logs").info("token %s\nforged line", token.reveal())
    [line] = lines(stream)
    assert line["msg"] == "token ***\\nforged line"


def test_setup_logging_adopts_handlers_installed_before() -> None:
    stream = io.StringIO()
    other = logging.getLogger("tests.logs.other")
    handler = logging.StreamHandler(stream)
    other.addHandler(handler)
    other.propagate = False
    try:
        logs.setup_logging(logs.LogSettings.from_env({}), stream=io.StringIO())
        other.warning("bearer: Bearer abc.def.ghi")
    finally:
        other.removeHandler(handler)
        other.propagate = True
    [line] = lines(stream)
    assert line["msg"] == "bearer: Bearer ***"
    assert any(isinstance(f, RedactingFilter) for f in handler.filters)


def test_client_logger_floor_is_warning_and_never_below_the_level() -> None:
    logs.setup_logging(logs.LogSettings.from_env({}), stream=io.StringIO())
    assert logging.getLogger(logs.CLIENT_LOGGER).level == logging.WARNING
    logs.setup_logging(
        logs.LogSettings.from_env({"PULSAR_LENS_LOG_LEVEL": "ERROR"}), stream=io.StringIO()
    )
    assert logging.getLogger(logs.CLIENT_LOGGER).level == logging.ERROR
    env = {"PULSAR_LENS_CLIENT_LOG_LEVEL": "info"}
    logs.setup_logging(logs.LogSettings.from_env(env), stream=io.StringIO())
    assert logging.getLogger(logs.CLIENT_LOGGER).level == logging.INFO


def test_client_logger_stays_quiet_without_setup() -> None:
    logging.getLogger(logs.CLIENT_LOGGER).setLevel(logging.NOTSET)
    assert logs.client_logger().level == logging.WARNING


def test_setup_logging_unless_configured_leaves_a_configured_process_alone() -> None:
    root = logging.getLogger()
    host = logging.StreamHandler(io.StringIO())
    root.addHandler(host)
    try:
        logs.setup_logging(
            logs.LogSettings.from_env({}), stream=io.StringIO(), unless_configured=True
        )
        assert not any(isinstance(h, logs._LensHandler) for h in root.handlers)
        assert not any(isinstance(f, RedactingFilter) for f in host.filters)
    finally:
        root.removeHandler(host)
