"""/health beside /metrics on the collect process's port: the recorder's verdict at its own
path, the metrics at every other."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.cli.metrics_endpoint import HEALTH_PATH, MetricsEndpoint
from pulsar_lens.collectors.health import HealthRecorder
from pulsar_lens.collectors.loop import Heartbeat
from pulsar_lens.core.parts import MetricsSettings
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import free_port

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def get(url: str) -> tuple[int, str, str]:
    try:
        with _DIRECT.open(url, timeout=30) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_health_route_answers_the_verdict_and_metrics_answer_beside_it(tmp_path: Path) -> None:
    health = HealthRecorder(tmp_path, interval=30.0, deadline=120.0)
    port = free_port()
    endpoint = MetricsEndpoint(Store(tmp_path), MetricsSettings(port=port), health=health)
    endpoint.start()
    url = f"http://127.0.0.1:{port}"
    try:
        at = dt.datetime.now(dt.UTC)
        refused = Heartbeat(
            at=at, topics=0, subscriptions=0, requests=9, errors=0, duration=0.1,
            snapshot_id=None, write_error="could not write snapshot: ENOSPC: No space left",
        )  # fmt: skip
        endpoint.wrap(health.wrap(lambda beat: None))(refused)
        failing = get(url + HEALTH_PATH)
        health.record(dataclasses.replace(refused, write_error=None, snapshot_id="sha256:ab"))
        ok = get(url + HEALTH_PATH)
        metrics = get(url + "/metrics")
    finally:
        endpoint.close()
    assert failing[:2] == (503, "application/json; charset=utf-8")
    assert json.loads(failing[2])["problems"][0].endswith(
        "ENOSPC: No space left; snapshots are kept in memory (up to 5) and retried"
    )
    assert ok[0] == 200 and json.loads(ok[2])["status"] == "ok"
    assert metrics[0] == 200
    assert "pulsar_lens_failed_writes_total 1.0" in metrics[2]


def test_an_overrun_is_a_health_note_and_metrics_families_saying_what_to_change(
    tmp_path: Path,
) -> None:
    from pulsar_lens.collectors.overrun import overrun_of

    health = HealthRecorder(tmp_path, interval=30.0, deadline=120.0, detail_budget=500)
    port = free_port()
    endpoint = MetricsEndpoint(Store(tmp_path), MetricsSettings(port=port), health=health)
    endpoint.start()
    url = f"http://127.0.0.1:{port}"
    overrun = overrun_of(47.2, 12.6, 30.0, deadline=120.0, detail_budget=500)
    try:
        slow = Heartbeat(
            at=dt.datetime.now(dt.UTC), topics=3, subscriptions=2, requests=9, errors=0,
            duration=47.2, snapshot_id="sha256:ab", write_seconds=12.6, interval=30.0,
            overrun=overrun,
        )  # fmt: skip
        endpoint.wrap(health.wrap(lambda beat: None))(slow)
        verdict = get(url + HEALTH_PATH)
        metrics = get(url + "/metrics")[2]
    finally:
        endpoint.close()
    assert verdict[0] == 200  # a note, not a problem: restarting would not help
    (note,) = json.loads(verdict[2])["notes"]
    assert note.startswith("the last poll took 47s and storing it 13s, over the 30s interval")
    assert "PULSAR_LENS_POLL_INTERVAL" in note and "PULSAR_LENS_DETAIL_BUDGET" in note
    for sample in (
        "pulsar_lens_poll_overrun 1.0",
        "pulsar_lens_overrun_polls_total 1.0",
        "pulsar_lens_poll_interval_seconds 30.0",
        "pulsar_lens_poll_duration_seconds 47.2",
        "pulsar_lens_poll_write_seconds 12.6",
        "pulsar_lens_poll_needed_interval_seconds 180.0",
    ):
        assert sample in metrics.splitlines(), sample


def test_analyses_behind_the_polls_are_a_health_note_and_metrics_families(
    tmp_path: Path,
) -> None:
    """The collect process tells the health file and /metrics of each results pass: both
    answer what it recorded, and /metrics never analyses to say it."""
    from pulsar_lens.core.passes import PassProgress

    health = HealthRecorder(tmp_path, interval=8.0, deadline=120.0)
    port = free_port()
    endpoint = MetricsEndpoint(Store(tmp_path), MetricsSettings(port=port), health=health)
    endpoint.start()
    url = f"http://127.0.0.1:{port}"
    ended = dt.datetime.now(dt.UTC)
    progress = PassProgress(passes=61, finished_at=ended, seconds=20.0, skipped=2, skipped_total=8)
    try:
        before = get(url + "/metrics")[2]
        on_time = Heartbeat(
            at=ended, topics=3, subscriptions=2, requests=9, errors=0, duration=0.5,
            snapshot_id="sha256:ab", interval=8.0,
        )  # fmt: skip
        endpoint.wrap(health.wrap(lambda beat: None))(on_time)
        for record in (health.record_analyses, endpoint.record_analyses):
            record(progress)
        verdict = get(url + HEALTH_PATH)
        metrics = get(url + "/metrics")[2]
    finally:
        endpoint.close()
    assert "pulsar_lens_unanalysed_snapshots_total 0.0" in before.splitlines()
    assert verdict[0] == 200  # a note, not a problem: restarting would not help
    (note,) = json.loads(verdict[2])["notes"]
    assert note.startswith("the analyses of the newest poll took 20s, over the 8s interval")
    assert "every 30s or more (--interval or PULSAR_LENS_POLL_INTERVAL)" in note
    found = {s.name: s.value for f in text_string_to_metric_families(metrics) for s in f.samples}
    assert found["pulsar_lens_analysis_passes_total"] == 61
    assert found["pulsar_lens_unanalysed_snapshots_total"] == 8
    assert found["pulsar_lens_analysis_pass_seconds"] == 20
    assert found["pulsar_lens_last_analysis_pass_timestamp_seconds"] == ended.timestamp()
