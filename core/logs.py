"""One logging setup for every process: one format, one level variable, secrets redacted.

    PULSAR_LENS_LOG_LEVEL         DEBUG, INFO, WARNING, ERROR or CRITICAL (INFO)
    PULSAR_LENS_CLIENT_LOG_LEVEL  the least level of pulsar-client's own lines that is shown
                                  (WARNING); never below PULSAR_LENS_LOG_LEVEL

Every line reads `time level logger: message`, on stderr, through `pulsar_lens.core.secrets`'
`RedactingFilter`. The C++ library inside pulsar-client logs on its own (INFO lines on
stdout for every connection); `pulsar_client()` routes those lines into Python logging, as
logger `pulsar.client` (core.clientlog), and closes clients still open at exit.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import weakref
from typing import Any, TextIO

from pulsar_lens.core.clientlog import CLIENT_LOGGER, native_logger
from pulsar_lens.core.parts import CLIENT_LEVEL_ENV, LEVEL_ENV, LEVELS, LogSettings, parse_level
from pulsar_lens.core.secrets import RedactingFilter

__all__ = [
    "CLIENT_LEVEL_ENV",
    "FORMAT",
    "LEVELS",
    "LEVEL_ENV",
    "LogSettings",
    "client_logger",
    "formatter",
    "parse_level",
    "pulsar_client",
    "setup_logging",
]
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MSEC_FORMAT = "%s.%03d"  # 2026-01-31 12:00:00.123, as Streamlit writes its own lines

_open_clients: weakref.WeakSet[Any] = weakref.WeakSet()
_clients_lock = threading.Lock()
_close_at_exit_registered = False


class _LensHandler(logging.StreamHandler[TextIO]):
    """The one handler `setup_logging` installs on the root logger (found again by type).

    Without a stream of its own it writes to whatever `sys.stderr` is when a record comes (as
    logging's last-resort handler does), not to the one of the moment it was made, which a
    host such as pytest may have closed since.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream or sys.stderr)
        self._follow_stderr = stream is None

    def setStream(self, stream: TextIO) -> TextIO | None:
        self._follow_stderr = False
        return super().setStream(stream)

    def emit(self, record: logging.LogRecord) -> None:
        if self._follow_stderr:
            self.stream = sys.stderr
        super().emit(record)


def formatter() -> logging.Formatter:
    """The one format: time, level, logger, message."""
    fmt = logging.Formatter(FORMAT)
    fmt.default_msec_format = MSEC_FORMAT
    return fmt


def setup_logging(
    levels: LogSettings | None = None,
    *,
    level: int | None = None,
    stream: TextIO | None = None,
    unless_configured: bool = False,
) -> int:
    """Configure this process's logging; idempotent (a Streamlit script calls it on every run).

    `levels` are the settings' (default INFO, and WARNING for pulsar-client's own lines);
    `level` overrides PULSAR_LENS_LOG_LEVEL (e.g. for `--verbose`). Handlers that others
    installed before (Streamlit's, uvicorn's) get the same format and the redacting filter.
    `unless_configured` leaves a process whose root logger has handlers as it is (as
    `logging.basicConfig` does): a host such as pytest keeps its own.
    Returns the level.
    """
    levels = levels or LogSettings()
    chosen = levels.level if level is None else level
    client_level = levels.client_level
    root = logging.getLogger()
    if unless_configured and root.handlers:
        return root.getEffectiveLevel()
    ours = [h for h in root.handlers if isinstance(h, _LensHandler)]
    if not ours:
        root.addHandler(_LensHandler(stream))
    elif stream is not None:
        ours[0].setStream(stream)
    root.setLevel(chosen)
    # propagated records skip the root logger's level: the client logger needs its own floor
    logging.getLogger(CLIENT_LOGGER).setLevel(max(client_level, chosen))
    for handler in _all_handlers():
        _adopt(handler)
    return chosen


def _all_handlers() -> list[logging.Handler]:
    known = list(logging.root.manager.loggerDict.values())
    loggers = [logging.getLogger(), *(lg for lg in known if isinstance(lg, logging.Logger))]
    return [h for lg in loggers for h in lg.handlers]


def _adopt(handler: logging.Handler) -> None:
    handler.setFormatter(formatter())
    if not any(isinstance(f, RedactingFilter) for f in handler.filters):
        handler.addFilter(RedactingFilter())


def client_logger() -> logging.Logger:
    """The logger that pulsar-client's own lines go to; WARNING and above unless set up."""
    logger = logging.getLogger(CLIENT_LOGGER)
    if logger.level == logging.NOTSET:  # setup_logging() not called: keep the library quiet
        logger.setLevel(LogSettings().client_level)
    return logger


def pulsar_client(service_url: str, **options: Any) -> Any:
    """A `pulsar.Client` whose library lines go through `client_logger()` (by the pipe of
    core.clientlog, filtered at that logger's level by the library itself).

    `options` are `pulsar.Client`'s keyword arguments; a `logger` given there wins. The
    client is closed at exit if it is still open then.
    """
    import pulsar

    global _close_at_exit_registered
    if "logger" not in options:
        options["logger"] = native_logger(client_logger().getEffectiveLevel())
    client = pulsar.Client(service_url, **options)
    with _clients_lock:
        _open_clients.add(client)
        if not _close_at_exit_registered:
            atexit.register(close_open_clients)
            _close_at_exit_registered = True
    return client


def close_open_clients() -> None:
    """Close every client `pulsar_client()` made that is still open (closing twice is harmless)."""
    with _clients_lock:
        clients = list(_open_clients)
        _open_clients.clear()
    for client in clients:
        try:
            client.close()
        except Exception:  # already closed, or the broker is gone: nothing left to release
            logging.getLogger(__name__).debug("closing a pulsar client at exit failed")
