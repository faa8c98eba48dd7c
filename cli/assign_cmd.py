"""`pulsar-lens failover` and `pulsar-lens bundle`: where the broker puts consumers and topics.

Both are pure predictions from `core.failover` and `core.bundles`; nothing talks to a cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pulsar_lens.cli.arguments import add_jvm_charset, bounded_int, jvm_charset_of
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.limits import MAX_BUNDLES, MAX_CONSUMERS, MAX_PARTITIONS

if TYPE_CHECKING:  # the models (numpy, pyarrow, pydantic) load when a command runs
    from pulsar_lens.core.failover import FailoverConsumer

DEFAULT_BUNDLES = 4  # the broker's defaultNumberOfNamespaceBundles
MAX_PRIORITY = 2**31 - 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fo = sub.add_parser(
        "failover",
        help="which consumer is active on each topic/partition of a Failover subscription",
    )
    fo.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC",
        help="full topic name; repeat for a multi-topic subscription",
    )
    fo.add_argument(
        "--partitions",
        type=bounded_int("--partitions", 0, MAX_PARTITIONS),
        default=0,
        metavar="N",
        help=f"partitions of each topic (0: non-partitioned; at most {MAX_PARTITIONS:,})",
    )
    fo.add_argument("--consumers", required=True, metavar="A,B,C", help="consumer names")
    fo.add_argument(
        "--priorities",
        metavar="0,1,0",
        help="priority level per consumer (default all 0; 0 is the highest)",
    )
    fo.add_argument(
        "--consistent",
        action="store_true",
        help="broker runs activeConsumerFailoverConsistentHashing=true",
    )
    add_jvm_charset(fo)
    fo.add_argument(
        "--compare",
        action="store_true",
        help="show modulo and consistent hashing side by side, and what moves",
    )
    fo.add_argument("--json", action="store_true", help="print JSON")
    fo.set_defaults(func=run_failover)

    bu = sub.add_parser("bundle", help="which namespace bundle each topic falls in")
    bu.add_argument("topics", nargs="+", metavar="TOPIC", help="topic or partition names")
    where = bu.add_mutually_exclusive_group()
    where.add_argument(
        "--bundles",
        type=bounded_int("--bundles", 1, MAX_BUNDLES),
        default=DEFAULT_BUNDLES,
        metavar="N",
        help=f"namespace created with N bundles (default {DEFAULT_BUNDLES}, at most "
        f"{MAX_BUNDLES:,})",
    )
    where.add_argument(
        "--boundaries",
        metavar="FILE",
        help="JSON of GET /admin/v2/namespaces/{tenant}/{ns}/bundles ('-': stdin)",
    )
    bu.add_argument("--json", action="store_true", help="print JSON")
    bu.set_defaults(func=run_bundle)


def parse_consumers(names: str, priorities: str | None) -> tuple[FailoverConsumer, ...]:
    """`A,B,C` and optional `0,1,0` -> consumers; the lists must have the same length."""
    from pulsar_lens.core.failover import FailoverConsumer

    parts = [n.strip() for n in names.split(",")]
    if len(parts) > MAX_CONSUMERS:
        raise ModelError(
            f"--consumers lists {len(parts)} consumers; the model takes {MAX_CONSUMERS}"
        )
    if not all(parts):
        raise ModelError(f"--consumers needs non-empty names separated by commas, got {names!r}")
    if priorities is None:
        return tuple(FailoverConsumer(n) for n in parts)
    try:
        levels = [int(p) for p in priorities.split(",")]
    except ValueError as exc:
        raise ModelError(f"--priorities takes integers like 0,1,0, got {priorities!r}") from exc
    if not all(0 <= level <= MAX_PRIORITY for level in levels):
        # the client refuses a negative priorityLevel; the protocol carries an int32
        raise ModelError(
            f"--priorities takes levels from 0 to {MAX_PRIORITY:,}, got {priorities!r}"
        )
    if len(levels) != len(parts):
        raise ModelError(
            f"--priorities lists {len(levels)} levels for {len(parts)} consumers; give one each"
        )
    return tuple(FailoverConsumer(n, p) for n, p in zip(parts, levels, strict=True))


def run_failover(args: argparse.Namespace) -> int:
    from pulsar_lens.core.bundles import full_topic_name

    consumers = parse_consumers(args.consumers, args.priorities)
    topics = {full_topic_name(t): args.partitions for t in args.topic}
    if args.compare:
        return print_comparison(topics, consumers, charset=jvm_charset_of(args), as_json=args.json)
    mapping = assign(topics, consumers, consistent=args.consistent, charset=jvm_charset_of(args))
    if args.json:
        print(json.dumps(mapping, ensure_ascii=False))
    else:
        print_table(("TOPIC", "ACTIVE CONSUMER"), list(mapping.items()))
    return 0


def assign(
    topics: Mapping[str, int],
    consumers: Sequence[FailoverConsumer],
    *,
    consistent: bool,
    charset: str,
) -> dict[str, str]:
    from pulsar_lens.core.failover import compute_topics

    chosen = compute_topics(topics, consumers, consistent_hashing=consistent, charset=charset)
    return {name: consumer.name for name, consumer in chosen.items()}


def print_comparison(
    topics: Mapping[str, int],
    consumers: Sequence[FailoverConsumer],
    *,
    charset: str,
    as_json: bool,
) -> int:
    modulo = assign(topics, consumers, consistent=False, charset=charset)
    consistent = assign(topics, consumers, consistent=True, charset=charset)
    moved = [t for t in modulo if modulo[t] != consistent.get(t)]
    if as_json:
        result = {"modulo": modulo, "consistent": consistent, "moved": moved}
        print(json.dumps(result, ensure_ascii=False))
    else:
        rows = [(t, modulo[t], consistent[t], "moved" if t in moved else "") for t in modulo]
        print_table(("TOPIC", "MODULO", "CONSISTENT", ""), rows)
        print(f"{len(moved)} of {len(modulo)} would change active consumer")
    return 0


def read_boundaries(source: str) -> tuple[int, ...]:
    from pulsar_lens.core.bundles import parse_bundles

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        payload = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read bundle boundaries from {source}: {exc}") from exc
    if not isinstance(payload, dict):
        raise ModelError(f"{source} should hold {{'boundaries': [...], 'numBundles': N}}")
    return parse_bundles(payload)


def run_bundle(args: argparse.Namespace) -> int:
    from pulsar_lens.core.bundles import default_boundaries, topic_bundle

    if args.boundaries:
        boundaries = read_boundaries(args.boundaries)
    else:
        boundaries = default_boundaries(args.bundles)
    mapping: dict[str, str | None] = {}
    failures = 0
    for topic in args.topics:
        try:
            mapping[topic] = topic_bundle(boundaries, topic).name
        except ModelError as exc:
            mapping[topic] = None
            failures += 1
            print(f"pulsar-lens: {topic}: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps(mapping, ensure_ascii=False))
    else:
        print_table(("TOPIC", "BUNDLE"), [(t, b or "-") for t, b in mapping.items()])
    return 1 if failures else 0


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
