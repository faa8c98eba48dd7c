"""`pulsar-lens collect` over several clusters of the settings file serves one /metrics: the
poll health and every family of each cluster's newest snapshot, labelled `cluster`."""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pulsar_lens.cli.collect_cmd import Source
from pulsar_lens.core.model import Snapshot
from pulsar_lens.lab.localpulsar import free_port
from tests.cli.test_collect_clusters import CLUSTERS, Sources, parse


class GatedSources(Sources):
    """Sources whose every poll after a cluster's first waits (bounded) for `release`."""

    def __init__(self, topics: dict[str, int | None]) -> None:
        super().__init__(topics)
        self.release = threading.Event()

    def __call__(self, admin_url: str, namespaces: Sequence[str] | None, **kw: Any) -> Source:
        source = super().__call__(admin_url, namespaces, **kw)
        polled = [0]

        def poll() -> Snapshot:
            polled[0] += 1
            if polled[0] > 1:
                self.release.wait(timeout=90)  # past the scrape's bound: it fails first
            return source.poll()

        return Source(poll=poll)


Samples = dict[tuple[str, str | None], float]


def scrape_until(port: int, ready: Callable[[Samples], bool], *, what: str) -> Samples:
    """(name, cluster label) -> value of the first scrape for which `ready` holds; fails
    (after a generous bound) saying what was awaited and what the last scrape had."""
    deadline = time.monotonic() + 60
    samples: Samples = {}
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError:  # not listening yet
            text = ""
        samples = (
            samples
            if not text
            else {
                (s.name, s.labels.get("cluster")): s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
                if s.name.startswith("pulsar_lens_")
            }
        )
        if ready(samples):
            return samples
        time.sleep(0.1)
    raise AssertionError(f"/metrics on port {port}: waited for {what}; last scrape: {samples}")


def test_collect_metrics_have_poll_health_per_cluster(tmp_path: Path) -> None:
    sources = GatedSources({"http://east:8080": 2, "http://west:8080": None})
    port = free_port()
    pace = ["--interval", "10ms", "--max-polls", "2", "--metrics-port", str(port)]
    args = parse(tmp_path, *pace, sources=sources)
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(args.func(args)))
    worker.start()
    try:
        samples = scrape_until(
            port,
            lambda got: all(got.get(("pulsar_lens_polls_total", c)) == 1 for c in CLUSTERS),
            what="one poll counted for each cluster",
        )
    finally:
        sources.release.set()
        worker.join(timeout=60)
    assert codes == [1]  # west stored nothing

    def value(name: str, cluster: str) -> float | None:
        return samples.get((name, cluster))

    assert value("pulsar_lens_polls_total", "east") == 1
    assert value("pulsar_lens_polls_total", "west") == 1
    assert value("pulsar_lens_failed_polls_total", "east") == 0
    assert value("pulsar_lens_failed_polls_total", "west") == 1
    assert value("pulsar_lens_failed_writes_total", "west") == 0
    assert value("pulsar_lens_poll_duration_seconds", "east") is not None
    assert value("pulsar_lens_snapshot_age_seconds", "east") is not None
    assert value("pulsar_lens_snapshot_age_seconds", "west") is None  # it stored nothing
    health = ("pulsar_lens_poll", "pulsar_lens_failed", "pulsar_lens_last", "pulsar_lens_snap")
    unlabelled = [name for name, c in samples if name.startswith(health) and c is None]
    assert unlabelled == []


def scrape_text_until(port: int, ready: Callable[[str], bool], *, what: str) -> str:
    """The first /metrics text for which `ready` holds; fails (after a generous bound) saying
    what was awaited and what the last scrape had."""
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError:  # not listening yet
            pass
        if text and ready(text):
            return text
        time.sleep(0.1)
    raise AssertionError(f"/metrics on port {port}: waited for {what}; last scrape:\n{text}")


def lopsided(text: str) -> dict[str, list[str]]:
    """The cluster families (all but STORE_WIDE) whose samples are not of both clusters."""
    found = {name: sorted(set(map(str, c))) for name, c in clusters_of(text).items() if c}
    return {n: c for n, c in found.items() if n not in STORE_WIDE and c != [*CLUSTERS]}


def clusters_of(text: str) -> dict[str, list[str | None]]:
    """Family name -> the `cluster` label of each of its samples."""
    return {
        f.name: [s.labels.get("cluster") for s in f.samples]
        for f in text_string_to_metric_families(text)
        if f.name.startswith("pulsar_lens_")
    }


class BackloggedSources(GatedSources):
    """GatedSources whose subscriptions each hold a backlog of 5 (a per-subscription series)."""

    def __call__(self, admin_url: str, namespaces: Sequence[str] | None, **kw: Any) -> Source:
        source = super().__call__(admin_url, namespaces, **kw)

        def poll() -> Snapshot:
            snapshot = source.poll()
            subs = tuple(replace(s, msg_backlog=5) for s in snapshot.subscriptions)
            return replace(snapshot, subscriptions=subs)

        return Source(poll=poll)


STORE_WIDE = {  # the one store, and the one results pass that analyses every cluster's polls
    "pulsar_lens_store_quarantined_files",
    "pulsar_lens_analysis_passes",
    "pulsar_lens_unanalysed_snapshots",
    "pulsar_lens_analysis_pass_seconds",
    "pulsar_lens_last_analysis_pass_timestamp_seconds",
}


def test_collect_metrics_label_every_family_of_each_cluster(tmp_path: Path) -> None:
    sources = BackloggedSources({"http://east:8080": 2, "http://west:8080": 3})
    port = free_port()
    pace = ["--interval", "10ms", "--max-polls", "2", "--metrics-port", str(port)]
    args = parse(tmp_path, *pace, sources=sources)
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(args.func(args)))
    worker.start()
    try:
        # each cluster's plugin families follow its own stored analyses, which a loaded
        # machine finishes a while after its poll: wait until no family has one cluster only
        text = scrape_text_until(
            port,
            lambda t: (
                sorted(map(str, clusters_of(t).get("pulsar_lens_topics", []))) == [*CLUSTERS]
                and not lopsided(t)
            ),
            what="pulsar_lens_topics of both clusters, and every family of both",
        )
    finally:
        sources.release.set()
        worker.join(timeout=60)
    assert codes == [0]
    families = {f.name: f for f in text_string_to_metric_families(text)}
    topics = {s.labels["cluster"]: s.value for s in families["pulsar_lens_topics"].samples}
    assert topics == {"east": 2.0, "west": 3.0}
    # the same topic and subscription names in both clusters: a series of each, apart
    backlog = families["pulsar_lens_subscription_backlog_messages"].samples
    assert sorted((s.labels["cluster"], s.labels["topic"]) for s in backlog) == sorted(
        [("east", f"persistent://public/default/t{i}") for i in range(2)]
        + [("west", f"persistent://public/default/t{i}") for i in range(3)]
    )
    labels = {name: c for name, c in clusters_of(text).items() if c and name not in STORE_WIDE}
    snapshot = ("brokers", "topics", "subscriptions", "consumers", "plugin_errors")
    assert {f"pulsar_lens_{name}" for name in snapshot} <= set(labels)
    assert [name for name, c in labels.items() if None in c] == []  # every sample labelled
    assert lopsided(text) == {}
    series = [(s.name, sorted(s.labels.items())) for f in families.values() for s in f.samples]
    assert len(series) == len(set(map(repr, series)))  # no series twice
    lint = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
