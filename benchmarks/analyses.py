"""bundle-ownership, subscription-status and stuck-hashes against the cost of reading their inputs;
with `--topics`, the vectorised analyses against the implementations they replaced, at scale.

    .venv/bin/python -m benchmarks.analyses [--polls 30] [--subscriptions 2000] [--hashes 300]
    .venv/bin/python -m benchmarks.analyses --topics 100000 --polls 30 [--store DIR]

Writes `polls` snapshots of a synthetic cluster (50 namespaces x 4 bundles whose owners come
and go, `subscriptions` subscriptions with one consumer each, `hashes` draining hashes) into a
temporary store, then times, alternating in the same run, reading each plugin's declared
inputs from the store (the baseline) and its `analyze` + `render` on them. Prints medians and
the ratio analysis / read.

With `--topics N`, `benchmarks/synth_store.py` writes `--polls` polls of its synthetic cluster
of N topics (brokers, subscriptions, consumers; into `--store`, kept for the next run, or a
temporary directory), and `scale_rows` times, old and new side by side in the same run, wall
and CPU (`time.process_time`, the process's threads together), for failover-assignment,
subscription-status and sticky-ranges: reading the inputs (old: every declared table over the
whole window; new: `history_of` 1 for the tables read at the newest poll only) and `analyze`
plus `param_choices` (old: tests/plugins/reference_*.py, the replaced implementations; for
sticky-ranges, its groups found as before). The synthetic cluster's Failover subscriptions all
share one name and three consumer names, so they form one group with one consumer set; a second
failover-assignment row gives every subscription its own consumer names (tens of thousands of
sets and rings, as in a cluster whose clients name their consumers). Every new result is
checked equal to the old one, frame for frame; `render` is the same code for both and is left
out. `--cases` picks some of failover, failover-own-names, status and sticky; `--new-only`
times the new side alone (the old sticky-ranges scan is quadratic: at 100,000 topics it takes
many minutes). The `pass` case times a whole results pass of the built-ins, as the collect
process runs it after a poll, old and new (`benchmarks/results_pass.py`: old with the
incident-timeline and key-shared-map analyses of before they were vectorised, and no window cut
from a longer one), with its table reads counted; the stored results of both are checked equal.
The `kept` case times what a collect process does with the results it keeps (60 of each light
plugin): pruning them after each pass and reading the newest, old with every list of choices
inside meta.json, new with the long ones beside it (also `benchmarks/results_pass.py`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from benchmarks.measuring import clock, same_result
from pulsar_lens.api import AnalysisPlugin, Inputs, Result
from pulsar_lens.core.hashing import murmur3_31_array
from pulsar_lens.core.model import (
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    Snapshot,
    SubscriptionRecord,
)
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import load_inputs, run_on_inputs, validate_params
from pulsar_lens.plugins.steps import with_steps
from pulsar_lens.plugins.testing import at, make_snapshot


def poll_at(i: int, subscriptions: int, hashes: int) -> Snapshot:
    topics = [f"persistent://t/ns{j % 50}/topic-{j % 500}" for j in range(subscriptions)]
    subs = [
        SubscriptionRecord(
            topic,
            f"s{j}",
            type="Shared",
            msg_backlog=(j * i) % 7,
            consumer_count=1,
            msg_rate_out=1.0,
            msg_ack_rate=float(j % 2),
            is_durable=True,
        )
        for j, topic in enumerate(topics)
    ]
    consumers = [
        ConsumerRecord(topic, f"s{j}", "c1", connected_since=at(-60), hash_ranges=((1, 30000),))
        for j, topic in enumerate(topics)
    ]
    draining = [DrainingHashRecord(topics[0], "s0", "c1", h + 1, 3, i) for h in range(hashes)]
    bundles = [
        BundleRecord(
            f"t/ns{n}",
            "t",
            f"0x{k:08x}_0x{k + 1:08x}",
            k,
            k + 1,
            owner_broker="b1" if (i + n + k) % 10 else None,
        )
        for n in range(50)
        for k in range(4)
    ]
    return make_snapshot(
        i * 30.0,
        subscriptions=subs,
        consumers=consumers,
        draining_hashes=draining,
        bundles=bundles,
    )


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def measure(plugin: AnalysisPlugin, store: Store, rounds: int) -> tuple[float, float]:
    reads, runs = [], []
    inputs = load_inputs(plugin, store)
    for _ in range(rounds):
        reads.append(timed(lambda: load_inputs(plugin, store)))
        runs.append(timed(lambda: run_on_inputs(plugin, inputs)))
    return statistics.median(reads), statistics.median(runs)


Analysis = Callable[[Inputs, Any], Result]
Choices = Callable[[Inputs], object]


def _wide(plugin: AnalysisPlugin) -> AnalysisPlugin:
    """The plugin reading every declared table over its whole window, as before `history_of`."""

    class Wide(type(plugin)):  # type: ignore[misc]
        history_of: ClassVar[dict[str, int]] = {}
        step_inputs: ClassVar[tuple[str, ...]] = ()

    return Wide()


def _distinct_names(inputs: Inputs) -> Inputs:
    """Every subscription's consumers named after their topic, so no two subscriptions share a
    consumer set (the synthetic cluster reuses worker-0..2 everywhere)."""

    def renamed(tables: dict[str, Any]) -> dict[str, Any]:
        found = dict(tables)
        if "subscriptions" in tables:
            subs = tables["subscriptions"]
            found["subscriptions"] = subs.assign(
                active_consumer_name=subs["active_consumer_name"] + " @ " + subs["topic"]
            )
        if "consumers" in tables:
            consumers = tables["consumers"]
            found["consumers"] = consumers.assign(
                consumer_name=consumers["consumer_name"] + " @ " + consumers["topic"]
            )
        return found

    steps = None if inputs.step_tables is None else renamed(dict(inputs.step_tables))
    return Inputs(renamed(dict(inputs.tables)), inputs.snapshots, step_tables=steps)


def scale_case(
    plugin: AnalysisPlugin,
    store: Store,
    old: tuple[Analysis, Choices] | None,
    *,
    distinct: bool = False,
) -> list[str]:
    """Old and new of one plugin, one after the other in this run: inputs read, analysed (the
    new alone when `old` is None)."""
    params = validate_params(plugin, {})
    shape = _distinct_names if distinct else (lambda inputs: inputs)
    figures: dict[str, tuple[float, float]] = {}
    results: dict[str, Result] = {}

    def cold(inputs: Inputs, params: Any) -> Result:  # every step computed: a cold pass
        return plugin.analyze(with_steps(plugin, inputs, params), params)

    sides = [("new", plugin, (cold, plugin.param_choices))]
    if old is not None:
        sides.insert(0, ("old", _wide(plugin), old))
    for side, reader, (analyze, choices) in sides:
        inputs, *figures[f"{side} read"] = clock(lambda r=reader: shape(load_inputs(r, store)))
        run = lambda a=analyze, c=choices, i=inputs: (a(i, params), c(i))  # noqa: E731
        (results[side], _), *figures[f"{side} analyze"] = clock(run)
        del inputs
    title = plugin.name + (", own consumer names" if distinct else "")
    same = same_result(results["new"], results["old"]) if old is not None else "not compared"
    lines = [f"{title}: results {same}"]
    for step in ("read", "analyze"):
        n = figures[f"new {step}"]
        line = f"  {step:<8} new {n[0]:7.2f} s wall {n[1]:7.2f} s CPU"
        if old is not None:
            o = figures[f"old {step}"]
            ratio = o[1] / max(n[1], 1e-9)
            line = (
                f"  {step:<8} old {o[0]:7.2f} s wall {o[1]:7.2f} s CPU   "
                f"new {n[0]:7.2f} s wall {n[1]:7.2f} s CPU   CPU ratio {ratio:6.1f}"
            )
        lines.append(line)
    return lines


def _with_old_groups(step: Callable[..., Any]) -> Callable[..., Any]:
    """sticky-ranges' `step` with the groups found as before (a scan per subscription)."""
    from pulsar_lens.plugins.builtin import sticky_ranges
    from tests.plugins.reference_sticky_ranges import sticky_groups

    def old(*args: Any) -> Any:
        new = sticky_ranges.sticky_groups
        sticky_ranges.sticky_groups = sticky_groups  # type: ignore[assignment]
        try:
            return step(*args)
        finally:
            sticky_ranges.sticky_groups = new  # type: ignore[assignment]

    return old


