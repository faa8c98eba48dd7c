"""The drill queue: the dashboard's request, the collect process's run, the status between."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from collectors.drill_queue import DrillQueue, DrillService, DrillStatus

BUNDLE = "public/default/0x00000000_0x40000000"


def test_a_request_is_taken_once_run_and_its_steps_recorded(tmp_path: Path) -> None:
    queue = DrillQueue(tmp_path)
    asked = queue.request(BUNDLE, "b:8080")
    assert queue.status(asked.id).state == "queued"  # type: ignore[union-attr]
    seen: list[DrillStatus] = []

    def run(status: DrillStatus, progress: Callable[[str], None]) -> Mapping[str, Any]:
        seen.append(status)
        progress("probing")
        progress("unloading")
        assert queue.status(status.id).steps == ("probing", "unloading")  # type: ignore[union-attr]
        return {"owner_before": "a:8080", "owner_after": "b:8080"}

    service = DrillService(queue, run)
    done = service.step()
    assert done is not None and done.state == "done" and done.ended
    assert (done.owner_before, done.owner_after) == ("a:8080", "b:8080")
    assert done.steps == ("probing", "unloading")
    assert [s.to for s in seen] == ["b:8080"]
    assert service.step() is None  # taken once
    assert queue.latest() == done


def test_a_failing_drill_is_recorded_and_the_service_goes_on(tmp_path: Path) -> None:
    queue = DrillQueue(tmp_path)
    queue.request(BUNDLE)

    def run(status: DrillStatus, progress: Callable[[str], None]) -> Mapping[str, Any]:
        raise RuntimeError("http://admin:s3cret@broker:8080 refused")

    failed = DrillService(queue, run).step()
    assert failed is not None and failed.state == "failed"
    assert "s3cret" not in (failed.error or "")
    (tmp_path / "drills" / "requests" / "bad.json").write_text("{not json")
    assert DrillService(queue, run).step() is None  # a damaged request is dropped, not fatal
