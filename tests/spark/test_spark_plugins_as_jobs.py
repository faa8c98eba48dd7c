"""The collect process's job worker runs every Spark plugin after new polls, a third-party
drop-in (examples/spark-drop-in) exactly like the built-in, and their pages show the result."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.api import Chart, Table
from pulsar_lens.cli.collect_cmd import Analyses
from pulsar_lens.core.model import DrainingHashRecord, TopicRecord
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.spark.jobs import ENDED, JobQueue
from pulsar_lens.plugins.testing import make_snapshot
from tests.live.lens_polls import wait_for
from tests.pages import plugin_page

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "spark-drop-in" / "topic_rate_history.py"
T = "persistent://public/default/orders"


def _topic(name: str, rate: float) -> TopicRecord:
    return TopicRecord(
        f"persistent://public/default/{name}", "public", "public/default", msg_rate_in=rate
    )


def _store(root: Path) -> Store:
    store = Store(root)
    for i, (a, b) in enumerate([(10.0, 1.0), (30.0, 2.0), (20.0, 9.0)]):
        store.write(
            make_snapshot(
                30.0 * i,
                topics=[_topic("a", a), _topic("b", b)],
                draining_hashes=[DrainingHashRecord(T, "ks", "c1", 7, 1, 0)],
            )
        )
    return store


JOBS_CEILING = 600
"""Seconds the two jobs may take, one after the other: one took 151 s from being queued to its
end beside a loaded test run (load 10-14), so 240 s for both was too short there."""


@pytest.mark.timeout(JOBS_CEILING + 300)
def test_the_job_worker_of_collect_runs_built_in_and_drop_in_spark_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder)
    store = _store(tmp_path / "store")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    monkeypatch.setenv("PULSAR_LENS_STORE", str(store.root))
    monkeypatch.setenv("PULSAR_LENS_SPARK_JOBS", "1")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    settings = Settings.from_env()
    registry = discover(entry_points=False, plugin_dirs=settings.plugin_dirs)
    drop_in = registry.get("topic-rate-history")
    assert drop_in.engine == "spark" and drop_in.isolated and not registry.failures
    analyses = Analyses(store, settings=settings)
    try:
        queue = JobQueue(store.root)
        wanted = ("topic-rate-history", "stuck-hash-history")

        def states() -> dict[str, tuple[str, str | None] | None]:
            jobs = {slug: queue.latest(slug) for slug in wanted}
            return {slug: job and (job.state, job.error) for slug, job in jobs.items()}

        def ended() -> dict[str, tuple[str, str | None] | None] | None:
            now = states()
            return now if all(s is not None and s[0] in ENDED for s in now.values()) else None

        done = wait_for(
            ended, what="both jobs to end", timeout=JOBS_CEILING, every=1.0, seen=states
        )
        assert all(s is not None and s[0] == "done" for s in done.values()), done
        assert queue.worker_running()
    finally:
        analyses.close()
    assert not JobQueue(store.root).worker_running()
    output = runner.run(drop_in, store)  # stored, rendered in the plugin's isolated worker
    busiest = output.result.frames["busiest"]
    assert output.stored and list(busiest["topic"].str.rsplit("/", n=1).str[-1]) == ["a", "b"]
    assert list(busiest["mean_rate_in"]) == [20.0, 4.0] and list(busiest["polls"]) == [3, 3]
    assert [type(v) for v in output.views] == [Chart, Table]
    page: AppTest = plugin_page("topic-rate-history")
    assert not page.exception
    assert any("computed by a Spark job" in c.value for c in page.caption)
    assert any(len(t.value) == 2 for t in page.dataframe)
