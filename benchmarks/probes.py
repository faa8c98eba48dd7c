"""What latency probes cost the process that runs them, and how `unload-latency` grows with them.

    .venv/bin/python -m benchmarks.probes [--probes 4] [--seconds 60] [--sizes 1h,1d,7d]
        [--admin-url URL --service-url URL --broker-pid PID]

1. Overhead: a real standalone on 127.0.0.1 (`pulsar_lens.lab.localpulsar`), or a running
   test broker named by the three flags (its JVM's pid for the broker's CPU). A child process runs a
   `ProbeRunner` on `--probes` bundles (those of `public/default`; a namespace of its own
   with that many bundles when there are more) at the default rate for `--seconds`, writing
   to a Store through `store_sink`; a baseline child does the same setup (imports, client,
   store) and sends nothing for as long. Their CPU seconds (user + sys, from `os.wait4`) and
   peak RSS (each child's VmHWM) are compared: the difference is the probes' cost, as a share
   of one core and in MiB. The child also times its own CPU over the sending alone (no
   start-up, no drain), and the broker's CPU over each child comes from /proc. Messages/s are
   the child's own counts over its sending time and the broker's `msgRateIn` summed over the
   probe topics (median of samples every 5 s). The probe topics are deleted afterwards.
2. Growth: synthetic stores (`benchmarks/synth_probes.py`: 4 probes at 10 msg/s, an unload
   every 10 minutes, a poll every 30 s) of each of `--sizes`, cached under
   ~/.cache/pulsar-lens/bench/probes-<size>. Each is analysed cold in a child process:
   `plugins.runner.run(unload-latency)` as the collector runs it (its `history` of 60 polls:
   the probe rows written since the oldest of them, about 30 minutes), and the same analysis
   on every probe row of the store (Inputs made with the runner's `required_results` and
   `run_on_inputs`; bundle-ownership's events still come from its own 60 polls). A child is
   stopped past `--timeout` seconds or `--max-mib` of RSS. Prints rows, seconds, peak MiB and
   seconds per million rows read.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pulsar_lens.lab.runtime import cache_root

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 2**20


# ---- children --------------------------------------------------------------------------------


def child_probe(args: argparse.Namespace, *, send: bool) -> dict[str, Any]:
    """The probe child (send=True) or its baseline: same imports, client and store."""
    import resource

    import pulsar  # noqa: F401 - imported before the clock starts, in both children alike

    from pulsar_lens.collectors.probe import ProbeRunner, ProbeTarget
    from pulsar_lens.collectors.probe_loop import store_sink
    from pulsar_lens.core.logs import pulsar_client
    from pulsar_lens.core.mutations import MutationSettings
    from pulsar_lens.core.store import Store

    store = Store(args.store)
    targets = [ProbeTarget(*t) for t in json.loads(args.targets)]
    # the parent sets PULSAR_LENS_ALLOW_MUTATIONS=1 for its children: probes create topics
    mutations = MutationSettings.from_env(os.environ)
    runner = ProbeRunner(
        args.service_url, targets, store_sink(store, "standalone"), mutations=mutations
    )
    if not send:
        client = pulsar_client(args.service_url)
    cpu0, wall0 = _self_cpu(resource), time.monotonic()
    if send:
        runner.start()
    cpu1, wall1 = _self_cpu(resource), time.monotonic()
    time.sleep(args.seconds)
    cpu2, wall2 = _self_cpu(resource), time.monotonic()
    if send:
        runner.stop()
    else:
        client.close()
    counts = runner.counts
    return {
        "start_cpu": cpu1 - cpu0,
        "start_s": wall1 - wall0,
        "steady_cpu": cpu2 - cpu1,
        "steady_s": wall2 - wall1,
        "sent": counts.sent,
        "acked": counts.acked,
        "received": counts.received,
        "duplicates": counts.duplicates,
        "errors": counts.errors,
        "written": counts.written,
    }


def _self_cpu(resource: Any) -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return float(usage.ru_utime + usage.ru_stime)


def child_growth(args: argparse.Namespace) -> dict[str, Any]:
    """unload-latency on a store, cold: over its default window, or over every probe row."""
    from pulsar_lens.api import Inputs
    from pulsar_lens.core.store import Store
    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.registry import discover

    loaded = discover(entry_points=False, plugin_dirs=()).get("unload-latency")
    store = Store(args.store)
    before = _rss_mib()
    started = time.perf_counter()
    if args.mode == "window":
        out = runner.run(loaded, store, None, use_cache=False, use_stored=False)
        read = out.timings.get("load", 0.0)
    else:
        results = runner.required_results(loaded, store, use_cache=False)
        probes = store.read("probes").to_pandas()
        inputs = Inputs(tables={"probes": probes}, snapshots=store.snapshots(), results=results)
        read = time.perf_counter() - started
        out = runner.run_on_inputs(loaded, inputs)
    summary = out.result.summary
    return {
        "seconds": time.perf_counter() - started,
        "read_s": read,
        "rows": summary["probe_messages"],
        "events": summary["events"],
        "measured": summary["measured"],
        "rss_before_mib": before,
    }


def _rss_mib(pid: int | str = "self", field: str = "VmRSS") -> float:
    """Resident set size now (or its high-water mark, `VmHWM`), from /proc; 0 when gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def child_answer(answer: dict[str, Any]) -> str:
    """A child's JSON line, with its own peak RSS since exec (`ru_maxrss` of a forked child
    also counts the parent's pages at the fork, which in the parent can be a whole store)."""
    return json.dumps({**answer, "hwm_mib": _rss_mib(field="VmHWM")})


