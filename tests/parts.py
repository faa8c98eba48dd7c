"""The two parts `scripts/test.sh` runs side by side, each in a pytest process of its own.

Most of a whole run waits (on brokers, subprocesses, browsers, image builds) rather than
computes, so two processes on two cores finish well before one. A broker configuration must
still start once per run (tests/brokers.py), so every test that reaches the broker pool runs in
one part, "brokers", and the rest in the other, "rest":

- a module goes whole to "brokers" when one of its tests has `broker_pool` in its fixture
  closure (`pulsar` and every fixture built on either reach it), or carries the `live` mark (it
  talks to a Pulsar it starts itself): its module fixtures are then set up once, its tests keep
  their order, and the brokers' JVMs share one process's turn rather than both cores at once;
- the Spark tier (tests/spark/) goes to "brokers" too, to even the parts out, but for the
  modules in `SPARK_IN_REST`: with the broker tests grown to most of the brokers part's time,
  those even it out the other way (about 2 of a loaded run's 51 minutes, once the test run's
  Spark ran on C1 only and the brokers part's share of Spark work shrank; the hashing
  benchmark's 3 minutes went back then). Both processes then hold one local Spark session each;
- every other module goes to "rest".

`--lens-part=brokers|rest` keeps that part's tests and deselects the others; without it (or with
`--lens-part=all`) every test runs in the one process. `--lens-part-map=FILE` writes the part
of every collected test to FILE (JSON, node id to part), so that one collection of the suite
shows both parts. tests/test_parts.py proves that the two parts are the whole collection.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

OPTION = "--lens-part"
MAP_OPTION = "--lens-part-map"
PARTS = ("brokers", "rest")
POOL_FIXTURE = "broker_pool"
SPARK_TIER = Path(__file__).parent / "spark"
SPARK_IN_REST = frozenset(
    {
        "test_bundle_load_history.py",
        "test_failover_history.py",
        "test_key_distribution_lines.py",
    }
)


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        choices=(*PARTS, "all"),
        default=None,
        help="run one part of the suite: 'brokers' (the modules that reach the broker pool or "
        "are marked live, and the Spark tier), 'rest' (the others) or 'all'; scripts/test.sh "
        "runs the two parts side by side",
    )
    parser.addoption(
        MAP_OPTION,
        default=None,
        metavar="FILE",
        help="write each collected test's part to FILE (JSON: node id to part)",
    )


def reaches_brokers(item: pytest.Item) -> bool:
    """Whether `item` needs a Pulsar: the pool in its fixture closure, or the live mark."""
    return POOL_FIXTURE in getattr(item, "fixturenames", ()) or (
        item.get_closest_marker("live") is not None
    )


def broker_modules(items: Iterable[pytest.Item]) -> set[Path]:
    """The files of the modules that go whole to the "brokers" part."""
    return {item.path for item in items if reaches_brokers(item) or _spark_in_brokers(item.path)}


def _spark_in_brokers(path: Path) -> bool:
    return path.is_relative_to(SPARK_TIER) and path.name not in SPARK_IN_REST


def part_of(item: pytest.Item, brokers: set[Path]) -> str:
    return "brokers" if item.path in brokers else "rest"


def keep_part(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the chosen part's items (all of them when no part is chosen); the others are
    reported as deselected."""
    part = config.getoption(OPTION)
    brokers = broker_modules(items)
    if config.getoption(MAP_OPTION):
        parts = {item.nodeid: part_of(item, brokers) for item in items}
        Path(config.getoption(MAP_OPTION)).write_text(json.dumps(parts))
    if part in (None, "all"):
        return
    kept = [item for item in items if part_of(item, brokers) == part]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if part_of(i, brokers) != part])
        items[:] = kept
