"""`pulsar-lens hash|ranges|route`: the Key_Shared model from the command line, no broker needed.

Consumer lists are joined in the order given. A name given more than once stands for several
consumers with that name (the broker allows it); in JSON each of them is keyed `NAME#i`, where
`i` counts that name's consumers from 0 in join order, which is also the name index the 4.0
broker gives them. Names given once are keyed by the bare name.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pulsar_lens.cli.arguments import add_jvm_charset, bounded_int, jvm_charset_of
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.limits import MAX_CONSUMERS, MAX_HASH, MAX_REPLICA_POINTS
from pulsar_lens.core.pulsarvalues import DEFAULT_POINTS, PULSAR_LINES, SELECTOR_KINDS

if TYPE_CHECKING:  # the models (numpy, pyarrow) load when a command runs, not at parsing
    from pulsar_lens.core.model import HashRange
    from pulsar_lens.core.selectors import Consumer, Selector

VARIANTS = ("4.0", "3.0.7", "3.0.3", "3.0.0")

CONSUMERS_HELP = (
    "consumers in join order, comma-separated; a repeated name is another consumer of that "
    "name. sticky: NAME=START-END[+START-END...] per consumer, e.g. a=0-32767,b=32768-65535"
)
DUPLICATES_NOTE = (
    "JSON keys: a name given once is the key as is; a name given n > 1 times yields keys "
    "NAME#0 .. NAME#n-1 in join order (#i is also the broker's consumer name index)."
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hash", help="sticky-key hash of each KEY (UTF-8 bytes)")
    p.add_argument("keys", nargs="+", metavar="KEY")
    _add_model_args(p, consumers=False)
    p.set_defaults(func=run_hash)

    p = sub.add_parser(
        "ranges",
        help="hash ranges per consumer, as the broker's keyHashRangeArrays",
        description="Hash ranges per consumer after joining them in order. " + DUPLICATES_NOTE,
    )
    _add_model_args(p, consumers=True)
    p.set_defaults(func=run_ranges)

    p = sub.add_parser(
        "route",
        help="which consumer receives each KEY",
        description="The consumer each KEY (a partition or ordering key) is delivered to; "
        "null where no consumer covers its hash (sticky gaps). " + DUPLICATES_NOTE,
    )
    p.add_argument("keys", nargs="+", metavar="KEY")
    _add_model_args(p, consumers=True)
    p.set_defaults(func=run_route)


def _add_model_args(p: argparse.ArgumentParser, *, consumers: bool) -> None:
    p.add_argument("--selector", choices=SELECTOR_KINDS, default="consistent")
    p.add_argument("--pulsar", choices=PULSAR_LINES, default="4.0", help="broker line")
    if consumers:
        p.add_argument("--consumers", required=True, help=CONSUMERS_HELP)
        p.add_argument(
            "--points",
            type=bounded_int("--points", 1, MAX_REPLICA_POINTS),
            default=DEFAULT_POINTS,
            help="subscriptionKeySharedConsistentHashingReplicaPoints (consistent only; "
            f"1 to {MAX_REPLICA_POINTS})",
        )
        p.add_argument(
            "--leave",
            action="append",
            default=[],
            metavar="NAME",
            help="after the joins, this consumer leaves (repeatable; NAME#i for one of several "
            "consumers with the same name, else the last one that joined)",
        )
        add_jvm_charset(p)
        p.add_argument(
            "--variant",
            choices=VARIANTS,
            help="consistent-hashing implementation (default: 4.0, or 3.0.7 with --pulsar 3.0)",
        )
    p.add_argument("--json", action="store_true", help="print JSON")


def run_hash(args: argparse.Namespace) -> int:
    from pulsar_lens.core.hashing import sticky_key_hash

    hashes = {
        key: sticky_key_hash(key.encode(), selector=args.selector, pulsar=args.pulsar)
        for key in args.keys
    }
    _emit(args, hashes, ("KEY", "HASH"))
    return 0


def run_ranges(args: argparse.Namespace) -> int:
    selector, labels = build_selector(args)
    ranges = {labels[c]: [list(r) for r in rs] for c, rs in selector.ranges().items()}
    if args.json:
        print(json.dumps(ranges, ensure_ascii=False))
    else:
        for label, rs in ranges.items():
            print(f"{label}\t{len(rs)} ranges\t{_size(rs)} hashes\t{_short(rs)}")
    return 0


def run_route(args: argparse.Namespace) -> int:
    selector, labels = build_selector(args)
    routes: dict[str, str | None] = {}
    for key in args.keys:
        chosen = selector.select_key(key.encode())
        routes[key] = labels[chosen] if chosen is not None else None
    _emit(args, routes, ("KEY", "CONSUMER"))
    return 0


def build_selector(args: argparse.Namespace) -> tuple[Selector, dict[Consumer, str]]:
    """Join the `--consumers` in order; return the selector and each consumer's JSON key."""
    from pulsar_lens.core.selectors import make_selector

    consumers = parse_consumers(args.consumers, sticky=args.selector == "sticky")
    variant = args.variant
    if variant is not None and args.selector != "consistent":
        raise ModelError("--variant applies to --selector consistent only")
    selector = make_selector(
        args.selector,
        points=args.points,
        pulsar="3.0" if variant not in (None, "4.0") else args.pulsar,
        variant=variant,
        name_encoding=jvm_charset_of(args),
    )
    for consumer in consumers:
        selector.add(consumer)
    labels = consumer_labels(consumers)
    for name in args.leave:
        selector.remove(leaving(name, consumers, labels, selector))
    return selector, labels


