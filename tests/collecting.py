"""A real `pulsar-lens collect` for fault tests: run as a subprocess with its heartbeat lines
read as they come, on a store that can be a small tmpfs of its own (to fill it, or remount it
read-only: both stop root, which chmod does not)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.lens_cli import ROOT, clean_environ

TMPFS_SIZE = "4m"
MAX_POLLS = 60  # the bound of each run; every test stops its collector well before
WAIT = 30.0  # seconds a heartbeat may take at most: polls come every second


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


@contextmanager
def mounted_tmpfs(mount: Path, size: str = TMPFS_SIZE) -> Iterator[Path]:
    """A tmpfs of `size` at `mount` (made), unmounted after (writable again first)."""
    mount.mkdir()
    done = run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount))
    if done.returncode != 0:
        pytest.fail(
            f"this test mounts a {size} tmpfs to fill it or make it read-only, as root: mount "
            f"refused (exit {done.returncode}): {done.stderr.strip()}"
        )
    try:
        yield mount
    finally:
        run("mount", "-o", "remount,rw", str(mount))
        if run("umount", str(mount)).returncode != 0:
            run("umount", "-l", str(mount))


def remount(mount: Path, mode: str, *, within: float = WAIT) -> None:
    """Remount the tmpfs `ro` (every write then fails with EROFS) or `rw` again.

    The kernel refuses `ro` ("mount point is busy") while a file on it is open for writing,
    as the collector's store is for a moment at every poll: asked again until it takes, for
    at most `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        done = run("mount", "-o", f"remount,{mode}", str(mount))
        if done.returncode == 0:
            return
        if "busy" not in done.stderr or time.monotonic() > deadline:
            raise AssertionError(f"remount,{mode} of {mount} refused: {done.stderr.strip()}")
        time.sleep(0.05)


class Collector:
    """`pulsar-lens collect` every second into `store`, its heartbeat lines read as they come."""

    def __init__(
        self, store: Path, admin_url: str, *, extra: Sequence[str] = (), max_polls: int = MAX_POLLS
    ) -> None:
        clean = clean_environ()
        argv = [sys.executable, "-m", "pulsar_lens.cli.main", "collect", "--interval", "1s"]
        argv += ["--max-polls", str(max_polls), "--store", str(store), *extra]
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**clean, "PULSAR_ADMIN_URL": admin_url, "PYTHONFAULTHANDLER": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._errors: list[str] = []
        # each pipe has one reader, to its end: a second one (communicate) would take lines
        # from this one and close the pipe under it
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._error_reader = threading.Thread(target=self._read_errors, daemon=True)
        self._reader.start()
        self._error_reader.start()
        self.stderr = ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _read_errors(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        for chunk in iter(lambda: stream.read(65536), ""):
            self._errors.append(chunk)

    def _close_pipes(self) -> None:
        """Once the process ended: its pipes read to their end by their readers, closed."""
        self._reader.join(30)
        self._error_reader.join(30)
        self.stderr = "".join(self._errors)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def beats(self, count: int, match: Callable[[str], bool] = lambda line: True) -> list[str]:
        """The next heartbeat lines until `count` of them `match` (all the lines read)."""
        seen: list[str] = []
        found = 0
        deadline = time.monotonic() + WAIT * count
        while found < count:
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no heartbeat in time; lines so far: {self.lines}") from None
            if line is None:
                raise AssertionError(f"collect ended early: {self.lines}\n{self.finish()}")
            self.lines.append(line)
            seen.append(line)
            found += match(line)
        return seen

    def __enter__(self) -> Collector:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        """Stopped at the end of the block (its stderr then in `stderr`). When the block
        failed, a failure to stop is added to that failure as a note, never in its place: the
        first thing that went wrong is the one to read."""
        if error is None:
            self.finish()
            return
        try:
            self.finish()
        except AssertionError as stopping:
            error.add_note(f"and then: {stopping}")
        else:
            error.add_note(f"collect's stderr:\n{self.stderr[-6000:]}")

    def finish(self) -> str:
        """Stop it as `docker stop` would and return its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(timeout=15)
            self._close_pipes()
            raise AssertionError(f"collect did not stop:\n{self.stderr[-6000:]}") from None
        self._close_pipes()
        while True:  # the lines printed while it stopped
            line = self._queue.get_nowait() if not self._queue.empty() else None
            if line is None:
                break
            self.lines.append(line)
        return self.stderr


def stored(line: str) -> bool:
    return line.startswith("poll ") and "not_stored" not in line and "unreachable" not in line


def not_stored(line: str) -> bool:
    return "not_stored" in line
