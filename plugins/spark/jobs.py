"""Spark analyses run as jobs, in a process of their own, never inside a page request.

A job is one run of one Spark plugin with one set of params over the store's newest polls;
its result goes to the stored results (`plugins.results`) like any analysis. The dashboard
asks for a job ("Run now") and follows its progress; the job worker (`plugins.spark.worker`,
started by the collect process, one per store) runs the requests in order and, after new
polls, each Spark plugin with its default params on a schedule.

The queue is a folder of small JSON files inside the store, so the asking process and the
worker share nothing but the disk:

    jobs/requests/<id>.json   a job waiting for the worker (removed when it ends)
    jobs/status/<id>.json     every job's state and progress (the newest STATUS_KEPT kept)
    jobs/worker.lock          held (flock) by the one worker serving this store

Each file is written whole and renamed into place: a reader sees an old or a new state,
never half of one. This module imports no Spark: the dashboard uses it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pulsar_lens.core.jsonfiles import json_files, write_json
from pulsar_lens.core.secrets import redact

log = logging.getLogger(__name__)

JOBS_DIR = "jobs"
STATUS_KEPT = 200
State = Literal["queued", "running", "done", "failed"]
Origin = Literal["request", "schedule", "cli"]
ENDED: frozenset[str] = frozenset({"done", "failed"})


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class JobStatus:
    """One job: what it runs, where it stands, and Spark's progress (stages and tasks)."""

    id: str
    plugin: str
    params: Mapping[str, Any]
    origin: Origin
    state: State = "queued"
    requested_at: str = field(default_factory=lambda: now().isoformat())
    started_at: str | None = None
    finished_at: str | None = None
    stages_done: int = 0
    stages_total: int = 0
    tasks_done: int = 0
    tasks_total: int = 0
    polls: int = 0  # snapshots the job read
    error: str | None = None
    cluster: str | None = None  # whose snapshots it reads, in a store of several clusters

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def fraction(self) -> float:
        """Tasks done out of tasks known so far (a job's later stages appear as it runs)."""
        if self.state == "done":
            return 1.0
        return self.tasks_done / self.tasks_total if self.tasks_total else 0.0

    def describe(self) -> str:
        """One line for a progress bar: the state, and stages and tasks once Spark runs."""
        if self.state == "queued":
            return "waiting for the job worker"
        if self.state == "failed":
            return f"failed: {self.error}"
        if self.state == "done":
            return f"done in {self.seconds():.1f}s over {self.polls} poll(s)"
        if not self.stages_total:
            return "starting (reading the store, planning)"
        return (
            f"stage {self.stages_done}/{self.stages_total} done, "
            f"tasks {self.tasks_done}/{self.tasks_total}"
        )

    def seconds(self) -> float:
        if self.started_at is None:
            return 0.0
        end = dt.datetime.fromisoformat(self.finished_at) if self.finished_at else now()
        return (end - dt.datetime.fromisoformat(self.started_at)).total_seconds()

    def same_work(self, plugin: str, params: Mapping[str, Any], cluster: str | None = None) -> bool:
        return (self.plugin, dict(self.params), self.cluster) == (plugin, dict(params), cluster)


class JobQueue:
    """The `jobs/` folder of a store: requests, statuses and the worker's lock."""

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        self.store_root = Path(store_root)
        self.root = Path(store_root) / JOBS_DIR
        self.requests = self.root / "requests"
        self.statuses = self.root / "status"
        self.lock_path = self.root / "worker.lock"

    def __repr__(self) -> str:
        return f"JobQueue({str(self.root)!r})"

    def request(
        self,
        plugin: str,
        params: Mapping[str, Any],
        *,
        origin: Origin = "request",
        cluster: str | None = None,
    ) -> JobStatus:
        """Queue a run of `plugin` with `params` (JSON-able, validated by the caller) on the
        snapshots of `cluster` (None: the whole store); the job already queued or running
        for the same work, when there is one."""
        for job in self.pending():
            if job.same_work(plugin, params, cluster):
                return job
        job = self.new(plugin, params, origin=origin, cluster=cluster)
        write_json(self.requests / f"{job.id}.json", asdict(job), store_root=self.store_root)
        return job

    def new(
        self,
        plugin: str,
        params: Mapping[str, Any],
        *,
        origin: Origin,
        cluster: str | None = None,
    ) -> JobStatus:
        """A job's status file, for a job this process runs itself (not a request)."""
        stamp = now().strftime("%Y%m%dT%H%M%S%f")
        job = JobStatus(
            id=f"{stamp}-{uuid.uuid4().hex[:8]}",
            plugin=plugin,
            params=dict(params),
            origin=origin,
            cluster=cluster,
        )
        return self.update(job)

    def update(self, job: JobStatus) -> JobStatus:
        if job.error is not None:  # an engine's words may quote its master, token and all
            job = replace(job, error=redact(job.error))
        write_json(self.statuses / f"{job.id}.json", asdict(job), store_root=self.store_root)
        if job.ended:
            (self.requests / f"{job.id}.json").unlink(missing_ok=True)
        return job

    def status(self, job_id: str) -> JobStatus | None:
        return _read_status(self.statuses / f"{job_id}.json")

    def pending(self) -> list[JobStatus]:
        """Jobs asked for and not ended, oldest first."""
        jobs = []
        for path in json_files(self.requests, store_root=self.store_root):
            job = self.status(path.stem) or _read_status(path)
            if job is None or job.ended:
                path.unlink(missing_ok=True)  # a stray or finished request
                continue
            jobs.append(job)
        return jobs

    def latest(
        self, plugin: str, params: Mapping[str, Any] | None = None, *, cluster: str | None = None
    ) -> JobStatus | None:
        """The newest job of `plugin` on `cluster`'s snapshots (with exactly `params`, when
        given)."""
        for path in reversed(json_files(self.statuses, store_root=self.store_root)):
            job = _read_status(path)
            if job is None or job.plugin != plugin or job.cluster != cluster:
                continue
            if params is None or dict(job.params) == dict(params):
                return job
        return None

    def prune(self, keep: int = STATUS_KEPT) -> int:
        """Delete the statuses of ended jobs beyond the newest `keep`; how many went."""
        removed = 0
        ended = [
            p
            for p in json_files(self.statuses, store_root=self.store_root)
            if (j := _read_status(p)) and j.ended
        ]
        for path in ended[: max(0, len(ended) - keep)]:
            path.unlink(missing_ok=True)
            removed += 1
        return removed

    def worker_running(self) -> bool:
        """Whether a job worker holds this store's lock right now."""
        if not self.lock_path.exists():
            return False
        with open(self.lock_path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False

    @contextlib.contextmanager
    def worker_lock(self) -> Iterator[None]:
        """Be this store's one worker; RuntimeError when another process already is."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RuntimeError(f"another job worker serves {self.root.parent}") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def abandon_running(self, reason: str) -> list[JobStatus]:
        """Mark the jobs left `running` by a worker that died or was stopped as failed."""
        failed = []
        for job in self.pending():
            if job.state == "running":
                failed.append(
                    self.update(
                        replace(job, state="failed", finished_at=now().isoformat(), error=reason)
                    )
                )
        return failed


def _read_status(path: Path) -> JobStatus | None:
    try:
        raw = json.loads(path.read_text())
        known = {name: raw[name] for name in JobStatus.__dataclass_fields__ if name in raw}
        return JobStatus(**known)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as exc:  # a damaged file is skipped, not fatal
        log.warning("job file %s is unreadable: %s", path, exc)
        return None
