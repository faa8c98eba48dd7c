"""The broker-stats/topics answer of a synthetic cluster decoded and assembled into a snapshot:
today's reader against the candidates, side by side in one run.

    .venv/bin/python -m benchmarks.bulk_answers [--topics 100000] [--brokers 1] [--recorded]
        [--old-revision REV]

The answers come from `benchmarks.synth_server` (the scale harness's cluster; `--brokers 1`
puts every topic in one body, the largest answer a poll reads), rendered once into a
temporary folder. Each case then runs in its own child process, so its peak memory (VmHWM)
is its own: the body read from disk, decoded, and (for the full paths) parsed into topic
entries (`parse_broker_topic_stats`) and assembled (`build_snapshot`):

- `old`: the reader before msgspec (`json.loads` with the duplicate-key hook, the garbage
  collector running) and the assembly of this tree, or with `--old-revision REV` the
  collector and core code of that git revision (`fad92f7`: the assembly before its fast
  paths), so old and new run side by side;
- `new`: `collectors.answers.decode_json` and the assembly from the dicts it makes (the
  collector before the typed reader; every answer but the bulk one is still read this way);
- `typed`: the collector now: `collectors.typedstats.decode_broker_stats` reads the body
  into typed Structs (or, when that would not read it exactly, as `new` does), and the
  records are built from their attributes (`collectors.typedrecords`);
- decode only, the collector paused during each: `json.loads` without the hook, `orjson`
  (when installed: it is no dependency, and reads integers past 64 bits as floats),
  `msgspec` to builtins, and `msgspec` straight into typed Structs holding only the fields
  the records read (what a typed reader would start from; the records are not built).

pyarrow's JSON reader is not among them: it reads rows (one object a line), and this answer
is one object keyed by namespace, bundle and topic name, which it would read as one row of a
struct with a field per topic.

Prints, per case and stage, wall seconds, CPU seconds and the child's peak RSS; the `old`,
`new` and `typed` rows also count what they assembled, which must agree. `--recorded` adds the
recorded 4.0.7 answer of tests/data (tiny: a check that it reads, not a timing).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

CASES = ("old", "new", "typed", "json", "orjson", "msgspec", "msgspec-structs")
ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests/data/admin_api/default"
STAGES = ("decode", "parse", "assemble")
FULL = ("old", "new", "typed")
"""The cases that also parse and assemble."""


# --- the typed Structs of the candidate typed reader (fields named as Pulsar names them) ----


class _Draining(msgspec.Struct):
    hash: int | None = None
    unackMsgs: int | None = None
    blockedAttempts: int | None = None


class _Consumer(msgspec.Struct):
    consumerName: str | None = None
    address: str | None = None
    connectedSince: str | None = None
    clientVersion: str | None = None
    unackedMessages: int | None = None
    blockedConsumerOnUnackedMsgs: bool | None = None
    availablePermits: int | None = None
    msgRateOut: float | None = None
    messageAckRate: float | None = None
    keyHashRangeArrays: list[list[int]] | None = None
    keyHashRanges: list[str] | None = None
    drainingHashesCount: int | None = None
    drainingHashesClearedTotal: int | None = None
    drainingHashesUnackedMessages: int | None = None
    drainingHashes: list[_Draining] | None = None
    readPositionWhenJoining: str | None = None
    lastAckedTimestamp: int | None = None
    lastConsumedTimestamp: int | None = None


class _Subscription(msgspec.Struct):
    consumers: list[_Consumer] | None = None
    type: str | None = None
    msgBacklog: int | None = None
    backlogSize: int | None = None
    unackedMessages: int | None = None
    msgInReplay: int | None = None
    msgRateOut: float | None = None
    messageAckRate: float | None = None
    msgRateRedeliver: float | None = None
    blockedSubscriptionOnUnackedMsgs: bool | None = None
    keySharedMode: str | None = None
    allowOutOfOrderDelivery: bool | None = None
    activeConsumerName: str | None = None
    isDurable: bool | None = None
    lastConsumedTimestamp: int | None = None
    lastAckedTimestamp: int | None = None
    earliestMsgPublishTimeInBacklog: int | None = None


class _Publisher(msgspec.Struct):
    connectedSince: str | None = None


class _Topic(msgspec.Struct):
    publishers: list[_Publisher] | None = None
    subscriptions: dict[str, _Subscription] | None = None
    producerCount: int | None = None
    msgRateIn: float | None = None
    msgRateOut: float | None = None
    msgThroughputIn: float | None = None
    msgThroughputOut: float | None = None
    storageSize: int | None = None
    backlogSize: int | None = None


_TYPED = msgspec.json.Decoder(dict[str, dict[str, dict[str, dict[str, _Topic]]]])


# --- the decoders ----------------------------------------------------------------------------


def old_decode(body: bytes) -> Any:
    """`decode_json` as it was before msgspec: the standard library with the collector's
    pairs hook (which marks a key held twice), the garbage collector running."""
    from pulsar_lens.collectors.answers import _object

    return json.loads(body.decode("utf-8-sig", "surrogateescape"), object_pairs_hook=_object)


def _paused(decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def run(body: bytes) -> Any:
        from pulsar_lens.collectors.answers import collection_paused

        with collection_paused():
            return decode(body)

    return run


def decoder_of(case: str) -> Callable[[bytes], Any]:
    if case == "old":
        return old_decode
    if case == "new":
        from pulsar_lens.collectors.answers import decode_json

        return decode_json
    if case == "typed":
        from pulsar_lens.collectors.typedstats import decode_broker_stats

        return decode_broker_stats
    if case == "json":
        return _paused(json.loads)
    if case == "orjson":
        import orjson

        return _paused(orjson.loads)
    if case == "msgspec":
        return _paused(msgspec.json.decode)
    return _paused(_TYPED.decode)


# --- the answers -------------------------------------------------------------------------------


def render(folder: Path, topics: int, brokers: int) -> dict[str, Any]:
    """The synthetic cluster's answers as files in `folder`; what they hold."""
    from benchmarks.synth_server import SynthCluster

    ids = [f"127.0.0.1:{9000 + i}" for i in range(brokers)]
    cluster = SynthCluster(topics, ids, change=0.0)
    g = cluster.current
    for i, broker in enumerate(ids):
        (folder / f"bulk-{i}.json").write_bytes(g.bulk[broker])
        (folder / f"owned-{i}.json").write_bytes(g.owned[broker])
    static = {path: body.decode() for path, body in cluster._static.items()}
    (folder / "static.json").write_text(json.dumps({"brokers": ids, "answers": static}))
    return {"topics": topics, "bytes": sum(len(b) for b in g.bulk.values())}


