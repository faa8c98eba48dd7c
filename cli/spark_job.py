"""`pulsar-lens analyze SLUG` for a Spark plugin: one job in this process, with a progress bar.

The job runs on this process's Spark session (`PULSAR_LENS_SPARK_MASTER`), its status file
sits beside the worker's jobs (so the dashboard sees it too), and its result is stored like
any job's. Progress goes to stderr: a bar redrawn in place on a terminal, otherwise a line
at most every LINE_SECONDS.
"""

from __future__ import annotations

import sys
import time
from typing import IO

from pydantic import BaseModel

from pulsar_lens.core.parts import SparkSettings
from pulsar_lens.core.secrets import display_url
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.registry import LoadedPlugin
from pulsar_lens.plugins.results import ResultStore
from pulsar_lens.plugins.spark import session
from pulsar_lens.plugins.spark.jobs import JobQueue, JobStatus
from pulsar_lens.plugins.spark.worker import run_job

BAR_WIDTH = 30
LINE_SECONDS = 5.0


class ProgressBar:
    """Draws a job's progress on a stream."""

    def __init__(self, stream: IO[str], name: str) -> None:
        self.stream = stream
        self.name = name
        self.tty = stream.isatty()
        self._last_line = 0.0

    def __call__(self, job: JobStatus) -> None:
        filled = round(job.fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        state = "failed" if job.state == "failed" else job.describe()  # why: said once, below
        text = f"{self.name} [{bar}] {job.fraction:4.0%}  {state}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if job.ended else ""))
        elif job.ended or time.monotonic() - self._last_line >= LINE_SECONDS:
            self.stream.write(text + "\n")
            self._last_line = time.monotonic()
        self.stream.flush()


def run_spark_job(
    loaded: LoadedPlugin, store: Store, params: BaseModel, *, spark: SparkSettings
) -> bool:
    """Run and store one job of `loaded` on a session of the `spark` settings; False (having
    said why on stderr) when it failed."""
    queue = JobQueue(store.root)
    job = queue.new(loaded.name, params.model_dump(mode="json"), origin="cli")
    bar = ProgressBar(sys.stderr, loaded.name)
    session.configure(spark)
    print(f"starting Spark ({display_url(spark.master)}) ...", file=sys.stderr, flush=True)
    ended = run_job(
        loaded, store, queue, job, results=ResultStore(store.root), on_update=bar, log_failure=False
    )
    if ended.state == "failed":
        print(f"pulsar-lens analyze: {loaded.name} failed: {ended.error}", file=sys.stderr)
        return False
    return True