CASES = ("failover", "failover-own-names", "status", "sticky", "pass", "kept")


def scale_rows(store: Store, cases: Sequence[str] = CASES, *, new_only: bool = False) -> list[str]:
    """The cases of `--topics` asked for, in order."""
    from benchmarks.results_pass import kept_case, pass_case
    from tests.plugins import reference_failover, reference_subscription_status

    status, sticky, failover = SubscriptionStatus(), StickyRanges(), FailoverAssignment()
    old_failover = (reference_failover.analyze, reference_failover.param_choices)
    old_sticky = (_with_old_groups(sticky.analyze), _with_old_groups(sticky.param_choices))
    every: dict[str, tuple[AnalysisPlugin, tuple[Analysis, Choices], bool]] = {
        "failover": (failover, old_failover, False),
        "failover-own-names": (failover, old_failover, True),
        "status": (status, (reference_subscription_status.analyze_charted, lambda _: {}), False),
        "sticky": (sticky, old_sticky, False),
    }
    lines: list[str] = []
    for case in cases:
        if case in ("pass", "kept"):
            lines += (pass_case if case == "pass" else kept_case)(Path(store.root))
            print("\n".join(lines[-2:]), flush=True)
            continue
        plugin, old, distinct = every[case]
        lines += scale_case(plugin, store, None if new_only else old, distinct=distinct)
        print("\n".join(lines[-3:]), flush=True)
    return lines