# ---- the parent ------------------------------------------------------------------------------


def run_child(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float,
    max_mib: float = 0.0,
    broker_pid: int | None = None,
    during: Any = None,
) -> dict[str, Any]:
    """`python -m benchmarks.probes --child ...` in its own process: its JSON answer plus its
    CPU seconds (`os.wait4`), peak RSS (`child_answer`), wall time, the broker's CPU meanwhile,
    and why it was stopped if it was (past `timeout` s or `max_mib` of RSS). `during(elapsed)`
    is called every 0.2 s while it runs."""
    command = [sys.executable, "-m", "benchmarks.probes", "--child", *args]
    broker0 = _proc_cpu(broker_pid)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True
        )
        started, stopped, seen = time.monotonic(), "", 0.0
        while True:
            finished, status, usage = os.wait4(process.pid, os.WNOHANG)
            if finished:
                break
            elapsed = time.monotonic() - started
            seen = max(seen, _rss_mib(process.pid))
            if not stopped and elapsed > timeout:
                stopped = f"stopped after {timeout:.0f} s"
            elif not stopped and max_mib and seen > max_mib:
                stopped = f"stopped at {max_mib:,.0f} MiB after {elapsed:.0f} s"
            if stopped:
                os.killpg(process.pid, signal.SIGKILL)
            elif during is not None:
                during(elapsed)
            time.sleep(0.2)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    answer: dict[str, Any] = json.loads(lines[-1]) if lines and not stopped else {}
    if not answer and not stopped:
        stopped = f"failed (exit {process.returncode}): {stderr.strip()[-400:]}"
    return {
        **answer,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mib": answer.get("hwm_mib") or seen,  # sampled every 0.2 s when it was stopped
        "wall": wall,
        "broker_cpu": _proc_cpu(broker_pid) - broker0,
        "stopped": stopped,
    }


