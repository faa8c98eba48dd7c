"""pulsar-client's C++ log lines, carried into Python logging through a pipe.

pulsar-client can call a Python `logging.Logger` from its C++ threads, but then every line
of every level crosses into Python (nine DEBUG calls per message received, filtered only
there), and a process exiting while a C++ thread logs may abort ("terminate called without
an active exception", pulsar-client-python issue 256; seen here about once in eight runs).
So the library writes instead with its own `FileLogger`, filtered at its own level, into a
FIFO that one daemon thread reads: each line is logged again as logger `pulsar.client`, at
its level, in the one format. No Python code runs on the library's threads.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import re
import shutil
import struct
import tempfile
import termios
import threading
import time
from typing import Any

CLIENT_LOGGER = "pulsar.client"
DRAIN_SECONDS = 2.0
# 2026-01-31 12:00:00.123 WARN  [140114371931008] ConsumerImpl:191 | the message
_NATIVE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+)\s+\[[^\]]*\] (?P<source>\S+) \| (?P<msg>.*)$")
_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING}

_pipe: ClientLogPipe | None = None
_pipe_lock = threading.Lock()


class ClientLogPipe:
    """A FIFO in a private folder, and the daemon thread that logs what arrives in it."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="pulsar-lens-clientlog-")
        self.path = os.path.join(self.folder, "pulsar-client.log")
        os.mkfifo(self.path, 0o600)
        # read and write: opening for writing never blocks, and reading never sees EOF
        self._fd = os.open(self.path, os.O_RDWR)
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="pulsar-client-log", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        logger = logging.getLogger(CLIENT_LOGGER)
        with open(self._fd, "rb", buffering=0, closefd=False) as raw:
            while True:
                self._idle.set()
                line = raw.readline()
                self._idle.clear()
                if not line:
                    return
                try:
                    emit(logger, line.decode("utf-8", "replace").rstrip("\n"))
                except Exception:  # one unreadable line must not end the pump
                    continue

    def pending(self) -> int:
        """Bytes written to the pipe and not read yet."""
        answer = fcntl.ioctl(self._fd, termios.FIONREAD, struct.pack("i", 0))
        count: int = struct.unpack("i", answer)[0]
        return count

    def drain(self, timeout: float = DRAIN_SECONDS) -> None:
        """Wait (at most `timeout` s) until every line written so far has been logged."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pending() == 0 and self._idle.wait(0.05) and self.pending() == 0:
                return
            time.sleep(0.01)

    def remove(self) -> None:
        """Drain, then remove the FIFO's folder (open ends stay valid until exit)."""
        self.drain()
        shutil.rmtree(self.folder, ignore_errors=True)


def emit(logger: logging.Logger, line: str) -> None:
    """Log one line of the library's format at its level; other text as it is, at WARNING."""
    match = _NATIVE.match(line)
    if match is None:
        if line.strip():
            logger.warning("%s", line)
        return
    level = _LEVELS.get(match["level"], logging.ERROR)
    logger.log(level, "%s", match["msg"].rstrip())


def client_log_pipe() -> ClientLogPipe:
    """The process's one pipe, made on first use and removed at exit."""
    global _pipe
    with _pipe_lock:
        if _pipe is None:
            _pipe = ClientLogPipe()
            atexit.register(_pipe.remove)
        return _pipe


def native_logger(level: int) -> Any:
    """A `pulsar.FileLogger` writing into the pipe at the library level nearest `level`."""
    import pulsar

    names = pulsar.LoggerLevel
    if level <= logging.DEBUG:
        native = names.Debug
    elif level <= logging.INFO:
        native = names.Info
    elif level <= logging.WARNING:
        native = names.Warn
    else:
        native = names.Error
    return pulsar.FileLogger(native, client_log_pipe().path)
