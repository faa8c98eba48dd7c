"""The job worker as the collect process runs it: a child process (`plugins.spark.worker`),
restarted with a backoff when it dies, and killed (with its JVM) when one job runs past its time
limit. The worker's own loop is in `plugins.spark.worker`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from pulsar_lens.core.parts import DEFAULT_SPARK_JOB_TIMEOUT as DEFAULT_TIMEOUT
from pulsar_lens.core.parts import SPARK_JOB_TIMEOUT_ENV as TIMEOUT_ENV
from pulsar_lens.core.settings import child_environ
from pulsar_lens.plugins.spark.jobs import JobQueue, now

log = logging.getLogger("pulsar_lens.plugins.spark.worker")  # its lines read as the worker's


class WorkerProcess:
    """The job worker as a child process of the collect process: started, restarted after a
    death (backoff 2 s doubling to 60 s), and killed with its JVM when a job overruns."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        argv: Sequence[str] | None = None,
        clusters: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        # variables the worker needs beyond this process's own (the settings file's keys:
        # it is not given the file, which may hold credentials)
        self.environ = dict(environ or {})
        self.queue = JobQueue(root)
        self.timeout = timeout
        self.argv = list(
            argv
            or [
                *(sys.executable, "-m", "pulsar_lens.plugins.spark.worker", "--store", str(root)),
                *("--parent", str(os.getpid())),
                *(arg for name in clusters for arg in ("--cluster", name)),
            ]
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()  # no new worker is spawned once close() began
        self._thread = threading.Thread(target=self._watch, name="job-worker", daemon=True)

    def start(self) -> WorkerProcess:
        self._spawn()
        self._thread.start()
        return self

    def _spawn(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            # it runs plugins, someone else's code, on the store: it needs no credential
            env = child_environ(credentials=False, add=self.environ)
            self.process = subprocess.Popen(self.argv, start_new_session=True, env=env)
        log.info("job worker started (pid %d) for %s", self.process.pid, self.root)

    def _watch(self) -> None:
        backoff = 2.0
        while not self._stop.wait(1.0):
            process = self.process
            if process is None:
                continue
            code = process.poll()
            if code is None:
                self._enforce_timeout()
                continue
            self.queue.abandon_running(f"the job worker exited with code {code}")
            log.warning("job worker exited with code %s; restarting in %.0fs", code, backoff)
            if self._stop.wait(backoff):
                return
            backoff = min(60.0, backoff * 2)
            self.restarts += 1
            self._spawn()

    def _enforce_timeout(self) -> None:
        for job in self.queue.pending():
            if job.state == "running" and job.seconds() > self.timeout:
                log.warning(
                    "job %s (%s) ran past %.0fs: stopping the worker",
                    job.id,
                    job.plugin,
                    self.timeout,
                )
                self._kill()
                if self.process is not None:
                    self.process.wait(10)
                self.queue.update(
                    dataclasses.replace(
                        job,
                        state="failed",
                        finished_at=now().isoformat(),
                        error=f"stopped after running longer than {self.timeout:.0f}s "
                        f"({TIMEOUT_ENV})",
                    )
                )

    def _kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def terminate(self) -> None:
        """Ask the worker to stop, without waiting: it abandons the job under way and stops
        its Spark session (`close` waits for it)."""
        with self._lock:
            self._stop.set()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def close(self, grace: float = 10.0) -> None:
        """Ask the worker to stop (it stops its Spark session), then kill what is left."""
        self.terminate()
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self._kill()
                self.process.wait(5)
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # a JVM the worker left behind
                os.killpg(self.process.pid, signal.SIGKILL)
        if self._thread.is_alive():
            self._thread.join(timeout=5)
