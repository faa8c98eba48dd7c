"""A real Prometheus server (Debian's /usr/bin/prometheus) for the tests: loopback only, a
temporary TSDB, a fast scrape and rule evaluation, its HTTP API read with bounded waits."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import requests
import yaml

from pulsar_lens.lab.localpulsar import free_port

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
T = TypeVar("T")


def wait_until(probe: Callable[[], T | None], *, what: str, timeout: float) -> T:
    """Call `probe` until it returns something truthy (not None, False, [] or 0); fail after
    timeout."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class PrometheusServer:
    """`with PrometheusServer(root, targets=[...]) as prom:` scrapes `targets` (host:port)
    as job "pulsar-lens" with the target `labels`, evaluating `rule_files`."""

    def __init__(
        self,
        root: Path,
        *,
        targets: Sequence[str],
        labels: Mapping[str, str],
        rule_files: Sequence[Path] = (),
        interval: str = "1s",
    ) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = {
            "global": {"scrape_interval": interval, "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {
                    "job_name": "pulsar-lens",
                    "scrape_timeout": interval,
                    "static_configs": [{"targets": list(targets), "labels": dict(labels)}],
                }
            ],
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "prometheus.log"

    def __enter__(self) -> PrometheusServer:
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config))
        argv = [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(self._ready, what=f"Prometheus ready on {self.url}", timeout=30)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"Prometheus exited: {self.log.read_text()[-2000:]}")
        try:
            return requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """The `data` of GET /api/v1/<path>; fails on a non-success answer."""
        resp = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = resp.json()
        assert body.get("status") == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def scraped(self) -> bool:
        """Every target has been scraped successfully at least once."""
        targets = self.api("targets")["activeTargets"]
        return bool(targets) and all(t["health"] == "up" for t in targets)

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The pending and firing alerts named `name` (resolved ones are not listed)."""
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == name]
