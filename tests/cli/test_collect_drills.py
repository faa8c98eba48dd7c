"""`pulsar-lens collect` and the drills queued in its store: a request reaches the cluster only
when the collect process itself has mutations from the dashboard on and the request names a
logged-in user. Anyone who can write to the store folder can queue a request, so these are
written straight into the store, as such a writer would, and the real collect process, against
a fake admin API, must refuse them visibly and touch nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pulsar_lens.collectors.drill_queue import DrillQueue, DrillStatus
from pulsar_lens.core.mutations import ALLOW_MUTATIONS, DASHBOARD_MUTATIONS
from tests.fake_admin import FakeAdmin
from tests.lens_cli import ROOT, clean_environ

BUNDLE = "public/default/0x00000000_0x40000000"
ADA = "ada@example.com"
NOWHERE = "pulsar://127.0.0.1:9"  # discard port: were a drill to run, its probe reaches nothing


@dataclass
class Collecting:
    proc: subprocess.Popen[str]
    output: str = ""  # what it wrote, once stopped


@contextmanager
def collecting(store: Path, admin_url: str, env: dict[str, str]) -> Iterator[Collecting]:
    """`pulsar-lens collect` polling every second until the block ends; then stopped."""
    clean = clean_environ()
    settings = {"PULSAR_ADMIN_URL": admin_url, "PULSAR_SERVICE_URL": NOWHERE, **env}
    argv = [
        sys.executable,
        "-m",
        "pulsar_lens.cli.main",
        "collect",
        "--interval",
        "1s",
        "--store",
        str(store),
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**clean, "PULSAR_LENS_SPARK_JOBS": "0", **settings},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    run = Collecting(proc)
    try:
        yield run
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            run.output = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            run.output = proc.communicate(timeout=10)[0]


def wait_taken(proc: subprocess.Popen[str], store: Path, drill_id: str) -> DrillStatus:
    """The drill's status once the collect process has taken the request (at most 90 s)."""
    deadline = time.monotonic() + 90
    status = DrillQueue(store).status(drill_id)
    while status is None or status.state == "queued":
        assert proc.poll() is None, f"collect exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"the request was still {status} after 90 s"
        time.sleep(0.3)
        status = DrillQueue(store).status(drill_id)
    return status


def forged_request(store: Path, drill_id: str, **fields: object) -> None:
    folder = store / "drills" / "requests"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{drill_id}.json").write_text(json.dumps({"id": drill_id, **fields}))


@pytest.mark.parametrize(
    ("env", "requested_by", "why"),
    [
        ({ALLOW_MUTATIONS: "1"}, ADA, f"{DASHBOARD_MUTATIONS} is not set to 1"),
        ({DASHBOARD_MUTATIONS: "1"}, ADA, f"{ALLOW_MUTATIONS} is not set to 1"),
        ({ALLOW_MUTATIONS: "1", DASHBOARD_MUTATIONS: "1"}, None, "names no logged-in user"),
        ({ALLOW_MUTATIONS: "1", DASHBOARD_MUTATIONS: "1"}, " \n", "names no logged-in user"),
    ],
    ids=["dashboard-switch-off", "mutations-off", "no-requester", "blank-requester"],
)
def test_collect_refuses_a_queued_drill_and_says_why(
    tmp_path: Path, env: dict[str, str], requested_by: str | None, why: str
) -> None:
    store = tmp_path / "store"
    drill_id = "20260101T000000000000-forged"
    fields = {"bundle": BUNDLE} | ({} if requested_by is None else {"requested_by": requested_by})
    forged_request(store, drill_id, **fields)
    with FakeAdmin() as fake, collecting(store, fake.url, env) as run:
        refused = wait_taken(run.proc, store, drill_id)
    output = run.output
    assert refused.state == "refused", (refused, output[-3000:])
    assert why in (refused.error or "") and not refused.steps
    assert not list((store / "drills" / "requests").iterdir())  # taken, not left waiting
    assert not [r for r in fake.requests if "unload" in r.path]
    assert not (store / "probes").exists()
    assert f"drill {drill_id} on {BUNDLE}" in output and "refused" in output
