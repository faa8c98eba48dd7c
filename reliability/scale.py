"""The real `pulsar-lens collect` against a synthetic cluster served over loopback HTTP, at
100,000 to 1,000,000 topics: wall, CPU and peak memory of each stage of a poll, /metrics
and every dashboard page cold.

    .venv/bin/python -m reliability.scale [--sizes 100000,300000,1000000] [--polls 3]
    make scale SCALE_SIZES=100000,300000

For each size, `benchmarks.synth_server` serves the cluster (its own process: its CPU and
memory are reported apart, and it renders each poll's answers once, between polls: when
the previous poll's analyses are stored), then `pulsar-lens collect` polls it (Spark jobs
off, the poll deadline, interval and answer cap raised to fit the size) until K polls are
stored and the light analyses of the last one are. Waits are
bounded polls on the collector's heartbeat lines and the stored results, never fixed sleeps.

Stages of each poll, from what the collector itself reports:
- answers: the poll's calls (`durations_json["total"]` in the store's index);
- assembly: the rest of the poll (heartbeat `duration` minus the answers: `build_snapshot`);
- write: the events diff and `store.write` (heartbeat `write=`);
- analyses: every light plugin on the new snapshot (the stored results' `seconds`, summed);
- poll start to heartbeat, and to stored analyses: wall time from the poll's `collected_at`
  to its heartbeat line, and to its analyses found stored (read every half second): every
  part of the path, whatever the figures above leave out.
CPU of the collect process is read from /proc at each heartbeat and when the analyses are
stored (poll + write CPU counts from the previous poll's analyses being done; the first
poll's includes the process start). Peak memory is VmHWM of the collect process (and, for
its process tree, the sum of each process's VmHWM and the largest sum of their PSS read at
once, every five seconds: see `ProcessWatch`), also read with each heartbeat and stored
analyses (within the half second between two reads), so the stage that raised it shows.
Then /metrics is scraped twice (cold, warm) while the process is up, the process is stopped,
and every dashboard page is run cold (Streamlit's AppTest, caches cleared, as
`benchmarks/dashboard.py` does) from the stored results, in a child process.

Figures go to `artifacts/scale/<topics>.json` and a table is printed. `--check` (what the
CI test uses) also compares the topics, subscriptions and consumers stored for each poll
with what the server served in that poll's generation, and requires a stored result of
every light plugin for the last poll.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pulsar_lens.core.allocators import HUGE_PAGES, HUGE_PAGES_ENV
from pulsar_lens.lab.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "scale"
DEFAULT_SIZES = (100_000, 300_000, 1_000_000)
TICK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
BEAT = re.compile(
    r"^poll (?P<at>\S+) topics=(?P<topics>\d+) subs=(?P<subs>\d+) requests=(?P<requests>\d+) "
    r"errors=(?P<errors>\d+) duration=(?P<duration>[\d.]+)s(?: write=(?P<write>[\d.]+)s)?"
)


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 0.2) -> Any:
    """`check()`'s first truthy value, asked every `every` seconds; TimeoutError naming
    `what` (and the last value) after `timeout`."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise TimeoutError(f"waited {timeout:.0f}s for {what}; last saw {last!r}")


# --- /proc ---------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, with that of its children it has reaped (the
    analyses' helper processes, once gone, count in the forkserver that forked them); None
    once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / TICK


def _hwm_mib(pid: int) -> float:
    """The process's peak resident size."""
    return _proc_mib(pid, "status", "VmHWM:")


def _pss_mib(pid: int) -> float:
    """The process's proportional set size: pages it shares with others (a forked helper
    and the process it was forked from) count once across them, shared out."""
    return _proc_mib(pid, "smaps_rollup", "Pss:")


def _comm(pid: int) -> str:
    """The process's command name ('' once gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _proc_mib(pid: int, file: str, field: str) -> float:
    """A field in kB of /proc/<pid>/<file>, in MiB; 0 for a process gone."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            parents.setdefault(found[0], []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


