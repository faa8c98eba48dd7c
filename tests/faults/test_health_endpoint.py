"""`pulsar-lens collect --metrics-port`'s /health, from the real process: 200 while polls are
stored, 503 naming the refused writes once its store turns read-only, 200 again once the
store takes the kept snapshots."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pulsar_lens.lab.localpulsar import free_port
from tests.collecting import Collector, mounted_tmpfs, not_stored, remount, stored
from tests.fake_admin import FakeAdmin

WAIT = 60.0  # seconds for /health to say what the heartbeats already said
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy

Answer = tuple[int, str]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "disk") as mount:
        yield mount


def get(url: str) -> Answer:
    try:
        with _DIRECT.open(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_health(port: int, wanted: Callable[[Answer], bool], what: str) -> Answer:
    """GET /health until its answer is `wanted`; fail naming `what` and the last answer."""
    deadline = time.monotonic() + WAIT
    last: Answer | str = "no answer yet"
    while time.monotonic() < deadline:
        try:
            last = get(f"http://127.0.0.1:{port}/health")
        except OSError as exc:  # not listening yet
            last = repr(exc)
        if not isinstance(last, str) and wanted(last):
            return last
        time.sleep(0.2)
    raise AssertionError(f"/health never answered {what} in {WAIT:.0f}s; last: {last}")


def test_collect_health_is_503_naming_the_refused_writes_and_200_before_and_after(
    tmpfs: Path,
) -> None:
    store = tmpfs / "store"
    port = free_port()
    extra = ["--metrics-port", str(port)]
    with FakeAdmin() as fake, Collector(store, fake.url, extra=extra) as collector:
        collector.beats(1, stored)
        wait_health(port, lambda a: a[0] == 200, "200 once a poll was stored")
        remount(tmpfs, "ro")
        collector.beats(1, not_stored)
        status, body = wait_health(port, lambda a: a[0] == 503, "503 once writes fail")
        remount(tmpfs, "rw")
        collector.beats(1, stored)
        healed, _ = wait_health(port, lambda a: a[0] == 200, "200 once writes resumed")
    assert "Traceback" not in collector.stderr, collector.stderr
    answer = json.loads(body)
    assert answer["status"] == "failing"
    (problem,) = answer["problems"]
    assert problem.startswith("the store refused the last ")
    assert f"under {store}: EROFS: Read-only file system; snapshots are kept in memory" in problem
    assert status == 503 and healed == 200
