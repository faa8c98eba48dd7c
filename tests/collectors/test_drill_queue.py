"""The drill queue: the dashboard's request, the collect process's run, the status between,
and the requests the collect process refuses whatever the store says."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.collectors.drill_queue import DrillQueue, DrillService, DrillStatus
from pulsar_lens.core.mutations import (
    ALLOW_MUTATIONS,
    DASHBOARD_MUTATIONS,
    MAX_REQUESTER,
    MutationSettings,
)
from tests.props.strategies import NAME_SAMPLES, props

BUNDLE = "public/default/0x00000000_0x40000000"
ADA = "ada@example.com"
BOTH_ON = {ALLOW_MUTATIONS: "1", DASHBOARD_MUTATIONS: "1"}


def never_run(status: DrillStatus, progress: Callable[[str], None]) -> Mapping[str, Any]:
    raise AssertionError(f"a refused drill ran: {status}")


def test_a_request_is_taken_once_run_and_its_steps_recorded(tmp_path: Path) -> None:
    queue = DrillQueue(tmp_path)
    asked = queue.request(BUNDLE, "b:8080", requested_by=ADA)
    assert queue.status(asked.id).state == "queued"  # type: ignore[union-attr]
    seen: list[DrillStatus] = []

    def run(status: DrillStatus, progress: Callable[[str], None]) -> Mapping[str, Any]:
        seen.append(status)
        progress("probing")
        progress("unloading")
        assert queue.status(status.id).steps == ("probing", "unloading")  # type: ignore[union-attr]
        return {"owner_before": "a:8080", "owner_after": "b:8080"}

    service = DrillService(queue, run, mutations=MutationSettings.from_env(BOTH_ON))
    done = service.step()
    assert done is not None and done.state == "done" and done.ended
    assert (done.owner_before, done.owner_after) == ("a:8080", "b:8080")
    assert done.steps == ("probing", "unloading")
    assert done.requested_by == ADA
    assert [(s.to, s.requested_by) for s in seen] == [("b:8080", ADA)]
    assert service.step() is None  # taken once
    assert queue.latest() == done


def test_a_failing_drill_is_recorded_and_the_service_goes_on(tmp_path: Path) -> None:
    queue = DrillQueue(tmp_path)
    queue.request(BUNDLE, requested_by=ADA)

    def run(status: DrillStatus, progress: Callable[[str], None]) -> Mapping[str, Any]:
        raise RuntimeError("http://admin:s3cret@broker:8080 refused")

    failed = DrillService(queue, run, mutations=MutationSettings.from_env(BOTH_ON)).step()
    assert failed is not None and failed.state == "failed"
    assert "s3cret" not in (failed.error or "")
    (tmp_path / "drills" / "requests" / "bad.json").write_text("{not json")
    assert (
        DrillService(queue, run, mutations=MutationSettings.from_env(BOTH_ON)).step() is None
    )  # dropped, not fatal


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({}, ALLOW_MUTATIONS),
        ({DASHBOARD_MUTATIONS: "1"}, ALLOW_MUTATIONS),
        ({ALLOW_MUTATIONS: "1"}, DASHBOARD_MUTATIONS),
        ({ALLOW_MUTATIONS: "1", DASHBOARD_MUTATIONS: "0"}, DASHBOARD_MUTATIONS),
        ({ALLOW_MUTATIONS: "yes", DASHBOARD_MUTATIONS: "off"}, DASHBOARD_MUTATIONS),
    ],
)
def test_a_request_is_refused_unless_both_switches_are_on_where_it_runs(
    tmp_path: Path, environ: dict[str, str], named: str
) -> None:
    queue = DrillQueue(tmp_path)
    asked = queue.request(BUNDLE, requested_by=ADA)
    refused = DrillService(queue, never_run, mutations=MutationSettings.from_env(environ)).step()
    assert refused is not None and refused.state == "refused" and refused.ended
    assert named in (refused.error or "")
    assert queue.status(asked.id) == refused and not refused.steps


NOBODY = (
    st.sampled_from([None, "", "   ", "\t\n", 0, 7, 1.5, True, [], [ADA], {}, {"name": ADA}])
    | st.sampled_from([t for t in NAME_SAMPLES if any(ord(c) < 0x20 or ord(c) == 0x7F for c in t)])
    | st.text(min_size=1, max_size=8).map(lambda t: f"{ADA}\n{t}")
    | st.integers(MAX_REQUESTER + 1, MAX_REQUESTER + 50).map(lambda n: "a" * n)
)


@props(60)
@given(requested_by=NOBODY, missing=st.booleans())
def test_a_request_that_names_no_user_is_refused(requested_by: object, missing: bool) -> None:
    # written as anyone with write access to the store folder could write it
    request: dict[str, object] = {"id": "x", "bundle": BUNDLE, "state": "done"}
    if not missing:
        request["requested_by"] = requested_by
    with tempfile.TemporaryDirectory() as folder:
        queue = DrillQueue(folder)
        queue.root.joinpath("requests").mkdir(parents=True)
        queue.root.joinpath("requests", "20260101T000000-forged.json").write_text(
            json.dumps(request)
        )
        refused = DrillService(
            queue, never_run, mutations=MutationSettings.from_env(BOTH_ON)
        ).step()
        assert refused is not None and refused.state == "refused"
        assert "names no logged-in user" in (refused.error or "")
        assert queue.status("20260101T000000-forged") == refused


def test_a_forged_request_id_cannot_place_its_status_outside_the_queue(tmp_path: Path) -> None:
    queue = DrillQueue(tmp_path / "store")
    queue.root.joinpath("requests").mkdir(parents=True)
    forged = {"id": "../../../escaped", "bundle": BUNDLE, "requested_by": ADA, "steps": ["x"]}
    queue.root.joinpath("requests", "20260101T000000-a.json").write_text(json.dumps(forged))
    refused = DrillService(queue, never_run, mutations=MutationSettings()).step()
    assert refused is not None and refused.id == "20260101T000000-a" and not refused.steps
    assert [p.name for p in tmp_path.rglob("*.json")] == ["20260101T000000-a.json"]
