"""What the exporter really serves: /metrics over a snapshot polled from the recorded Pulsar
4.0.7 admin API (tests/data/admin_api/default, replayed by tests/fake_admin.py), the built-in
analyses run on it as at a scrape of `pulsar-lens collect`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.store import Store
from pulsar_lens.exporter.collector import LensCollector, PollRecorder
from pulsar_lens.exporter.server import MetricsServer, start_metrics_server
from pulsar_lens.plugins.registry import discover
from tests.fake_admin import FakeAdmin


@contextmanager
def recorded_exporter(root: Path, *, scenario: str = "default") -> Iterator[MetricsServer]:
    """A live /metrics on 127.0.0.1 over one stored snapshot of the recording, one poll
    counted; the built-in analyses only (no entry point, no drop-in directory)."""
    started = dt.datetime.now(dt.UTC)
    with FakeAdmin(scenario) as fake:
        client = AdminClient(fake.url, retries=0)
        try:
            snapshot = poll(client)
        finally:
            client.close()
    assert not snapshot.errors, snapshot.errors
    store = Store(root)
    store.write(snapshot)
    recorder = PollRecorder()
    took = (dt.datetime.now(dt.UTC) - started).total_seconds()
    recorder.record(at=started, duration=took, requests=3, errors=0, failed=False)
    exporting = [
        p
        for p in discover(entry_points=False, plugin_dirs=())
        if type(p.plugin).metrics is not AnalysisPlugin.metrics
    ]
    collector = LensCollector(store, recorder=recorder, plugins=exporting)
    server = start_metrics_server(collector, address="127.0.0.1", port=0)
    try:
        yield server
    finally:
        server.close()


def served_families(text: str) -> dict[str, set[str]]:
    """Family name -> the series names it serves (a counter without samples: name_total)."""
    families: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        names = {s.name for s in family.samples}
        if not names:
            names = {f"{family.name}_total" if family.type == "counter" else family.name}
        families[family.name] = names
    return families


def scrape(server: MetricsServer) -> str:
    return requests.get(server.url, timeout=60).text