@dataclass
class ProcessWatch:
    """CPU and peak memory of a process (and its tree), sampled from /proc.

    `tree_peak_mib` adds up each process's own peak (VmHWM), reached at different times and
    counting the pages forked processes share once per process: a bound from above.
    `tree_pss_peak_mib` is the largest sum of the processes' PSS seen at one sample: what the
    tree held at once, shared pages counted once, peaks between two samples missed. PSS is
    read every `pss_every` seconds only: the kernel walks every page of a process to count
    it (81 ms for 4 GiB in 4 KiB pages, holding the process's memory map). Read twice a
    second at 1,000,000 topics, where the tree holds some 10 GiB, it took the harness
    95-114 s of CPU a run and slowed the pass it watched by 3-5 s of 31-37."""

    pid: int
    pss_every: float = 5.0
    peak_mib: float = 0.0
    tree_peak_mib: float = 0.0
    tree_pss_peak_mib: float = 0.0
    cpu: float = 0.0
    commands: set[str] = field(default_factory=set)  # what ran in the tree (`comm`)
    pss_read_at: float = -math.inf

    def sample(self) -> float:
        pids = tree(self.pid)
        self.commands |= {name for p in pids if (name := _comm(p))}
        main = _hwm_mib(self.pid)
        self.peak_mib = max(self.peak_mib, main)
        self.tree_peak_mib = max(self.tree_peak_mib, sum(_hwm_mib(p) for p in pids))
        if time.monotonic() - self.pss_read_at >= self.pss_every:
            self.pss_read_at = time.monotonic()
            self.tree_pss_peak_mib = max(self.tree_pss_peak_mib, sum(_pss_mib(p) for p in pids))
        found = _stat(self.pid)
        if found is not None:
            self.cpu = found[1] + sum((_stat(p) or (0, 0.0))[1] for p in pids if p != self.pid)
        return self.cpu


# --- the two processes -----------------------------------------------------------------------


def _lines(stream: IO[str], into: queue.Queue[tuple[float, str]]) -> None:
    for line in stream:
        into.put((time.monotonic(), line.rstrip("\n")))


def reader(stream: IO[str] | None, into: queue.Queue[tuple[float, str]]) -> threading.Thread:
    """A thread queueing the lines of `stream` with their arrival time, until its end."""
    thread = threading.Thread(target=_lines, args=(stream, into), daemon=True)
    thread.start()
    return thread


def reap(proc: subprocess.Popen[str], grace: float, readers: list[threading.Thread]) -> None:
    """Wait for `proc` (killed after `grace` seconds), for its readers to reach the end of
    its output, and close its pipes."""
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for thread in readers:
        thread.join(timeout=30)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextmanager
def synth_server(
    topics: int, *, brokers: int | None, change: float, manifests: bool
) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    argv = [sys.executable, "-m", "benchmarks.synth_server", "--topics", str(topics)]
    argv += ["--change", str(change)] + (["--brokers", str(brokers)] if brokers else [])
    argv += ["--manifests"] if manifests else []
    argv += ["--render-on-request"]  # the next poll's answers are rendered between polls
    readers: list[threading.Thread] = []
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines: queue.Queue[tuple[float, str]] = queue.Queue()
        readers.append(reader(proc.stdout, lines))
        timeout = 120 + topics / 1000  # rendering 1,000,000 topics takes minutes
        _, first = wait_for("the synthetic cluster to start", lambda: _get(lines), timeout, 0.5)
        yield proc, json.loads(first)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the server stops when its stdin closes
        reap(proc, 30, readers)


def _get(lines: queue.Queue[tuple[float, str]]) -> tuple[float, str] | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None


def render_next(admin_url: str) -> None:
    """Have the server render the next poll's answers now, between two polls, rather than
    beside the next poll's calls, where its CPU would be the collector's loss."""
    fetch(f"{admin_url}/__synth/render")