def leaving(
    name: str, joined: Sequence[Consumer], labels: dict[Consumer, str], selector: Selector
) -> Consumer:
    """The consumer `--leave NAME` names: by its label (`NAME` or `NAME#i`), else the last
    still-connected consumer called NAME (the broker tells same-named consumers apart only
    by connection)."""
    present = [c for c in joined if c in selector.consumers]
    for consumer in reversed(present):
        if labels[consumer] == name:
            return consumer
    for consumer in reversed(present):
        if consumer.name == name:
            return consumer
    known = ", ".join(labels[c] for c in present) or "none"
    raise ModelError(f"--leave {name!r}: no such consumer is connected; connected: {known}")


def parse_consumers(text: str, *, sticky: bool) -> list[Consumer]:
    from pulsar_lens.core.selectors import Consumer

    consumers = []
    items = text.split(",")
    if len(items) > MAX_CONSUMERS:
        raise ModelError(
            f"--consumers lists {len(items)} consumers; the model takes {MAX_CONSUMERS}"
        )
    for item in (part.strip() for part in items):
        if not item:
            raise ModelError(f"--consumers has an empty name in {text!r}")
        if not sticky:
            consumers.append(Consumer(item))
            continue
        name, sep, spec = item.partition("=")
        if not sep or not spec:
            raise ModelError(f"sticky consumer {item!r} needs NAME=START-END[+START-END...]")
        consumers.append(Consumer(name, tuple(_parse_range(r, item) for r in spec.split("+"))))
    return consumers


def _parse_range(text: str, item: str) -> HashRange:
    start, _, end = text.partition("-")
    try:
        low, high = int(start), int(end)
    except ValueError:
        raise ModelError(f"bad range {text!r} in {item!r}: use START-END") from None
    if not 0 <= low <= high <= MAX_HASH:
        raise ModelError(f"bad range {text!r} in {item!r}: START <= END, both from 0 to {MAX_HASH}")
    return low, high


def consumer_labels(consumers: Sequence[Consumer]) -> dict[Consumer, str]:
    counts = Counter(c.name for c in consumers)
    seen: Counter[str] = Counter()
    labels: dict[Consumer, str] = {}
    for consumer in consumers:
        if counts[consumer.name] == 1:
            labels[consumer] = consumer.name
        else:
            labels[consumer] = f"{consumer.name}#{seen[consumer.name]}"
            seen[consumer.name] += 1
    if len(set(labels.values())) != len(labels):
        raise ModelError(f"consumer names clash with the NAME#i keys: {sorted(labels.values())}")
    return labels


def _emit(args: argparse.Namespace, values: dict[str, object], header: tuple[str, str]) -> None:
    if args.json:
        print(json.dumps(values, ensure_ascii=False))
        return
    width = max([len(header[0]), *(len(k) for k in values)])
    print(f"{header[0]:<{width}}  {header[1]}")
    for key, value in values.items():
        print(f"{key:<{width}}  {'-' if value is None else value}")


def _size(ranges: list[list[int]]) -> int:
    return sum(end - start + 1 for start, end in ranges)


def _short(ranges: list[list[int]], shown: int = 4) -> str:
    text = " ".join(f"[{s},{e}]" for s, e in ranges[:shown])
    return text + (f" ... (+{len(ranges) - shown})" if len(ranges) > shown else "")
