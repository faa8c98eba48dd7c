"""Plugins with steps on a store, three ways side by side: the whole window (the analysis as it
was before steps: tests/plugins/reference_timeline_window.py, reference_bundle_window.py), a
first pass (every step computed and kept) and a pass after a poll (the newest poll's step and
the window's new first poll alone computed, the others read back).

    .venv/bin/python -m benchmarks.steps --store DIR [--plugins incident-timeline,...]
    .venv/bin/python -m benchmarks.steps [--topics 2000] [--polls 8] [--store DIR]

`--store` is a store to read (a `make scale` run kept with `--keep`, or any collector's); with
`--topics`, `benchmarks/synth_store.py` writes `--polls` polls of its synthetic cluster there
first (or into a temporary directory). The results the plugins require are analysed and
stored first, as the results pass does before them. Each way runs in a process of its own,
so that its peak memory is its own; the results of the three are checked equal, frame for
frame. Prints wall, CPU and peak memory of each, and the CPU ratio of the whole window to a
pass after a poll.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pulsar_lens.core.store import Store

PLUGINS = ("bundle-ownership", "incident-timeline")
MODES = ("whole", "first", "poll")
LABELS = {"whole": "whole window", "first": "first pass", "poll": "after a poll"}
DEFAULT_TOPICS = 2000  # without --store or --topics (make bench)


def one(store_root: Path, slug: str, mode: str, out: Path) -> dict[str, float]:
    """Analyse `slug` one way in this process; its result pickled to `out`."""
    from pulsar_lens.plugins import runner, steps
    from pulsar_lens.plugins.registry import discover
    from tests.plugins import reference_bundle_window, reference_timeline_window
    from tests.plugins.swaps import swapped

    store = Store(store_root)
    plugin = discover(entry_points=False).get(slug)
    whole = {
        "bundle-ownership": reference_bundle_window.WHOLE_WINDOW,
        "incident-timeline": reference_timeline_window.WHOLE_WINDOW,
    }[slug]
    if mode == "first":
        shutil.rmtree(store_root / steps.STEPS_DIR / slug, ignore_errors=True)
    elif mode == "poll":  # as the pass after a new poll finds them
        ids = [str(s) for s in store.snapshots()["snapshot_id"]]
        kept = steps.step_store(store)
        for entry, meta in list(kept.entries(slug)) if kept is not None else []:
            if meta["snapshot_ids"][-1] == ids[-1] or len(meta["snapshot_ids"]) == 1:
                shutil.rmtree(entry)
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if mode == "whole":
        with swapped(whole):
            output = runner.run(plugin, store, None, use_cache=False, use_stored=False, views=False)
    else:
        output = runner.run(plugin, store, None, use_cache=False, use_stored=False, views=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.write_bytes(pickle.dumps((dict(output.result.frames), dict(output.result.summary))))
    return {
        "wall": wall,
        "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "peak_mib": after.ru_maxrss / 1024,
    }


def compare(slug: str, store_root: Path, work: Path) -> str:
    """`slug` the three ways, each in a child process; the line that says how they went."""
    import pandas as pd

    figures: dict[str, dict[str, float]] = {}
    results: dict[str, Any] = {}
    for mode in MODES:
        out = work / f"{slug}-{mode}.pickle"
        command = [sys.executable, "-m", "benchmarks.steps", "--one", slug, mode, str(out)]
        found = subprocess.run(
            [*command, "--store", str(store_root)],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        figures[mode] = json.loads(found.stdout.strip().splitlines()[-1])
        results[mode] = pickle.loads(out.read_bytes())
    frames, summary = results["whole"]
    for mode in MODES[1:]:
        other_frames, other_summary = results[mode]
        for name, frame in frames.items():
            pd.testing.assert_frame_equal(other_frames[name], frame, obj=f"{slug} {name}")
        assert other_summary == summary, (slug, mode)
    ways = "   ".join(
        f"{LABELS[m]} {f['wall']:7.2f} s wall {f['cpu']:7.2f} s CPU {f['peak_mib']:7,.0f} MiB"
        for m, f in figures.items()
    )
    ratio = figures["whole"]["cpu"] / max(figures["poll"]["cpu"], 1e-9)
    rows = sum(len(frame) for frame in frames.values())
    return f"{slug:<18} {ways}   CPU ratio {ratio:5.1f}   results equal ({rows:,} rows)"


def required_first(store_root: Path, slugs: list[str]) -> None:
    """The results the plugins require, stored as the results pass stores them."""
    from pulsar_lens.plugins.precompute import store_run
    from pulsar_lens.plugins.registry import discover
    from pulsar_lens.plugins.results import ResultStore

    registry, results = discover(entry_points=False), ResultStore(store_root)
    for slug in slugs:
        for required in registry.get(slug).requirements:
            outcome = store_run(Store(store_root), required, results)
            if outcome.status not in ("ok", "kept"):
                raise SystemExit(f"{required.name} failed: {outcome.error}")


def run(store_root: Path, slugs: list[str]) -> int:
    index = Store(store_root).snapshots()
    print(f"{len(index)} polls in {store_root}")
    required_first(store_root, slugs)
    with tempfile.TemporaryDirectory() as work:
        for slug in slugs:
            print(compare(slug, store_root, Path(work)), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", default="", help="the store to read (with --topics: made)")
    parser.add_argument("--topics", type=int, default=0, help="write a synthetic store first")
    parser.add_argument("--polls", type=int, default=8, help="with --topics")
    parser.add_argument("--plugins", default=",".join(PLUGINS))
    parser.add_argument("--one", nargs=3, metavar=("PLUGIN", "MODE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        slug, mode, out = args.one
        print(json.dumps(one(Path(args.store), slug, mode, Path(out))))
        return 0
    slugs = [s for s in args.plugins.split(",") if s]
    if not args.topics and args.store:
        return run(Path(args.store), slugs)
    topics = args.topics or DEFAULT_TOPICS
    from benchmarks.synth_store import generate

    def made(root: Path) -> int:
        generate(root, topics=topics, days=args.polls * 30 / 86400)
        return run(root, slugs)

    if args.store:
        return made(Path(args.store))
    with tempfile.TemporaryDirectory() as root:
        return made(Path(root))


if __name__ == "__main__":
    sys.exit(main())