def fetch(url: str, timeout: float = 60.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # loopback only
        return bytes(answer.read())


def _seconds(value: float) -> str:
    return f"{max(1, math.ceil(value))}s"


def collect_env(
    info: dict[str, Any],
    store: Path,
    interval: float,
    metrics_port: int,
    *,
    helper: bool = True,
    spark_parts: bool = False,
    huge_pages: str = "off",
) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
    cap = max(64, math.ceil(info["largest_body"] * 1.5 / MIB))
    return {
        **clean,
        "PULSAR_ADMIN_URL": info["admin_url"],
        "PULSAR_LENS_STORE": str(store),
        "PULSAR_LENS_POLL_INTERVAL": _seconds(interval),
        "PULSAR_LENS_POLL_DEADLINE": _seconds(max(120.0, 2 * interval)),
        "PULSAR_LENS_MAX_RESPONSE": str(cap),
        "PULSAR_LENS_SPARK_JOBS": "0",
        "PULSAR_LENS_METRICS_PORT": str(metrics_port),
        "PULSAR_LENS_LOG_LEVEL": "WARNING",
        "PULSAR_LENS_ANALYSES_HELPER": "1" if helper else "0",
        "PULSAR_LENS_SPARK_PARTS": "1" if spark_parts else "0",
        HUGE_PAGES_ENV: huge_pages,
        "PYTHONFAULTHANDLER": "1",
    }


# --- one size --------------------------------------------------------------------------------


@dataclass
class Poll:
    beat: dict[str, Any]
    beat_at: float
    beat_cpu: float
    beat_peak_mib: float = 0.0  # the collect process's VmHWM when the heartbeat came
    beat_wall: float = 0.0  # time.time() when the heartbeat line came
    done_at: float | None = None
    done_cpu: float | None = None
    done_peak_mib: float | None = None  # ... and when the analyses were stored
    # when the last light result was written (its `computed_at`, epoch seconds), and each
    # plugin's seconds: read as they are stored, since the results of the window's first
    # polls are gone from the store by the end of a run as long as the window
    stored_wall: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    snapshot_id: str | None = None


@dataclass
class Run:
    polls: list[Poll] = field(default_factory=list)
    start_cpu: float = 0.0
    stderr: list[str] = field(default_factory=list)
    watch: ProcessWatch | None = None
    analysed: str | None = None  # the first snapshot from the K-th on with every light result


def light_plugins() -> list[str]:
    from pulsar_lens.plugins.engines import engine_of
    from pulsar_lens.plugins.registry import discover

    return sorted(p.name for p in discover() if engine_of(p).per_poll)


def stored_results(store: Path) -> dict[str, dict[str, float]]:
    """{snapshot id: {plugin: seconds}} of the results stored for the newest snapshot of
    their window."""
    return {sid: {p: s for p, (s, _) in got.items()} for sid, got in _stored(store).items()}


def _stored(store: Path) -> dict[str, dict[str, tuple[float, float]]]:
    from pulsar_lens.plugins.results import ResultStore

    found: dict[str, dict[str, tuple[float, float]]] = {}
    for _, meta in ResultStore(store).entries():
        ids = meta.get("snapshot_ids") or []
        if ids:
            written = dt.datetime.fromisoformat(meta["computed_at"]).timestamp()
            found.setdefault(ids[-1], {})[meta["plugin"]] = (float(meta["seconds"]), written)
    return found


def newest_snapshot(store: Path, count: int) -> str | None:
    from pulsar_lens.core.store import Store

    index = Store(store).snapshots()
    return str(index["snapshot_id"].iloc[count - 1]) if len(index) >= count else None


def watch_collect(
    proc: subprocess.Popen[str],
    store: Path,
    polls: int,
    light: list[str],
    timeout: float,
    *,
    readers: list[threading.Thread],
    analysed: Callable[[], None] = lambda: None,
) -> Run:
    """Follow the collect process until `polls` heartbeats and the light analyses of the
    last poll are stored; /proc is sampled all along. `analysed()` is called when a poll's
    analyses are stored (the server then renders the next poll's answers)."""
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[tuple[float, str]] = queue.Queue()
    run = Run(watch=ProcessWatch(proc.pid))
    errors: queue.Queue[tuple[float, str]] = queue.Queue()
    readers += [reader(proc.stdout, lines), reader(proc.stderr, errors)]

    def said() -> list[str]:
        while (got := _get(errors)) is not None:
            run.stderr.append(got[1])
        return run.stderr

    watch = run.watch
    assert watch is not None
    run.start_cpu = watch.sample()

    def progress() -> bool:
        cpu = watch.sample()
        while (got := _get(lines)) is not None:
            at, line = got
            if m := BEAT.match(line):
                wall = time.time() - (time.monotonic() - at)
                run.polls.append(Poll(m.groupdict(), at, cpu, watch.peak_mib, wall))
        results = _stored(store) if run.polls else {}
        for i, poll in enumerate(run.polls):
            if poll.snapshot_id is None:
                poll.snapshot_id = newest_snapshot(store, i + 1)
            done = results.get(poll.snapshot_id or "", {})
            if poll.done_at is None and poll.snapshot_id and set(light) <= set(done):
                poll.done_at, poll.done_cpu = time.monotonic(), cpu
                poll.done_peak_mib = watch.peak_mib
                poll.stored_wall = max(done[p][1] for p in light)
                poll.seconds = {p: seconds for p, (seconds, _) in done.items()}
                analysed()
        if proc.poll() is not None:
            tail = "\n".join(said()[-20:])
            raise RuntimeError(f"collect exited {proc.returncode} early:\n{tail}")
        # a short interval may start poll K + 1 before poll K was analysed; the results
        # worker then analyses the newest snapshot only: any poll from the K-th on will do
        return any(p.done_at is not None for p in run.polls[polls - 1 :])

    wait_for(f"{polls} polls and the analyses of the last", progress, timeout, every=0.5)
    run.analysed = next(p.snapshot_id for p in run.polls[polls - 1 :] if p.done_at is not None)
    return run


def scrape(port: int) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/metrics"
    timings = []
    for _ in range(2):
        started = time.perf_counter()
        body = fetch(url, timeout=600)
        timings.append(round(time.perf_counter() - started, 3))
    families = {ln.split()[2] for ln in body.decode().splitlines() if ln.startswith("# TYPE ")}
    return {
        "cold_seconds": timings[0],
        "warm_seconds": timings[1],
        "bytes": len(body),
        "families": len(families),
    }


def stages(store: Path, run: Run) -> list[dict[str, Any]]:
    from pulsar_lens.core.store import Store

    index = Store(store).snapshots()
    out = []
    for i, poll in enumerate(run.polls):
        row = index.iloc[i] if i < len(index) else None
        durations = json.loads(row["durations_json"]) if row is not None else {}
        answers = float(durations.get("total", math.nan))
        duration = float(poll.beat["duration"])
        before = run.start_cpu if i == 0 else run.polls[i - 1].done_cpu
        analyses = poll.seconds
        # from the poll's start (its collected_at) to its heartbeat: the calls, the assembly,
        # the events and the write, whatever each figure leaves out
        begun = row["collected_at"].timestamp() if row is not None else math.nan
        to_beat = poll.beat_wall - begun
        # the analyses' own stamp; the harness sees them up to a look (0.5 s) later
        last = poll.stored_wall
        stored = last - begun if last is not None else None
        seen = to_beat + (poll.done_at - poll.beat_at) if poll.done_at else None
        out.append(
            {
                "poll": i + 1,
                "snapshot_id": poll.snapshot_id,
                "topics": int(poll.beat["topics"]),
                "requests": int(poll.beat["requests"]),
                "errors": int(poll.beat["errors"]),
                "answers_seconds": round(answers, 3),
                "assembly_seconds": round(duration - answers, 3),
                "write_seconds": float(poll.beat["write"]) if poll.beat["write"] else None,
                "analyses_seconds": round(sum(analyses.values()), 3),
                "poll_to_heartbeat_seconds": round(to_beat, 2),
                "poll_to_stored_seconds": round(stored, 2) if stored is not None else None,
                "poll_to_seen_seconds": round(seen, 2) if seen is not None else None,
                "analyses_wall_seconds": (
                    round(last - poll.beat_wall, 2) if stored is not None else None
                ),
                "poll_and_write_cpu_seconds": (
                    round(poll.beat_cpu - before, 2) if before is not None else None
                ),
                "analyses_cpu_seconds": (
                    round(poll.done_cpu - poll.beat_cpu, 2) if poll.done_cpu else None
                ),
                # VmHWM only grows: a stage that raised it holds the peak so far
                "peak_mib_after_write": round(poll.beat_peak_mib, 1),
                "peak_mib_after_analyses": (
                    round(poll.done_peak_mib, 1) if poll.done_peak_mib is not None else None
                ),
                "plugins": {k: round(v, 3) for k, v in sorted(analyses.items())},
                "families": {k: round(v, 3) for k, v in sorted(durations.items())},
                "row_counts": json.loads(row["row_counts_json"]) if row is not None else {},
                "unexpected_errors": unexpected_errors(row),
            }
        )
    return out


DEFERRED = re.compile(r"per-topic stats of \d+ of \d+ topic\(s\) deferred to the next polls")
"""The one error every poll of a large synthetic cluster has: the detail budget (500 calls)
leaves most topics' own stats calls to later polls, as it would on a real cluster."""


def unexpected_errors(row: Any) -> list[str]:
    """The errors a poll stored (its index row's) but the detail budget's deferral note."""
    if row is None:
        return []
    errors = json.loads(row["errors_json"] or "[]")
    return [
        f"{e.get('endpoint')}: {e.get('message')}"
        for e in errors
        if not DEFERRED.search(str(e.get("message")))
    ]


def served_problems(
    stages: list[dict[str, Any]], generations: list[dict[str, Any]]
) -> dict[int, str]:
    """The polls (by number) that did not store what the server served them (counted, so at
    any size), with their unexpected errors and, when the poll waited for the server to render
    its answers, why: it began before the previous poll's analyses were stored, so its calls
    met a server still rendering, and the first of them (the cluster list) may time out."""
    problems: dict[int, str] = {}
    for stage, served in zip(stages, generations, strict=False):
        counts = stage["row_counts"]
        short = [
            f"{counts.get(table, 0):,} of {served[table]:,} {table}"
            for table in ("topics", "subscriptions", "consumers")
            if counts.get(table, 0) != served[table]
        ]
        if not short and not stage["unexpected_errors"]:
            continue
        said = f"poll {stage['poll']}: stored " + (", ".join(short) if short else "every row")
        if stage["unexpected_errors"]:
            said += "; its errors: " + "; ".join(stage["unexpected_errors"][:3])
        waited = served.get("waited_seconds") or 0.0
        if waited >= 1.0:
            said += (
                f"; it waited {waited:.1f} s for the server to render its answers (it began "
                "before the previous poll's analyses were stored): a longer --interval leaves "
                "room for them"
            )
        problems[stage["poll"]] = said
    return problems


def check_stored(store: Path, run: Run, admin_url: str, light: list[str]) -> list[str]:
    """What the store lacks of what the server served, poll by poll (empty when nothing)."""
    from pulsar_lens.core.store import Store

    s, problems = Store(store), []
    for i, poll in enumerate(run.polls):
        served = json.loads(fetch(f"{admin_url}/__synth/manifest?generation={i}"))
        ids = [poll.snapshot_id or ""]
        topics = set(s.read("topics", snapshot_ids=ids)["topic"].to_pylist())
        subs_t = s.read("subscriptions", snapshot_ids=ids)
        subs = set(
            zip(subs_t["topic"].to_pylist(), subs_t["subscription"].to_pylist(), strict=True)
        )
        cons_t = s.read("consumers", snapshot_ids=ids)
        cons = set(
            zip(
                cons_t["topic"].to_pylist(),
                cons_t["subscription"].to_pylist(),
                cons_t["consumer_name"].to_pylist(),
                strict=True,
            )
        )
        for what, stored, want in (
            ("topics", topics, set(served["topics"])),
            ("subscriptions", subs, {tuple(x) for x in served["subscriptions"]}),
            ("consumers", cons, {tuple(x) for x in served["consumers"]}),
        ):
            if stored != want:
                missing, extra = len(want - stored), len(stored - want)
                problems.append(f"poll {i + 1}: {what}: {missing} served not stored, {extra} extra")
    missing = sorted(set(light) - set(stored_results(store).get(run.analysed or "", {})))
    if missing:
        problems.append(f"no stored result for the last poll of: {', '.join(missing)}")
    return problems


def run_size(
    topics: int,
    *,
    polls: int,
    change: float,
    brokers: int | None,
    interval: float | None,
    work: Path,
    pages: bool,
    check: bool,
    helper: bool = True,
    spark_parts: bool = False,
    huge_pages: str = "off",
) -> dict[str, Any]:
    interval = interval or max(15.0, topics * 0.002)
    store = work / "store"
    light = light_plugins()
    figures: dict[str, Any] = {
        "topics": topics,
        "polls": polls,
        "change": change,
        "interval_seconds": interval,
        "analyses_helper": helper,
        "spark_parts": spark_parts,
        "huge_pages": huge_pages,
        "load_average": os.getloadavg(),
    }
    with synth_server(topics, brokers=brokers, change=change, manifests=check) as (server, info):
        figures["server_start"] = info
        server_cpu_before = (_stat(server.pid) or (0, 0.0))[1]
        port = free_port()  # below the ephemeral range: nothing takes it before collect
        env = collect_env(
            info,
            store,
            interval,
            port,
            helper=helper,
            spark_parts=spark_parts,
            huge_pages=huge_pages,
        )
        argv = [sys.executable, "-m", "pulsar_lens.cli.main", "collect", "--store", str(store)]
        collect = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        readers: list[threading.Thread] = []
        try:
            run = watch_collect(
                collect,
                store,
                polls,
                light,
                timeout=polls * interval * 3 + 600,
                readers=readers,
                analysed=lambda: render_next(info["admin_url"]),
            )
            run.polls = run.polls[:polls]  # a poll begun before the stop is not measured
            figures["metrics"] = scrape(port)
            watch = run.watch
            assert watch is not None
            watch.sample()
            figures["collect"] = {
                "peak_rss_mib": round(watch.peak_mib, 1),
                "tree_peak_rss_mib": round(watch.tree_peak_mib, 1),
                "tree_peak_pss_mib": round(watch.tree_pss_peak_mib, 1),
                "cpu_seconds": round(watch.cpu, 2),
                "commands": sorted(watch.commands),
            }
        finally:
            collect.send_signal(signal.SIGTERM)
            reap(collect, 120, readers)
        served = json.loads(fetch(f"{info['admin_url']}/__synth/stats"))
        served["cpu_during_polls_seconds"] = round(
            (_stat(server.pid) or (0, 0.0))[1] - server_cpu_before, 2
        )
        figures["server"] = served
        figures["load_average_after_polls"] = os.getloadavg()
        figures["stages"] = stages(store, run)
        incomplete = served_problems(figures["stages"], served["generations"])
        figures["problems"] = list(incomplete.values())
        for stage in figures["stages"]:  # its figures are not a poll's: say so beside them
            stage["complete"] = stage["poll"] not in incomplete
        if check:
            figures["problems"] += check_stored(store, run, info["admin_url"], light)
    on_disk = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    figures["store_mib"] = round(on_disk / MIB, 1)
    if pages:
        figures["pages"] = time_pages(store, interval)
    return figures


# --- the dashboard's pages -----------------------------------------------------------------


def time_pages(store: Path, interval: float) -> dict[str, Any]:
    """Every page cold from the stored results, in a child process of its own (with the
    collector's interval, so that the status banner judges the polls' age by it)."""
    argv = [sys.executable, "-m", "reliability.scale", "--pages-of", str(store)]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
    env = {**clean, "PULSAR_LENS_STORE": str(store), "PULSAR_LENS_SPARK_JOBS": "0"}
    env["PULSAR_LENS_POLL_INTERVAL"] = _seconds(interval)
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr[-2000:]}"}
    return dict(json.loads(lines[-1]))


