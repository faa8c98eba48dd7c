"""A process a child leaves behind neither hangs serve's shutdown nor outlives its collector."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from pulsar_lens.cli.supervisor import Child


def test_stop_returns_while_a_grandchild_still_holds_the_output() -> None:
    # The child starts a grandchild in a session of its own (as the collector starts the Spark
    # job worker), which inherits the pipe, then the child is stopped.
    script = textwrap.dedent(
        """
        import subprocess, sys, time
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        left = subprocess.Popen(sleeper, start_new_session=True)
        print("ready", left.pid, flush=True)
        time.sleep(60)
        """
    )
    child = Child("collect", [sys.executable, "-c", script])
    child.start()
    deadline = time.monotonic() + 60
    while not any(line.startswith("ready") for line in child.tail):
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.1)
    left_pid = int(next(line for line in child.tail if line.startswith("ready")).split()[1])
    started = time.monotonic()
    try:
        child.stop(grace=5)
    finally:
        os.kill(left_pid, signal.SIGKILL)
        child._join_reader()  # the pipe ends with the process that held it
    # the grandchild holds the pipe for 60 s; the stop's grace is 5 s
    assert time.monotonic() - started < 40, "stop waited for the grandchild's output"


def test_the_job_worker_stops_once_its_parent_is_gone() -> None:
    worker = textwrap.dedent(
        """
        import sys, threading
        from pulsar_lens.plugins.spark.worker import _stop_when_orphaned
        stop = threading.Event()
        args = (stop, int(sys.argv[1]), 0.2, 5.0)
        threading.Thread(target=_stop_when_orphaned, args=args, daemon=True).start()
        stop.wait(60)
        """
    )
    parent = textwrap.dedent(
        """
        import os, subprocess, sys
        argv = [sys.executable, "-c", sys.argv[1], str(os.getpid())]
        quiet = subprocess.DEVNULL
        p = subprocess.Popen(argv, start_new_session=True, stdout=quiet, stderr=quiet)
        print(p.pid, flush=True)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", parent, worker], capture_output=True, text=True, timeout=30
    )
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 60
    while _running(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"the orphaned worker {pid} was still running after 60 s")
        time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
