"""What the load and soak runs share: the figures file, a measured `pulsar-lens` child,
topics and subscriptions made over REST, Key_Shared consumers, /proc samples and page runs."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from benchmarks.collect import subscribe_all

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "artifacts" / "reliability"
APP = ROOT / "dashboard" / "app.py"
MIB = 1024 * 1024
CREATE_WORKERS = 8  # concurrent admin calls while setting up: bounded


def scale(name: str, default: int) -> int:
    """A size of the run; RELIABILITY_<NAME> overrides it for a quick local try."""
    return int(os.environ.get(f"RELIABILITY_{name}", default))


def write_figures(name: str, figures: Mapping[str, Any]) -> Path:
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return path


def lens_env(store: Path, **extra: str) -> dict[str, str]:
    """The environment of a `pulsar-lens` child: ours without PULSAR_* settings, plus these."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
    return {**clean, "PYTHONFAULTHANDLER": "1", "PULSAR_LENS_STORE": str(store), **extra}


def lens_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pulsar_lens.cli.main", *args]


# --- a child process measured by wait4 ------------------------------------------------------


@dataclass
class Finished:
    returncode: int
    seconds: float
    peak_rss_bytes: int  # the child's own ru_maxrss (wait4), not its children's
    cpu_seconds: float
    stdout: str
    stderr: str


def run_measured(
    argv: Sequence[str], *, env: Mapping[str, str], timeout: float, workdir: Path
) -> Finished:
    """Run `argv` to its end; its wall time, peak RSS and CPU from `os.wait4`. One that
    outlives `timeout` gets SIGABRT (its thread stacks go to stderr) and the test fails."""
    out_path, err_path = workdir / "child.out", workdir / "child.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.monotonic()
        child = subprocess.Popen(argv, cwd=ROOT, env=dict(env), stdout=out, stderr=err)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                seconds = time.monotonic() - started
                child.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                child.send_signal(signal.SIGABRT)
                child.wait(timeout=30)
                raise AssertionError(
                    f"{' '.join(argv[2:5])} still ran after {timeout:g}s; stderr:\n"
                    f"{err_path.read_text(errors='replace')[-6000:]}"
                )
            time.sleep(0.05)
    return Finished(
        returncode=child.returncode,
        seconds=seconds,
        peak_rss_bytes=usage.ru_maxrss * 1024,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
    )


def own_peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- a live broker's topics, subscriptions and consumers ------------------------------------


def create_topics(
    admin_url: str, names: Sequence[str], subscriptions: int, *, deadline: float
) -> float:
    """Create each topic and its subscriptions (`benchmarks.collect.subscribe_all`); return
    the seconds it took."""
    started = time.monotonic()
    subscribe_all(admin_url, names, subscriptions, deadline=deadline)
    return time.monotonic() - started


def connect_key_shared(
    client: Any, topics: Sequence[str], per_topic: int
) -> tuple[list[Any], float]:
    """`per_topic` Key_Shared consumers on subscription sub-0 of each topic, made
    `CREATE_WORKERS` at a time; the consumers and the seconds it took."""
    import pulsar

    started = time.monotonic()

    def subscribe(job: tuple[str, int]) -> Any:
        topic, i = job
        return client.subscribe(
            topic,
            "sub-0",
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=f"ks-{i}",
            receiver_queue_size=10,
        )

    jobs = [(t, i) for t in topics for i in range(per_topic)]
    with ThreadPoolExecutor(CREATE_WORKERS) as pool:
        consumers = list(pool.map(subscribe, jobs))
    return consumers, time.monotonic() - started


def bulk_counts(admin_urls: Sequence[str], namespace: str) -> tuple[int, int, int]:
    """(topics, subscriptions, consumers) of `namespace` in the brokers' bulk stats."""
    topics = subs = consumers = 0
    for url in admin_urls:
        payload = requests.get(f"{url}/admin/v2/broker-stats/topics", timeout=60).json() or {}
        for domains in payload.get(namespace, {}).values():
            for entries in domains.values():
                for stats in entries.values():
                    topics += 1
                    for sub in stats.get("subscriptions", {}).values():
                        subs += 1
                        consumers += len(sub.get("consumers", []))
    return topics, subs, consumers


def wait_for_bulk(
    admin_urls: Sequence[str], namespace: str, want: tuple[int, int, int], *, timeout: float
) -> tuple[int, int, int]:
    """Until the brokers' bulk stats (refreshed every few seconds) show `want` at least."""
    deadline = time.monotonic() + timeout
    seen = (0, 0, 0)
    while time.monotonic() < deadline:
        seen = bulk_counts(admin_urls, namespace)
        if all(s >= w for s, w in zip(seen, want, strict=True)):
            return seen
        time.sleep(2)
    raise AssertionError(f"bulk stats showed {seen} of {want} within {timeout:g}s")


