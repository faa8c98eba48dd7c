"""A Spark analysis on its page: the newest stored result at once, "Run now", and the job's
progress. The page only reads files and queues requests; the job worker runs the jobs, so no
page ever starts a JVM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import streamlit as st

from pulsar_lens.core.errors import ResultNotReady
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard import data
from pulsar_lens.dashboard.frames import format_age
from pulsar_lens.dashboard.views import draw_views
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.runner import RunOutput
from pulsar_lens.plugins.spark.jobs import JobQueue, JobStatus

FOLLOW_SECONDS = 1.0
NO_WORKER = (
    "No job worker serves this store, so Run now waits until one starts. `pulsar-lens "
    "collect` (and `serve`, `demo`) run one; or run this analysis once with "
    "`pulsar-lens analyze {slug}`."
)

NOT_TRAVELLED = (
    "This page is not time-travelled: it shows its newest Spark result, whatever snapshot the "
    "sidebar chose for the Cluster pages."
)


def draw_job(root: str, slug: str, params: Mapping[str, Any]) -> None:
    """The `job` run control: the newest stored result for these params, Run now, and the
    progress of the job it queued."""
    if data.upto(root) is not None:
        st.info(NOT_TRAVELLED)
    output = stored_output(root, slug, params)
    if output is not None:
        draw_views(slug, output.views)
        st.caption(provenance(output))
    job_panel(root, slug, params)


def stored_output(root: str, slug: str, params: Mapping[str, Any]) -> RunOutput | None:
    """The newest stored result for these params; None (and a note) when there is none."""
    try:
        return data.run_plugin(root, slug, params)
    except ResultNotReady as exc:
        st.info(escape_markdown(exc))
        return None


def provenance(output: RunOutput, *, now: dt.datetime | None = None) -> str:
    """How old the Spark result is and what it read."""
    polls = f"{len(output.snapshot_ids)} poll(s)"
    if not output.computed_at:
        return f"computed by a Spark job over {polls}"
    computed = dt.datetime.fromisoformat(output.computed_at)
    age = ((now or dt.datetime.now(dt.UTC)) - computed).total_seconds()
    return f"computed by a Spark job {format_age(age)} ago, over {polls}"


def job_panel(root: str, slug: str, params: Mapping[str, Any]) -> None:
    """Run now, and the progress of the newest job for these params."""
    loaded = data.registry().get(slug)
    wanted = runner.validate_params(loaded.plugin, params).model_dump(mode="json")
    queue = JobQueue(root)
    cluster = data.chosen_cluster(root)  # a job reads the snapshots of the cluster shown
    job = queue.latest(slug, wanted, cluster=cluster)
    busy = job is not None and not job.ended
    if st.button("Run now", key=f"run_now_{slug}", disabled=busy, icon=":material/play_arrow:"):
        job = queue.request(slug, wanted, cluster=cluster)
        busy = True
    if job is not None and busy:
        follow(root, job.id)
    elif job is not None and job.state == "failed":
        st.error(f"The last job for these parameters failed: {escape_markdown(job.error)}")
    if busy and not queue.worker_running():
        st.warning(NO_WORKER.format(slug=slug))


@st.fragment(run_every=FOLLOW_SECONDS)
def follow(root: str, job_id: str) -> None:
    """The job's progress bar, redrawn every second; the whole page reruns when it ends."""
    job = JobQueue(root).status(job_id)
    if job is None:
        return
    st.progress(job.fraction, text=escape_markdown(progress_text(job)))
    if job.ended:
        st.rerun()


def progress_text(job: JobStatus) -> str:
    started = f" · {job.seconds():.0f}s" if job.started_at else ""
    return f"Spark job {job.id[-8:]}: {job.describe()}{started}"
