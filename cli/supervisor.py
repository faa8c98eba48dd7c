"""Run child processes side by side; when one dies, stop the others and say why.

Used by `pulsar-lens serve` and `pulsar-lens demo` for the polling loop and the Streamlit
server. Children run in their own process groups so a terminal's Ctrl-C reaches only the
supervisor, which then stops them in order (SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import IO

log = logging.getLogger(__name__)

TAIL_LINES = 20


def say(line: str, out: IO[str] | None = None) -> None:
    """Write `line` and its newline to `out` (stdout) in one write, then flush: `print()`
    writes them in two, and a child's echoed line written between them by another thread
    would join this one ("...: http://127.0.0.1:8501[collect] poll ...")."""
    out = out or sys.stdout
    out.write(line + "\n")
    out.flush()


@dataclass
class Child:
    """One supervised process; its output is echoed with a prefix and its tail kept."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_LINES), repr=False
    )
    echo: IO[str] | None = field(default=None, repr=False)
    _reader: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        self.process = subprocess.Popen(
            list(self.argv),
            env=dict(self.env) if self.env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"{self.name}-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        with self.process.stdout as output:  # closed at the end, however late that comes
            for raw in output:
                line = raw.decode("utf-8", errors="replace").rstrip()
                self.tail.append(line)
                if self.echo is not None:
                    say(f"[{self.name}] {line}", self.echo)

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM the child's process group, SIGKILL it after `grace` seconds."""
        if self.process is None or self.process.poll() is not None:
            self._join_reader()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %.0fs; killing it", self.name, grace)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self._join_reader()

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)
            if self._reader.is_alive():
                # A process the child left behind still holds the pipe; closing it here would
                # wait for that process's next line, perhaps forever. The reader is a daemon.
                log.warning("%s left a process that still writes to its output", self.name)
                return
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    def last_lines(self, count: int = 8) -> str:
        return "\n".join(list(self.tail)[-count:])


class ChildFailed(Exception):
    """A supervised child exited (or never became ready)."""

    def __init__(self, child: Child, what: str) -> None:
        self.child = child
        tail = child.last_lines()
        text = f"{child.name} {what}"
        if tail:
            text += f"; its last output:\n{tail}"
        super().__init__(text)


def wait_http_ok(
    url: str,
    *,
    timeout: float,
    children: Sequence[Child],
    stop: threading.Event | None = None,
    interval: float = 0.3,
) -> None:
    """Wait until GET `url` answers 200; raise ChildFailed if a child exits first.

    Returns early, without error, once `stop` is set.
    """
    import urllib.error
    import urllib.request  # with http.client and ssl: not for a `--help`

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stop is not None and stop.is_set():
            return
        check_alive(children)
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(interval)
    raise ChildFailed(children[-1], f"did not answer {url} within {timeout:.0f}s")


def check_alive(children: Sequence[Child]) -> None:
    for child in children:
        code = child.returncode
        if code is not None:
            raise ChildFailed(child, f"exited with code {code}")


@contextlib.contextmanager
def stop_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` instead of raising, while in the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def supervise(
    children: Sequence[Child],
    *,
    stop: threading.Event,
    ready: Callable[[], None] = lambda: None,
    poll_every: float = 0.5,
) -> None:
    """Start every child, call `ready()`, then watch until `stop` is set or a child dies.

    Always stops every child (in reverse order) before returning or raising ChildFailed.
    """
    try:
        for child in children:
            child.echo = child.echo or sys.stderr
            child.start()
        ready()
        while not stop.wait(poll_every):
            check_alive(children)
    finally:
        for child in reversed(children):
            child.stop()
