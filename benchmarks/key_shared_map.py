"""key-shared-map's analysis against the bare cost of the model it checks.

    .venv/bin/python benchmarks/key_shared_map.py [--subscriptions 100] [--consumers 10]

Builds `subscriptions` Key_Shared subscriptions of `consumers` consumers each with the 4.0
consistent-hashing selector (100 points), as a broker would report them, then times, in the
same run and alternating, the plugin's `analyze` + `render` (selector and replica-points
inference, model rebuild, drift check, frames, charts) against the baseline of building the
same selectors once. Prints both medians and the ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from collections.abc import Callable

import pandas as pd

from pulsar_lens.api import Inputs
from pulsar_lens.core.model import ConsumerRecord, SubscriptionRecord, records_to_table
from pulsar_lens.core.selectors import ConsistentHashingSelector, Consumer
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from pulsar_lens.plugins.runner import run_on_inputs

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def build(subscriptions: int, consumers: int) -> list[ConsistentHashingSelector]:
    selectors = []
    for s in range(subscriptions):
        selector = ConsistentHashingSelector()
        for i in range(consumers):
            selector.add(Consumer(f"app-{s}-c{i}"))
        selectors.append(selector)
    return selectors


def inputs_of(selectors: list[ConsistentHashingSelector]) -> Inputs:
    subs, rows = [], []
    for s, selector in enumerate(selectors):
        topic = f"persistent://public/default/bench-{s}"
        ranges = selector.ranges()
        subs.append(
            SubscriptionRecord(
                topic,
                "ks",
                type="Key_Shared",
                key_shared_mode="AUTO_SPLIT",
                consumer_count=len(ranges),
            )
        )
        rows += [
            ConsumerRecord(
                topic, "ks", c.name, hash_ranges=r, connected_since=T0 + dt.timedelta(seconds=i)
            )
            for i, (c, r) in enumerate(ranges.items())
        ]
    common = {"snapshot_id": "bench", "collected_at": T0, "cluster": "bench"}
    made = {"subscriptions": subs, "consumers": rows}
    # every table the plugin declares, empty where the benchmark has no rows for it
    tables = {
        name: records_to_table(name, made.get(name, []), **common).to_pandas()
        for name in KeySharedMap.inputs
    }
    index = pd.DataFrame({k: [v] for k, v in common.items()})
    return Inputs(tables=tables, snapshots=index)


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscriptions", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    inputs = inputs_of(build(args.subscriptions, args.consumers))
    plugin = KeySharedMap()
    baseline, analysis = [], []
    for _ in range(args.rounds):
        baseline.append(timed(lambda: build(args.subscriptions, args.consumers)))
        analysis.append(timed(lambda: run_on_inputs(plugin, inputs, {})))
    base, mine = statistics.median(baseline), statistics.median(analysis)
    print(f"{args.subscriptions} subscriptions x {args.consumers} consumers")
    print(f"baseline (build the selectors): {base * 1000:.1f} ms")
    print(f"key-shared-map analyze+render:  {mine * 1000:.1f} ms")
    print(f"ratio: {mine / base:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
