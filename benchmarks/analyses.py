"""bundle-ownership, subscription-status and stuck-hashes against the cost of reading their inputs.

    .venv/bin/python -m benchmarks.analyses [--polls 30] [--subscriptions 2000] [--hashes 300]

Writes `polls` snapshots of a synthetic cluster (50 namespaces x 4 bundles whose owners come
and go, `subscriptions` subscriptions with one consumer each, `hashes` draining hashes) into a
temporary store, then times, alternating in the same run, reading each plugin's declared
inputs from the store (the baseline) and its `analyze` + `render` on them. Prints medians and
the ratio analysis / read.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.core.model import (
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    Snapshot,
    SubscriptionRecord,
)
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import load_inputs, run_on_inputs
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--polls", type=int, default=30)
    parser.add_argument("--subscriptions", type=int, default=2000)
    parser.add_argument("--hashes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
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