# --- /proc samples of a running child --------------------------------------------------------


@dataclass
class Sample:
    at: float
    rss_bytes: int
    fds: int
    threads: int


def sample_process(pid: int) -> Sample:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kib = int(fields["VmRSS"].split()[0])
    return Sample(
        at=time.monotonic(),
        rss_bytes=rss_kib * 1024,
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(fields["Threads"]),
    )


def tree_size(root: Path) -> tuple[int, int]:
    """(bytes, files) of every file under `root`."""
    size = files = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(FileNotFoundError):  # retention may delete it meanwhile
                size += (Path(dirpath) / name).stat().st_size
                files += 1
    return size, files


@dataclass
class Collector:
    """A `pulsar-lens collect` child whose heartbeat lines call `on_beat` as they come."""

    argv: list[str]
    env: dict[str, str]
    on_beat: Callable[[str], None]
    stderr_path: Path
    lines: list[str] = field(default_factory=list)
    beat_failures: list[str] = field(default_factory=list)  # what `on_beat` raised
    process: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    def start(self) -> Collector:
        self._err = self.stderr_path.open("w")
        self.process = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=self._err, text=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("poll "):
                try:
                    self.on_beat(line)
                except Exception as exc:  # keep reading: a full pipe would stall the child
                    self.beat_failures.append(f"{type(exc).__name__}: {exc}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self, *, timeout: float = 60.0) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=30)
            raise AssertionError(f"collect did not stop within {timeout:g}s of SIGTERM") from None
        finally:
            if self._reader is not None:
                self._reader.join(timeout=10)
            if self.process.stdout is not None:
                self.process.stdout.close()
            self._err.close()
        return code

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@contextlib.contextmanager
def collecting(collector: Collector) -> Iterator[Collector]:
    collector.start()
    try:
        yield collector
    finally:
        if collector.process is not None and collector.process.poll() is None:
            collector.stop()


def series(values: Sequence[float]) -> dict[str, float]:
    """min, max, first, last and mean of a series."""
    return {
        "first": values[0],
        "last": values[-1],
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
    }


def slope_per_hour(times: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of values over time (seconds), per hour."""
    n = len(times)
    mt, mv = sum(times) / n, sum(values) / n
    var = sum((t - mt) ** 2 for t in times)
    if var == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in zip(times, values, strict=True)) / var * 3600


# --- dashboard pages ----------------------------------------------------------------------


def _plugin_page(slug: str) -> None:
    from pulsar_lens.dashboard.app_pages.analysis import draw_analysis

    draw_analysis(slug)


def render_pages(store: Path, slugs: Sequence[str], *, timeout: float) -> dict[str, Any]:
    """The Overview (the app's entry script) and each plugin page, each from cold caches, on
    `store`: {page: {"seconds", "problems"}}. A page that raised or drew st.error is a
    problem, and so is one that outlived `timeout`."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from pulsar_lens.plugins import runner

    pages: dict[str, Any] = {}
    before = os.environ.get("PULSAR_LENS_STORE")
    os.environ["PULSAR_LENS_STORE"] = str(store)
    try:
        for page in ("overview", *slugs):
            st.cache_data.clear()
            st.cache_resource.clear()
            runner.clear_cache()
            if page == "overview":
                at = AppTest.from_file(str(APP), default_timeout=timeout)
            else:
                at = AppTest.from_function(_plugin_page, args=(page,), default_timeout=timeout)
            started = time.perf_counter()
            problems: list[str] = []
            try:
                at.run()
            except Exception as exc:  # the timeout among them: report it with the others
                problems.append(f"the run failed: {type(exc).__name__}: {exc}")
            seconds = time.perf_counter() - started
            problems += [f"exception: {e.message}" for e in at.exception]
            problems += [f"st.error: {e.value}" for e in at.error]
            pages[page] = {"seconds": round(seconds, 3), "problems": problems}
    finally:
        if before is None:
            os.environ.pop("PULSAR_LENS_STORE", None)
        else:
            os.environ["PULSAR_LENS_STORE"] = before
    return pages


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                text = Path(f"/proc/{parent}/task/{task}/children").read_text()
                kids = [int(k) for k in text.split()]
                found += kids
                todo += kids
    return found


def tree_rss_bytes(pid: int) -> int:
    """RSS of `pid` and every process below it (a Spark job worker and its JVM)."""
    total = 0
    for p in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError, KeyError, ValueError):
            total += sample_process(p).rss_bytes
    return total
