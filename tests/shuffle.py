"""A seeded shuffle of the test order, to prove that no test depends on what ran before it.

`PULSAR_LENS_TEST_SHUFFLE=<seed> pytest ...` runs the modules in a random order and, within
each module, its tests in a random order. A module stays in one piece, and so do the tests that
share a parameter of a module- or session-scoped fixture (the unload drills' two clusters), so
that no broker or cluster is started more often than in the plain order. The same seed gives
the same order, so a failure seen once can be run again.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

SEED_VARIABLE = "PULSAR_LENS_TEST_SHUFFLE"

ParamKey = tuple[tuple[str, int], ...]


def shuffle_seed() -> int | None:
    """The seed the environment asks for; None for the plain order."""
    value = os.environ.get(SEED_VARIABLE, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(f"{SEED_VARIABLE} must be an integer seed, not {value!r}") from None


def shared_params(item: pytest.Item) -> ParamKey:
    """The parameters of `item` held by a fixture wider than one test: the tests that share
    them run together, or that fixture would be set up again for each group."""
    if not isinstance(item, pytest.Function) or not hasattr(item, "callspec"):
        return ()
    defs = item._fixtureinfo.name2fixturedefs
    return tuple(
        sorted(
            (name, index)
            for name, index in item.callspec.indices.items()
            if name in defs and defs[name][-1].scope != "function"
        )
    )


def shuffled(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """`items` in a random order fixed by `seed`: modules, their groups of shared
    parameters, and the tests within each group."""
    rng = random.Random(seed)
    modules: dict[Path, dict[ParamKey, list[pytest.Item]]] = {}
    for item in items:
        modules.setdefault(item.path, {}).setdefault(shared_params(item), []).append(item)
    order = list(modules.values())
    rng.shuffle(order)
    result: list[pytest.Item] = []
    for groups in order:
        buckets = list(groups.values())
        rng.shuffle(buckets)
        for bucket in buckets:
            rng.shuffle(bucket)
            result.extend(bucket)
    return result
