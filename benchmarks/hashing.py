"""Sticky-key hashing and what-if recomputes, timed against baselines in the same run.

    .venv/bin/python benchmarks/hashing.py [--keys 10000000] [--consumers 1000]

1. Sticky-key hashes (4.0 consistent hashing) of N keys: the vectorized Arrow path against a
   per-key mmh3 loop over the same keys as Python strings. The keys are generated vectorized
   with pyarrow ("order-" + a random integer, so lengths vary), and the Python list the loop
   needs is materialised outside its timing. A second set has equal-length keys.
2. What-if on a 4.0 ring of C consumers x 100 points: building it, then "what if one more
   consumer joins" and "what if one leaves" (clone, apply, ranges and moved hashes), against
   rebuilding the whole ring from scratch.
3. Auto split: C consumers joining one by one, the selector's heap against the broker's
   scan for the biggest range at each join (quadratic).

Timing goals (not asserts): >= 20 M keys/s and >= 7x the loop; a what-if under 50 ms.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_lens.core import murmur_jit
from pulsar_lens.core.hashing import (
    murmur3_31_array,
    reduce_hash_array,
    sticky_key_hash,
    sticky_key_hash_array,
)
from pulsar_lens.core.range_selectors import AutoSplitSelector, scan_split_ends
from pulsar_lens.core.selectors import ConsistentHashingSelector, Consumer

T = TypeVar("T")


def timed(fn: Callable[[], T], repeat: int = 1) -> tuple[T, float]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return result, best


def generate_keys(count: int, *, fixed_width: bool, seed: int = 7) -> pa.Array:
    numbers = pa.array(np.random.default_rng(seed).integers(0, 10**9, count))
    text = pc.cast(numbers, pa.string())
    if fixed_width:
        text = pc.utf8_lpad(text, 9, "0")
    return pc.binary_join_element_wise(pa.scalar("order-"), text, "")


def per_key_loop(keys: list[str]) -> list[int]:
    return [(mmh3.hash(k, 0, signed=False) & 0x7FFFFFFF) % 65535 + 1 for k in keys]


def bench_hashing(count: int) -> None:
    for label, fixed in (("mixed-length", False), ("equal-length", True)):
        keys, made = timed(lambda fixed=fixed: generate_keys(count, fixed_width=fixed))
        print(f"\n[{label}] {count:,} keys generated vectorized in {made:.2f} s")
        vector, t_vec = timed(lambda keys=keys: sticky_key_hash_array(keys), repeat=2)
        numpy_path, t_np = timed(
            lambda keys=keys: reduce_hash_array(murmur3_31_array(keys, engine="numpy")), repeat=2
        )
        assert (numpy_path == vector).all(), "compiled and numpy paths differ"
        as_python, t_list = timed(lambda keys=keys: keys.to_pylist())
        looped, t_loop = timed(lambda as_python=as_python: per_key_loop(as_python))
        assert vector.tolist() == looped, "vectorized and per-key hashes differ"
        sample = as_python[:100_000]
        _, t_api = timed(lambda sample=sample: [sticky_key_hash(k.encode()) for k in sample])
        rate = count / 1e6
        engine = "numpy" if fixed or not murmur_jit.available() else "compiled"
        print(f"  vectorized, auto: {engine:<9} {rate / t_vec:8.1f} M keys/s  ({t_vec:.2f} s)")
        print(f"  numpy path (no numba)       {rate / t_np:8.1f} M keys/s  ({t_np:.2f} s)")
        print(f"  per-key mmh3 loop           {rate / t_loop:8.1f} M keys/s  ({t_loop:.2f} s)")
        api_rate = len(sample) / 1e6 / t_api
        print(f"  per-key sticky_key_hash()   {api_rate:8.1f} M keys/s  (100k keys)")
        print(f"  ratio vectorized / loop     {t_loop / t_vec:8.1f} x")
        print(f"  ratio numpy path / loop     {t_loop / t_np:8.1f} x")
        print(f"  ratio incl. to_pylist       {(t_loop + t_list) / t_vec:8.1f} x   (Arrow -> list)")
        del keys, vector, as_python, looped


def build_ring(consumers: list[Consumer]) -> ConsistentHashingSelector:
    selector = ConsistentHashingSelector(points=100)
    for consumer in consumers:
        selector.add(consumer)
    return selector


def bench_what_if(count: int) -> None:
    consumers = [Consumer(f"consumer-{i}") for i in range(count)]
    selector, t_build = timed(lambda: build_ring(consumers))
    selector.ranges()
    newcomer, leaver = Consumer("newcomer"), consumers[count // 2]

    def what_if(join: list[Consumer], leave: list[Consumer]) -> int:
        after, impacts = selector.what_if(join=join, leave=leave)
        after.ranges()
        return sum(len(i.moves) for i in impacts)

    moved_in, t_join = timed(lambda: what_if([newcomer], []), repeat=5)
    moved_out, t_leave = timed(lambda: what_if([], [leaver]), repeat=5)
    _, t_rebuild = timed(lambda: build_ring([*consumers, newcomer]).ranges(), repeat=2)
    print(f"\n[what-if] ring of {count:,} consumers x 100 points ({count * 100:,} points)")
    print(f"  build once, join by join    {t_build * 1e3:8.1f} ms")
    print(f"  what-if one joins           {t_join * 1e3:8.1f} ms  ({moved_in} ranges move)")
    print(f"  what-if one leaves          {t_leave * 1e3:8.1f} ms  ({moved_out} ranges move)")
    print(f"  full rebuild + ranges       {t_rebuild * 1e3:8.1f} ms  (baseline)")
    print(f"  ratio rebuild / what-if     {t_rebuild / max(t_join, t_leave):8.1f} x")


def bench_auto_split(count: int) -> None:
    """n auto-split joins: the selector's heap (n log n) against the broker's scan (n^2)."""

    def join_all() -> AutoSplitSelector:
        selector = AutoSplitSelector()
        for i in range(count):
            selector.add(Consumer(f"c{i}"))
        return selector

    selector, t_heap = timed(join_all)
    ends, t_scan = timed(lambda: scan_split_ends(count))
    assert selector._ends == ends
    print(f"\n[auto split] {count:,} consumers join one by one")
    print(f"  selector (heap)             {t_heap * 1e3:8.1f} ms")
    print(f"  broker's scan (baseline)    {t_scan * 1e3:8.1f} ms")
    print(f"  ratio scan / heap           {t_scan / t_heap:8.1f} x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--consumers", type=int, default=1000)
    parser.add_argument("--split-consumers", type=int, default=5000)
    args = parser.parse_args(argv)
    bench_hashing(args.keys)
    bench_what_if(args.consumers)
    bench_auto_split(args.split_consumers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
