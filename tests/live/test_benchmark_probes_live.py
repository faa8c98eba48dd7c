"""benchmarks/probes.py runs at a tiny size: the overhead part on the run's broker (every row of
its table, the probe topics deleted after) and the growth part on a ten-minute store."""

from __future__ import annotations

import re

import pytest

from benchmarks import probes
from pulsar_lens.lab.localpulsar import LocalPulsar

ROWS = (
    "child CPU, whole process",
    "child CPU while sending",
    "child start (client, subscribe, producers)",
    "peak RSS",
    "broker CPU over the child",
)


def test_probes_benchmark_runs_tiny_on_the_runs_broker(
    pulsar: LocalPulsar, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--probes", "2", "--seconds", "8", "--sizes", "10m", "--timeout", "300"]
    argv += ["--admin-url", pulsar.admin_url, "--service-url", pulsar.service_url]
    argv += ["--broker-pid", str(pulsar.pid)]
    assert probes.main(argv) == 0
    out = capsys.readouterr().out
    assert "2 probes at the default rate for 8 s, against a baseline child" in out, out
    for row in ROWS:
        assert re.search(rf"\| {re.escape(row)} \| [0-9.]+ (s|MiB) \|", out), (row, out)
    sent = re.search(r"messages: ([0-9,]+) sent, ([0-9,]+) acked", out)
    assert sent and int(sent[1].replace(",", "")) > 0, out
    assert re.search(r"probe topics deleted: 2, left: 0", out), out
    growth = [line for line in out.splitlines() if line.startswith("| 10m |")]
    assert len(growth) == 2, out  # the collector's window, and every probe row
    assert all("stopped" not in line and line.count("|") == 9 for line in growth), growth
