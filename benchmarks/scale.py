"""stuck-hashes and key-shared-map as draining hashes, ranges and consumer names grow.

    .venv/bin/python -m benchmarks.scale [--sizes 500,2000,8000,65535] [--consumers 4]
                                         [--name-length 5000]

For each size n, four consumers of one Key_Shared subscription each drain n hashes over three
polls (stuck-hashes), and each hold n single-hash ranges (key-shared-map, with names of 10
characters and of `--name-length`). Every timing is `analyze` + `render`, the median of
`--rounds`, cold inputs built beforehand. The baseline is the smallest size, measured in the
same run: `per item` is the time per hash or range over the baseline's, so a linear analysis
prints ratios near 1 and a quadratic one ratios that grow with n.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from pulsar_lens.api import AnalysisPlugin, Inputs
from pulsar_lens.core.model import ConsumerRecord, DrainingHashRecord, SubscriptionRecord
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.runner import run_on_inputs
from pulsar_lens.plugins.testing import TOPIC, at, make_inputs_from_records

HASHES = 65_535


def inputs_of(plugin: AnalysisPlugin, polls: list[dict[str, list[object]]]) -> Inputs:
    return make_inputs_from_records(plugin.inputs, polls)


def poll(n: int, consumers: int, name_length: int, i: int) -> dict[str, list[object]]:
    """`consumers` consumers taking turns over single-hash ranges (n each), each draining n
    hashes of its own, blocked a little more every poll."""
    names = [f"c{c}-" + "n" * max(0, name_length - 4) for c in range(consumers)]
    span = min(n * consumers, HASHES)
    owners: list[object] = [
        ConsumerRecord(
            TOPIC,
            "ks",
            name,
            connected_since=at(-60 + c),
            hash_ranges=tuple((h, h) for h in range(1 + c, 1 + span, consumers)),
        )
        for c, name in enumerate(names)
    ]
    draining: list[object] = [
        DrainingHashRecord(TOPIC, "ks", name, 1 + (h * consumers + c) % HASHES, 3, i)
        for c, name in enumerate(names)
        for h in range(n)
    ]
    sub = SubscriptionRecord(
        TOPIC, "ks", type="Key_Shared", key_shared_mode="AUTO_SPLIT", consumer_count=consumers
    )
    return {"consumers": owners, "draining_hashes": draining, "subscriptions": [sub]}


def timed(plugin: AnalysisPlugin, inputs: Inputs, rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        started = time.perf_counter()
        run_on_inputs(plugin, inputs)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="500,2000,8000,65535")
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--name-length", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = [
        ("stuck-hashes", StuckHashes(), 10, 3),
        ("key-shared-map", KeySharedMap(), 10, 1),
        (f"key-shared-map, {args.name_length}-char names", KeySharedMap(), args.name_length, 1),
    ]
    print(f"{args.consumers} consumers; n draining hashes and n ranges per consumer")
    for title, plugin, length, polls in cases:
        base: float | None = None
        for n in sizes:
            inputs = inputs_of(plugin, [poll(n, args.consumers, length, i) for i in range(polls)])
            took = timed(plugin, inputs, args.rounds)
            per_item = took / n
            base = per_item if base is None else base
            print(
                f"{title:<40} n={n:>6}  {took * 1000:9.1f} ms  "
                f"per item {per_item * 1e6:8.2f} us  ratio {per_item / base:5.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
