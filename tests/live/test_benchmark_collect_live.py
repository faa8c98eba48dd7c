"""benchmarks/collect.py runs at a tiny size on the run's broker: both ways of collecting timed
and counted, and the broker left as it was found (its namespace deleted)."""

from __future__ import annotations

import re

import pytest
import requests

from benchmarks import collect
from pulsar_lens.lab.localpulsar import LocalPulsar


def test_collect_benchmark_runs_tiny_on_the_runs_broker(
    pulsar: LocalPulsar, capsys: pytest.CaptureFixture[str]
) -> None:
    before = requests.get(f"{pulsar.admin_url}/admin/v2/namespaces/public", timeout=30).json()
    argv = ["--topics", "12", "--subscriptions", "2", "--key-shared", "3", "--rounds", "1"]
    argv += ["--admin-url", pulsar.admin_url, "--service-url", pulsar.service_url]
    assert collect.main(argv) == 0
    out = capsys.readouterr().out
    assert "created 12 topics x 2 subscriptions" in out
    # its namespace only: the 12 topics, and its topic-policies system topic `__change_events`
    # once the broker made it (the poll's bulk stats list it; the topic listing leaves it out)
    polled = re.search(r"topics in the cluster\s+(\d+)\n", out)
    assert polled and 12 <= int(polled[1]) <= 13, out
    assert re.search(r"poll\(\)\s+median\s+[0-9.]+ s\s+\d+ requests", out), out
    assert re.search(r"per-topic baseline\s+median\s+[0-9.]+ s\s+\d+ requests", out), out
    assert "(the baseline read the stats of 12 topics)" in out
    assert re.search(r"speed-up\s+[0-9.]+ x", out) and re.search(r"request ratio\s+[0-9.]+ x", out)
    after = requests.get(f"{pulsar.admin_url}/admin/v2/namespaces/public", timeout=30).json()
    assert sorted(after) == sorted(before)
