"""subscription-status, vectorised, gives exactly what the per-subscription implementation it
replaced gave (tests/plugins/reference_subscription_status.py, its backlog cut to the rows the
chart draws as the plugin's is since 1.2): both frames with their dtypes and order, and the
summary, on synthetic clusters of several sizes, windows and with or without system topics."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.plugins.builtin.subscription_status import RULES, SubscriptionStatus
from pulsar_lens.plugins.runner import validate_params
from tests.plugins import reference_subscription_status
from tests.plugins.vectorised_cases import cases

PLUGIN = SubscriptionStatus()
CASES = list(cases())
PARAMS = ({}, {"window": 2, "include_system": True}, {"window": 30})


def assert_same(inputs: Inputs, params: dict[str, Any]) -> None:
    validated = validate_params(PLUGIN, params)
    new = PLUGIN.analyze(inputs, validated)
    old = reference_subscription_status.analyze_charted(inputs, validated)
    assert list(new.frames) == list(old.frames)
    for name, frame in old.frames.items():
        pd.testing.assert_frame_equal(new.frames[name], frame, obj=name)
    assert new.summary == old.summary


@pytest.mark.parametrize("params", PARAMS, ids=["defaults", "window 2, system", "window 30"])
@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
def test_subscription_status_vectorised_equals_the_reference(
    name: str, inputs: Inputs, params: dict[str, Any]
) -> None:
    assert_same(inputs, params)


def test_subscription_status_vectorised_cases_reach_every_rule() -> None:
    """Every status and every reason of the rules comes up in the cases."""
    reasons: set[str] = set()
    for _, inputs in CASES:
        status = PLUGIN.analyze(inputs, validate_params(PLUGIN, {})).frames["status"]
        pairs = zip(status["status"], status["reason"], strict=True)
        reasons |= {f"{s}: {re.sub(r'[0-9]+', 'N', r)}" for s, r in pairs}
    assert len(reasons) == len(RULES), sorted(reasons)