def answers_of(static: dict[str, Any], owned: dict[str, Any]) -> Any:
    """The PollAnswers of the synthetic cluster but its bulk answers (added by the caller)."""
    import datetime as dt

    from pulsar_lens.collectors.assemble import PollAnswers, namespace_listing
    from pulsar_lens.collectors.notes import noting

    answers = static["answers"]
    a = PollAnswers(cluster="synthetic", collected_at=dt.datetime(2026, 11, 20, tzinfo=dt.UTC))
    a.broker_ids = tuple(sorted(static["brokers"]))
    a.web_urls = {b: f"http://{b}" for b in a.broker_ids}
    a.owned = dict(owned)
    tenants = json.loads(answers["/admin/v2/tenants"])
    a.namespaces = tuple(
        sorted(ns for t in tenants for ns in json.loads(answers[f"/admin/v2/namespaces/{t}"]))
    )
    with noting(a.notes):
        for ns in a.namespaces:
            a.listings[ns] = namespace_listing(
                ns,
                json.loads(answers[f"/admin/v2/namespaces/{ns}/bundles"]),
                json.loads(answers[f"/admin/v2/persistent/{ns}"]),
                json.loads(answers[f"/admin/v2/persistent/{ns}/partitioned"]),
            )
    return a


# --- one case, in a child process ----------------------------------------------------------------


def _peak_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _timed(figures: dict[str, Any], stage: str, run: Callable[[], Any]) -> Any:
    wall, cpu = time.perf_counter(), time.process_time()
    found = run()
    figures[stage] = {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "peak_mib": _peak_mib(),
    }
    return found


def use_tree(tree: Path) -> None:
    """Import `pulsar_lens.collectors` and `.core` from `tree` (an older revision's copy),
    before anything of them is imported."""
    import pulsar_lens.collectors
    import pulsar_lens.core

    pulsar_lens.collectors.__path__ = [str(tree / "collectors")]
    pulsar_lens.core.__path__ = [str(tree / "core")]


