"""A Spark analysis's page: the newest stored result at once with its age, Run now queues a
job for the worker and follows its progress, and no page ever starts Spark."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.stuck_hash_history import StuckHashHistory
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.spark.jobs import JobQueue
from pulsar_lens.plugins.testing import make_snapshot

SLUG = "stuck-hash-history"
PageRunner = Callable[[str], AppTest]


def _store(root: Path, polls: int = 3) -> Store:
    store = Store(root)
    for i in range(polls):
        store.write(make_snapshot(30.0 * i))
    return store


def _stored(store: Store, *, minutes_ago: float, hashes: int) -> None:
    """A result of the default params as a job would have stored it."""
    plugin = StuckHashHistory()
    params = runner.validate_params(plugin, None).model_dump(mode="json")
    ids = tuple(str(s) for s in store.snapshots()["snapshot_id"])
    offenders = pd.DataFrame(
        {
            "topic": ["t"],
            "subscription": ["ks"],
            "consumer_name": ["c1"],
            "episodes": [hashes],
            "polls": [hashes],
            "longest_s": [30.0],
        }
    )
    frames = {
        "episodes": pd.DataFrame({"hash": list(range(hashes))}),
        "offenders": offenders,
        "recurrence": pd.DataFrame({"episodes": [hashes]}),
    }
    from pulsar_lens.api import Result

    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)
    ResultStore(store.root).write(
        StoredResult(
            plugin=SLUG,
            version=plugin.version,
            params=params,
            snapshot_ids=ids,
            status="ok",
            seconds=1.0,
            result=Result(frames=frames, summary={"episodes": hashes}),
            computed_at=at.isoformat(),
        )
    )


def test_the_page_shows_the_newest_stored_result_with_its_age(
    store_dir: Path, plugin_page: PageRunner
) -> None:
    store = _store(store_dir)
    _stored(store, minutes_ago=30, hashes=1)
    _stored(store, minutes_ago=4, hashes=2)  # newer, over the same polls (kept: newest wins)
    at = plugin_page(SLUG)
    assert not at.exception
    tables = [t.value for t in at.dataframe]
    assert any(len(t) == 2 and "hash" in t.columns for t in tables)  # the newer result
    captions = " ".join(c.value for c in at.caption)
    assert re.search(r"computed by a Spark job 4m \d+s ago, over 3 poll\(s\)", captions)
    assert at.button(key=f"run_now_{SLUG}").disabled is False


def test_a_newer_poll_keeps_the_last_result_shown(store_dir: Path, plugin_page: PageRunner) -> None:
    store = _store(store_dir)
    _stored(store, minutes_ago=1, hashes=2)
    store.write(make_snapshot(90.0))  # the result's window no longer is the newest
    at = plugin_page(SLUG)
    assert not at.exception and any(len(t.value) == 2 for t in at.dataframe)


def test_without_a_result_the_page_says_so_and_run_now_queues_a_job(
    store_dir: Path, plugin_page: PageRunner
) -> None:
    _store(store_dir)
    at = plugin_page(SLUG)
    assert not at.exception
    assert any("no result yet" in i.value for i in at.info)
    at.button(key=f"run_now_{SLUG}").click().run()
    assert not at.exception
    (job,) = JobQueue(store_dir).pending()
    assert job.plugin == SLUG and job.state == "queued" and job.origin == "request"
    assert any("waiting for the job worker" in p.text for p in at.get("progress"))  # type: ignore[attr-defined]
    # No worker serves this tmp store: the page says how to get one.
    assert any("No job worker serves this store" in w.value for w in at.warning)
    # While it waits, the next run of the page offers no second Run now.
    at.run()
    assert at.button(key=f"run_now_{SLUG}").disabled and len(JobQueue(store_dir).pending()) == 1


def test_a_failed_job_is_shown_with_its_error(store_dir: Path, plugin_page: PageRunner) -> None:
    _store(store_dir)
    queue = JobQueue(store_dir)
    params = runner.validate_params(StuckHashHistory(), None).model_dump(mode="json")
    job = queue.request(SLUG, params)
    import dataclasses

    queue.update(dataclasses.replace(job, state="failed", error="Java gateway exited"))
    at = plugin_page(SLUG)
    assert any("Java gateway exited" in e.value for e in at.error)


def test_no_page_or_stored_read_imports_spark(store_dir: Path) -> None:
    """The page's read path (runner.run reading stored results) never loads pyspark."""
    store = _store(store_dir)
    _stored(store, minutes_ago=1, hashes=2)
    code = (
        "import sys\n"
        "from pulsar_lens.core.store import Store\n"
        "from pulsar_lens.plugins import runner\n"
        "from pulsar_lens.plugins.builtin.stuck_hash_history import StuckHashHistory\n"
        f"out = runner.run(StuckHashHistory(), Store({str(store_dir)!r}))\n"
        "assert out.stored and out.computed_at\n"
        "import pulsar_lens.dashboard.components\n"
        "print('pyspark' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "False"
