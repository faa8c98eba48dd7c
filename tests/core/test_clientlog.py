"""pulsar_lens.core.clientlog: the library's lines, parsed and logged again at their level."""

from __future__ import annotations

import logging

import pytest

from pulsar_lens.core import clientlog


def test_emit_parses_the_library_format(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.clientlog")
    with caplog.at_level(logging.DEBUG, logger="tests.clientlog"):
        clientlog.emit(logger, "2026-01-31 12:00:00.123 WARN  [1401] ClientConnection:1545 | busy ")
        clientlog.emit(logger, "2026-01-31 12:00:00.124 ERROR [1401] ConsumerImpl:300 | failed")
        clientlog.emit(logger, "2026-01-31 12:00:00.125 INFO  [1401] ConnectionPool:85 | created")
        clientlog.emit(logger, "not the library's format")
        clientlog.emit(logger, "   ")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "busy"),
        ("ERROR", "failed"),
        ("INFO", "created"),
        ("WARNING", "not the library's format"),
    ]


def test_pipe_logs_what_is_written_into_it(caplog: pytest.LogCaptureFixture) -> None:
    pipe = clientlog.client_log_pipe()
    with caplog.at_level(logging.WARNING, logger=clientlog.CLIENT_LOGGER):
        with open(pipe.path, "w") as out:  # as the library's FileLogger does
            out.write("2026-01-31 12:00:00.123 WARN  [1] HandlerBase:1 | through the pipe\n")
        pipe.drain()
    assert "through the pipe" in [r.getMessage() for r in caplog.records]
    assert pipe.pending() == 0


@pytest.mark.parametrize(
    ("level", "native"),
    [(logging.DEBUG, "Debug"), (logging.INFO, "Info"), (logging.WARNING, "Warn"), (50, "Error")],
)
def test_native_logger_takes_the_nearest_library_level(level: int, native: str) -> None:
    import pulsar

    logger = clientlog.native_logger(level)
    assert isinstance(logger, pulsar.FileLogger)
    assert logger.log_level == getattr(pulsar.LoggerLevel, native)
    assert logger.log_file == clientlog.client_log_pipe().path