def pages_of(store: Path) -> dict[str, Any]:
    import logging

    from benchmarks import dashboard as bench
    from pulsar_lens.core.store import Store
    from pulsar_lens.plugins.engines import engine_of
    from pulsar_lens.plugins.registry import discover

    logging.disable(logging.WARNING)
    plugins = list(discover())
    light = {p.name for p in plugins if engine_of(p).per_poll}
    pages = bench.page_list(plugins)
    # a poll begun just before the collector was stopped may be stored without its analyses:
    # then the pages of the newest snapshot draw them on demand, and the figures say so
    ids = Store(store).snapshots()["snapshot_id"]
    newest = str(ids.iloc[-1]) if len(ids) else None
    analysed = set(stored_results(store).get(newest or "", {}))
    on_demand = sorted(light - analysed)
    bench.cold(bench.OVERVIEW, [], "imports")  # module imports, paid once by a server
    seconds: dict[str, float] = {}
    problems: list[str] = []
    for page in pages:
        stored = True if page in light and page not in on_demand else None
        took, _ = bench.cold(page, problems, f"{page} cold", stored=stored)
        seconds[page] = round(took, 3)
    return {
        "cold_seconds": seconds,
        "problems": problems,
        "store": str(store),
        "newest_snapshot": newest,
        "analysed_on_demand": on_demand,
    }