def scale_main(args: argparse.Namespace) -> int:
    from benchmarks.synth_store import PARAMS_FILE, describe, generate

    def run(root: Path) -> int:
        tables = ("brokers", "subscriptions", "consumers")
        saved = root / PARAMS_FILE
        same = saved.exists() and json.loads(saved.read_text())["topics"] == args.topics
        facts = describe(root) if same else {}
        if facts.get("polls") != args.polls:  # a store of part of a day cannot be resumed
            shutil.rmtree(root, ignore_errors=True)
            facts = generate(root, topics=args.topics, days=args.polls * 30 / 86400, tables=tables)
        rows = facts["rows"]
        print(
            f"{args.topics:,} topics, {facts['polls']} polls: {rows['subscriptions']:,} "
            f"subscription and {rows['consumers']:,} consumer rows in all"
        )
        _, wall, cpu = clock(lambda: murmur3_31_array(pa.array(["warm", "up"])))
        print(f"numba's murmur3 kernel loaded once a process: {wall:.2f} s wall, {cpu:.2f} s CPU")
        scale_rows(Store(root), args.cases.split(","), new_only=args.new_only)
        return 0

    if args.store:
        return run(Path(args.store))
    with tempfile.TemporaryDirectory() as root:
        return run(Path(root))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--polls", type=int, default=30)
    parser.add_argument("--subscriptions", type=int, default=2000)
    parser.add_argument("--hashes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--topics", type=int, default=0, help="old vs new at this many topics")
    parser.add_argument("--store", default="", help="with --topics: keep the store here")
    parser.add_argument("--cases", default=",".join(CASES), help="with --topics: which")
    parser.add_argument("--new-only", action="store_true", help="with --topics: no old side")
    args = parser.parse_args(argv)
    if args.topics:
        return scale_main(args)
    with tempfile.TemporaryDirectory() as root:
        store = Store(root)
        for i in range(args.polls):
            store.write(poll_at(i, args.subscriptions, args.hashes))
        print(f"{args.polls} polls, {args.subscriptions} subscriptions, {args.hashes} hashes")
        for plugin in (BundleOwnership(), SubscriptionStatus(), StuckHashes()):
            read, run = measure(plugin, store, args.rounds)
            print(
                f"{plugin.name:<20} read {read * 1000:7.1f} ms  analyze+render "
                f"{run * 1000:7.1f} ms  ratio {run / read:5.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