def _proc_cpu(pid: int | None) -> float:
    """User + system CPU seconds of a running process, from /proc/PID/stat."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def overhead(probes: int, seconds: float, broker: Any = None) -> dict[str, Any]:
    """Run the baseline and the probe child against a fresh local broker, or `broker` (one
    already running, with its `admin_url`, `service_url` and `pid`); their figures."""
    from pulsar_lens.collectors.admin import AdminClient
    from pulsar_lens.collectors.probe import ProbeRunner
    from pulsar_lens.collectors.probe_loop import targets_of
    from pulsar_lens.core.store import Store
    from pulsar_lens.lab.localpulsar import LocalPulsar

    started = contextlib.nullcontext(broker) if broker is not None else LocalPulsar()
    with started as broker, tempfile.TemporaryDirectory() as scratch:
        admin = AdminClient(broker.admin_url)
        namespace = "public/default"
        bounds = admin.get_json(f"/admin/v2/namespaces/{namespace}/bundles")["boundaries"]
        if probes > len(bounds) - 1:  # a namespace of our own broker with enough bundles
            namespace = "public/probe-bench"
            admin.put(
                f"/admin/v2/namespaces/{namespace}", json_body={"bundles": {"numBundles": probes}}
            )
            bounds = admin.get_json(f"/admin/v2/namespaces/{namespace}/bundles")["boundaries"]
        pairs = [(namespace, f"{lo}_{hi}") for lo, hi in itertools.pairwise(bounds)]
        targets = targets_of(pairs[:probes])
        common = [
            "--service-url",
            broker.service_url,
            "--seconds",
            str(seconds),
            "--targets",
            json.dumps([[t.namespace, t.bundle, t.topic] for t in targets]),
        ]
        env = {**os.environ, "PULSAR_LENS_ALLOW_MUTATIONS": "1"}
        limit = seconds + 120
        base = run_child(
            ["baseline", "--store", f"{scratch}/base", *common],
            env=env,
            timeout=limit,
            broker_pid=broker.pid,
        )
        rates: list[float] = []
        sampler = _RateSampler(admin, [t.topic for t in targets], seconds, rates)
        probe = run_child(
            ["probe", "--store", f"{scratch}/probe", *common],
            env=env,
            timeout=limit,
            broker_pid=broker.pid,
            during=sampler,
        )
        store = Store(f"{scratch}/probe")
        stored = store.read("probes").num_rows if (store.root / "probes").exists() else 0
        disk = sum(p.stat().st_size for p in store.root.rglob("*.parquet"))
        deleted = ProbeRunner(broker.service_url, targets, lambda rows: None).delete_topics(admin)
        left = admin.get_json(f"/admin/v2/persistent/{namespace}")
        remaining = [t.topic for t in targets if any(x.startswith(t.topic) for x in left)]
        admin.close()
    return {
        "probes": len(targets),
        "seconds": seconds,
        "base": base,
        "probe": probe,
        "broker_rates": rates,
        "stored_rows": stored,
        "stored_bytes": disk,
        "deleted": len(deleted),
        "remaining": remaining,
    }


class _RateSampler:
    """Every 5 s of the probe child's sending, the broker's msgRateIn summed over the probe
    topics (stats refresh every 2 s on the local broker)."""

    def __init__(self, admin: Any, topics: list[str], seconds: float, out: list[float]) -> None:
        self.admin, self.topics, self.seconds, self.out = admin, topics, seconds, out
        self.next = min(15.0, seconds / 2)

    def __call__(self, elapsed: float) -> None:
        from pulsar_lens.core.errors import CollectorError

        if elapsed < self.next or elapsed > self.seconds:
            return
        total = 0.0
        try:
            for topic in self.topics:
                path = "/admin/v2/" + topic.replace("://", "/", 1) + "/stats"
                total += float(self.admin.get_json(path).get("msgRateIn", 0.0))
        except CollectorError:  # a topic the child has not created yet: ask again in 1 s
            self.next += 1.0
            return
        self.next += 5.0
        self.out.append(total)


def growth(sizes: Sequence[str], *, timeout: float, max_mib: float) -> list[dict[str, Any]]:
    """For each size: the cached synthetic store, then both runs of unload-latency."""
    from benchmarks.synth_probes import cached
    from pulsar_lens.core.settings import parse_duration

    rows = []
    for size in sizes:
        hours = parse_duration(size).total_seconds() / 3600
        root = cache_root() / "bench" / f"probes-{size}"
        facts = cached(root, hours=hours)
        for mode in ("window", "whole"):
            answer = run_child(
                ["growth", "--store", str(root), "--mode", mode], timeout=timeout, max_mib=max_mib
            )
            rows.append({"size": size, "mode": mode, "store": facts, **answer})
            print(_growth_line(rows[-1]), flush=True)
    return rows


# ---- printing --------------------------------------------------------------------------------


def print_overhead(o: dict[str, Any]) -> None:
    base, probe, seconds = o["base"], o["probe"], o["seconds"]
    for name, child in (("baseline", base), ("probe", probe)):
        if child["stopped"]:
            print(f"{name} child {child['stopped']}")
            return
    extra_cpu = probe["cpu"] - base["cpu"]
    steady = probe["steady_cpu"] - base["steady_cpu"]
    sent_rate = probe["sent"] / probe["steady_s"]
    broker = statistics.median(o["broker_rates"]) if o["broker_rates"] else float("nan")
    broker_extra = probe["broker_cpu"] / probe["wall"] - base["broker_cpu"] / base["wall"]
    print(f"{o['probes']} probes at the default rate for {seconds:g} s, against a baseline child")
    print("| | baseline | probes | extra |")
    print("|---|---|---|---|")
    print(
        f"| child CPU, whole process | {base['cpu']:.2f} s | {probe['cpu']:.2f} s | "
        f"{extra_cpu:.2f} s = {100 * extra_cpu / seconds:.1f} % of a core |"
    )
    print(
        f"| child CPU while sending | {base['steady_cpu']:.2f} s | {probe['steady_cpu']:.2f} s | "
        f"{100 * steady / probe['steady_s']:.1f} % of a core |"
    )
    print(
        f"| child start (client, subscribe, producers) | {base['start_s']:.2f} s | "
        f"{probe['start_s']:.2f} s | {probe['start_cpu']:.2f} s CPU |"
    )
    print(
        f"| peak RSS | {base['peak_mib']:.0f} MiB | {probe['peak_mib']:.0f} MiB | "
        f"{probe['peak_mib'] - base['peak_mib']:.0f} MiB |"
    )
    print(
        f"| broker CPU over the child | {base['broker_cpu']:.2f} s | {probe['broker_cpu']:.2f} s "
        f"| {100 * broker_extra:.1f} % of a core |"
    )
    print(
        f"messages: {probe['sent']:,} sent, {probe['acked']:,} acked, {probe['received']:,} "
        f"received, {probe['duplicates']} duplicates, {probe['errors']} errors; "
        f"{sent_rate:.1f} msg/s sent; broker msgRateIn over the probe topics: median "
        f"{broker:.1f} msg/s of {len(o['broker_rates'])} samples"
    )
    print(
        f"store: {o['stored_rows']:,} probe rows, {o['stored_bytes'] / 1024:,.0f} KiB "
        f"({o['stored_bytes'] / max(1, o['stored_rows']):.0f} B/row, many small batch files); "
        f"probe topics deleted: {o['deleted']}, left: {len(o['remaining'])}"
    )


def _growth_line(r: dict[str, Any]) -> str:
    store = r["store"]
    head = (
        f"| {r['size']} | {store['probe_rows']:,} | {store['bytes'] / MIB:,.0f} MiB | {r['mode']} "
    )
    if r["stopped"]:
        return head + f"| - | {r['stopped']} | {r['peak_mib']:,.0f} | - |"
    per_m = r["seconds"] / max(r["rows"], 1) * 1e6
    return (
        head + f"| {r['rows']:,} | {r['seconds']:.2f} s (read {r['read_s']:.2f}) "
        f"| {r['peak_mib']:,.0f} | {per_m:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--probes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sizes", default="1h,1d,7d")
    parser.add_argument("--timeout", type=float, default=600.0, help="per growth run, seconds")
    parser.add_argument("--max-mib", type=float, default=8192.0, help="per growth run, RSS")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--admin-url", help="a running test broker's, instead of a fresh one")
    parser.add_argument("--broker-pid", type=int, help="with --admin-url: its JVM, for its CPU")
    parser.add_argument("--child", choices=("probe", "baseline", "growth"), help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--service-url", help="with --admin-url: its binary protocol URL")
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("window", "whole"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if args.child == "growth":
            answer = child_growth(args)
        else:
            answer = child_probe(args, send=args.child == "probe")
        print(child_answer(answer), flush=True)
        return 0
    if not 1 <= args.probes <= 64 or args.seconds <= 0:
        parser.error("--probes must be 1..64 and --seconds positive")
    running = None
    if args.admin_url or args.service_url or args.broker_pid:
        if not (args.admin_url and args.service_url and args.broker_pid):
            parser.error("--admin-url, --service-url and --broker-pid go together")
        running = argparse.Namespace(
            admin_url=args.admin_url, service_url=args.service_url, pid=args.broker_pid
        )
    if not args.skip_overhead:
        print_overhead(overhead(args.probes, args.seconds, running))
    if not args.skip_growth:
        print("\nunload-latency, cold, in a child process per run")
        print(
            "| store | probe rows | on disk | reads | rows read | seconds | peak MiB | s/M rows |"
        )
        print("|---|---|---|---|---|---|---|---|")
        growth([s for s in args.sizes.split(",") if s], timeout=args.timeout, max_mib=args.max_mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