# --- the report ------------------------------------------------------------------------------


def _cpu(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


def table(figures: dict[str, Any]) -> str:
    rows = [
        f"{figures['topics']:,} topics, {len(figures['server_start']['brokers'])} brokers, "
        f"{figures['server_start']['bulk_bytes'] / 1e6:,.0f} MB of broker-stats JSON a poll, "
        f"load average {figures['load_average'][0]:.1f}",
        "poll | answers | assembly | write | analyses | poll+write CPU | analyses CPU | errors"
        " | peak MiB after write, analyses | poll start to heartbeat, to stored",
    ]
    for s in figures["stages"]:
        marked = "" if s.get("complete", True) else " (incomplete)"
        rows.append(
            f"{s['poll']}{marked} | {s['answers_seconds']:.1f}s | {s['assembly_seconds']:.1f}s | "
            f"{s['write_seconds'] or 0:.1f}s | {s['analyses_seconds']:.1f}s | "
            f"{_cpu(s['poll_and_write_cpu_seconds'])} | {_cpu(s['analyses_cpu_seconds'])} | "
            f"{s['errors']} | {s['peak_mib_after_write']:,.0f}, "
            f"{s['peak_mib_after_analyses'] or 0:,.0f} | {s['poll_to_heartbeat_seconds']:.1f}s, "
            f"{s['poll_to_stored_seconds'] or 0:.1f}s"
        )
    c, m, srv = figures["collect"], figures["metrics"], figures["server"]
    rows.append(
        f"collect: peak RSS {c['peak_rss_mib']:,.0f} MiB (tree: peaks summed "
        f"{c['tree_peak_rss_mib']:,.0f}, PSS at once {c['tree_peak_pss_mib']:,.0f}), "
        f"CPU {c['cpu_seconds']:.0f}s; /metrics {m['cold_seconds']}s cold, "
        f"{m['warm_seconds']}s warm; server CPU during the polls "
        f"{srv['cpu_during_polls_seconds']}s, peak RSS {srv['peak_rss_mib']:,.0f} MiB"
    )
    pages = figures.get("pages", {}).get("cold_seconds", {})
    if pages:
        slowest = sorted(pages.items(), key=lambda kv: -kv[1])[:5]
        rows.append(
            f"pages cold: {len(pages)} in {sum(pages.values()):.1f}s; slowest "
            + ", ".join(f"{k} {v:.1f}s" for k, v in slowest)
        )
    late = figures.get("pages", {}).get("analysed_on_demand")
    if late:
        rows.append(f"pages that analysed on demand (newest poll not analysed yet): {late}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    p.add_argument("--polls", type=int, default=3)
    p.add_argument("--change", type=float, default=0.1, help="share of topics changing a poll")
    p.add_argument("--brokers", type=int, default=None, help="default: 1 per 50,000 topics, ≥ 3")
    p.add_argument("--interval", type=float, default=None, help="seconds; default 2 ms a topic")
    p.add_argument("--no-pages", action="store_true")
    p.add_argument("--no-helper", action="store_true", help="every analysis in the collect process")
    p.add_argument("--check", action="store_true", help="compare the store with what was served")
    p.add_argument(
        "--spark-parts", action="store_true", help="the bulk answers read on Spark (local[2])"
    )
    p.add_argument(
        "--huge-pages",
        choices=HUGE_PAGES,
        default="off",
        help=f"the collect process's {HUGE_PAGES_ENV} (default off, as the product's)",
    )
    p.add_argument("--out", type=Path, default=ARTIFACTS)
    p.add_argument(
        "--keep", action="store_true", help="keep each size's store as OUT/store-SIZE, to open"
    )
    p.add_argument("--pages-of", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.pages_of:
        print(json.dumps(pages_of(args.pages_of)), flush=True)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    for size in [int(s) for s in args.sizes.split(",") if s]:
        with tempfile.TemporaryDirectory(prefix=f"pulsar-lens-scale-{size}-") as work:
            figures = run_size(
                size,
                polls=args.polls,
                change=args.change,
                brokers=args.brokers,
                interval=args.interval,
                work=Path(work),
                pages=not args.no_pages,
                check=args.check,
                helper=not args.no_helper,
                spark_parts=args.spark_parts,
                huge_pages=args.huge_pages,
            )
            if args.keep:
                kept = args.out / f"store-{size}"
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(Path(work) / "store", kept)
        (args.out / f"{size}.json").write_text(json.dumps(figures, indent=1, default=str))
        print(table(figures), flush=True)
        for problem in figures.get("problems", []):
            print(f"  problem: {problem}", flush=True)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
