"""failover-assignment, vectorised, gives exactly what the row-by-row implementation it
replaced gave (tests/plugins/reference_failover.py): every frame with its dtypes and order,
the summary and the group choices, on synthetic clusters of several sizes, with and without
PIP-392, both JVM charsets, and names made to confuse."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from pulsar_lens.plugins.builtin.failover_assignment.rows import distinct_pairs
from pulsar_lens.plugins.runner import validate_params
from pulsar_lens.plugins.steps import with_steps
from tests.plugins import reference_failover
from tests.plugins.vectorised_cases import cases

PLUGIN = FailoverAssignment()
CASES = list(cases())
PARAMS = (
    {},
    {"flap_changes": 1, "jvm_charset": "US-ASCII"},
    {"subscription": "fo @ no such topic", "flap_changes": 3},
)


def assert_same(inputs: Inputs, params: dict[str, Any]) -> None:
    validated = validate_params(PLUGIN, params)
    new = PLUGIN.analyze(with_steps(PLUGIN, inputs, validated), validated)
    old = reference_failover.analyze(inputs, validated)
    assert list(new.frames) == list(old.frames)
    for name, frame in old.frames.items():
        pd.testing.assert_frame_equal(new.frames[name], frame, obj=name)
    assert new.summary == old.summary
    assert PLUGIN.param_choices(inputs) == reference_failover.param_choices(inputs)


@pytest.mark.parametrize("params", PARAMS, ids=["defaults", "ascii", "selected"])
@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
def test_failover_vectorised_equals_the_reference(
    name: str, inputs: Inputs, params: dict[str, Any]
) -> None:
    assert_same(inputs, params)


def test_failover_vectorised_cases_cover_what_they_claim() -> None:
    """The cases have groups of both modes, unexplained and flapping partitions, names that
    repeat a label, partitions without a consumer, and a 3.0 cluster."""
    facts = dict.fromkeys(("3.0", "#2", "flapping", "no consumer", "unexplained"), 0)
    facts.update(dict.fromkeys(("modulo", "consistent", "either"), 0))
    for _, inputs in CASES:
        validated = validate_params(PLUGIN, {"flap_changes": 1})
        result = PLUGIN.analyze(with_steps(PLUGIN, inputs, validated), validated)
        parts, groups = result.frames["partitions"], result.frames["groups"]
        facts["3.0"] += result.summary["pulsar"] == "3.0"
        facts["#2"] += (
            int(groups["label"].astype(str).str.contains(" #2").sum()) if len(groups) else 0
        )
        if len(parts):
            facts["flapping"] += int(parts["flapping"].astype(bool).sum())
            facts["no consumer"] += int((parts["consumers"] == 0).sum())
            facts["unexplained"] += int((~parts["explained"].astype(bool)).sum())
            for mode in ("modulo", "consistent", "either"):
                facts[mode] += int((groups["mode"] == mode).sum())
    assert all(facts.values()), facts


@pytest.mark.parametrize("seed", range(20))
def test_members_pairs_are_those_of_sorting_the_tuples(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["", "a", "B", "b", "None", "nan", "é", "e\u0301", "Z", "😀", "c-1", "c-10", "c-2"]
    size = rng.randrange(0, 300)
    rows = [rng.randrange(0, 40) for _ in range(size)]
    names = [rng.choice(alphabet) + rng.choice(alphabet) for _ in range(size)]
    pairs = sorted(set(zip(rows, names, strict=True)))
    found = distinct_pairs(np.asarray(rows, np.int64), names)
    assert found == ([r for r, _ in pairs], [n for _, n in pairs])