def export_tree(revision: str, into: Path) -> Path:
    """collectors/ and core/ of git `revision` of this repository, in `into`."""
    archive = subprocess.run(
        ["git", "archive", revision, "collectors", "core"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def child(case: str, folder: Path) -> dict[str, Any]:
    """Decode (and for the FULL cases assemble) the answers in `folder`; the figures."""
    from pulsar_lens.collectors.assemble import build_snapshot
    from pulsar_lens.collectors.notes import noting
    from pulsar_lens.collectors.topics import parse_broker_topic_stats

    static = json.loads((folder / "static.json").read_text())
    brokers = sorted(static["brokers"])
    index = {b: i for i, b in enumerate(static["brokers"])}
    owned = {b: json.loads((folder / f"owned-{index[b]}.json").read_bytes()) for b in brokers}
    bodies = {b: (folder / f"bulk-{index[b]}.json").read_bytes() for b in brokers}
    gc.collect()
    figures: dict[str, Any] = {"case": case, "start_mib": _peak_mib()}
    decode = decoder_of(case)
    decoded = _timed(figures, "decode", lambda: {b: decode(bodies.pop(b)) for b in brokers})
    if case not in FULL:
        return figures
    answers = answers_of(static, owned)
    parse_answer = parse_broker_topic_stats
    if case == "typed":  # not in an --old-revision tree, which only `old` reads
        from pulsar_lens.collectors.typedrecords import parse_bulk

        parse_answer = parse_bulk

    def parse() -> None:
        with noting(answers.notes):
            for b in brokers:
                answers.bulk[b] = parse_answer(decoded.pop(b), b)

    _timed(figures, "parse", parse)
    snapshot = _timed(figures, "assemble", lambda: build_snapshot(answers))
    figures["rows"] = {
        name: len(getattr(snapshot, name))
        for name in ("topics", "subscriptions", "consumers", "draining_hashes", "errors")
    }
    return figures


def run_case(case: str, folder: Path, tree: Path | None = None) -> dict[str, Any]:
    """`child` in a fresh interpreter (its own peak memory); `old` with the collector code
    of `tree` when given."""
    argv = [sys.executable, "-m", "benchmarks.bulk_answers", "--child", case, str(folder)]
    if tree is not None and case == "old":
        argv += ["--tree", str(tree)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"case {case} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def report(title: str, results: list[dict[str, Any]]) -> None:
    print(title)
    print(f"{'case':<16} {'stage':<9} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}  rows")
    for found in results:
        for stage in STAGES:
            if stage in found:
                f = found[stage]
                rows = found.get("rows", "") if stage == "assemble" else ""
                print(
                    f"{found['case']:<16} {stage:<9} {f['wall']:8.2f} {f['cpu']:8.2f} "
                    f"{f['peak_mib']:9.0f}  {rows}"
                )
        stages = [found[s] for s in STAGES if s in found]
        print(
            f"{found['case']:<16} {'total':<9} {sum(s['wall'] for s in stages):8.2f} "
            f"{sum(s['cpu'] for s in stages):8.2f} {stages[-1]['peak_mib']:9.0f}  "
            f"(start {found['start_mib']:.0f} MiB)"
        )


def recorded_folder(folder: Path) -> None:
    """The recorded 4.0.7 answers laid out as `render` lays out the synthetic ones."""
    index = json.loads((RECORDED / "index.json").read_text())
    by_path = {e["path"]: e["file"] for e in index if e.get("file")}
    answers: dict[str, str] = {}
    for path, name in by_path.items():
        if name.endswith(".json"):
            answers[path] = (RECORDED / name).read_text()
    broker = "127.0.0.1:8080"
    (folder / "bulk-0.json").write_text(answers["/admin/v2/broker-stats/topics"])
    owned = next(p for p in answers if p.endswith("/ownedNamespaces"))
    (folder / "owned-0.json").write_text(answers[owned])
    (folder / "static.json").write_text(json.dumps({"brokers": [broker], "answers": answers}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--recorded", action="store_true")
    parser.add_argument(
        "--old-revision",
        metavar="REV",
        help="run the old case's decoding and assembly with collectors/ and core/ of this git "
        "revision (e.g. the one before msgspec), not only its reader",
    )
    parser.add_argument("--child", nargs=2, metavar=("CASE", "FOLDER"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if args.tree is not None:
            use_tree(args.tree)
        print(json.dumps(child(args.child[0], Path(args.child[1]))))
        return 0
    with tempfile.TemporaryDirectory(prefix="bulk-answers-old-") as old:
        tree = export_tree(args.old_revision, Path(old)) if args.old_revision else None
        if tree is not None:
            print(f"old: collectors/ and core/ of {args.old_revision}")
        return _run(args, tree)


def _run(args: argparse.Namespace, tree: Path | None) -> int:
    cases = [c for c in args.cases.split(",") if c]
    if "orjson" in cases and importlib.util.find_spec("orjson") is None:
        print("orjson is not installed (it is no dependency): its case left out")
        cases.remove("orjson")
    with tempfile.TemporaryDirectory(prefix="bulk-answers-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        made = render(folder, args.topics, args.brokers)
        print(
            f"{made['topics']:,} topics, {args.brokers} broker-stats/topics bodies, "
            f"{made['bytes'] / 1e6:.1f} MB, rendered in {time.perf_counter() - started:.1f} s"
        )
        report("synthetic", [run_case(case, folder, tree) for case in cases])
    if args.recorded:
        with tempfile.TemporaryDirectory(prefix="bulk-answers-") as tmp:
            recorded_folder(Path(tmp))
            full = [c for c in cases if c in FULL]
            found = [run_case(case, Path(tmp), tree) for case in full]
            report("recorded 4.0.7 (tests/data/admin_api/default)", found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
