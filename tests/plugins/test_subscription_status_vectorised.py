"""subscription-status, vectorised, gives exactly what the per-subscription implementation it
replaced gave (tests/plugins/reference_subscription_status.py): the status frame, the summary
and the rows of the backlog frame that the chart draws, with their dtypes and order, on
synthetic clusters of several sizes, windows and with or without system topics."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.plugins.builtin.subscription_status import CHART_LINES, RULES, SubscriptionStatus
from pulsar_lens.plugins.runner import validate_params
from tests.plugins import reference_subscription_status
from tests.plugins.vectorised_cases import cases

PLUGIN = SubscriptionStatus()
CASES = list(cases())
PARAMS = ({}, {"window": 2, "include_system": True}, {"window": 30})


def assert_same(inputs: Inputs, params: dict[str, Any]) -> None:
    validated = validate_params(PLUGIN, params)
    new = PLUGIN.analyze(inputs, validated)
    old = reference_subscription_status.analyze(inputs, validated)
    assert list(new.frames) == list(old.frames)
    pd.testing.assert_frame_equal(new.frames["status"], old.frames["status"], obj="status")
    pd.testing.assert_frame_equal(
        new.frames["backlog"], charted(old.frames["backlog"], new.frames["status"]), obj="backlog"
    )
    assert new.summary == old.summary


def charted(backlog: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """The rows of the reference's backlog (every subscription's) that the chart draws: those
    of the status table's first CHART_LINES subscriptions."""
    shown = set(status[["topic", "subscription"]].head(CHART_LINES).itertuples(index=False))
    keys = backlog[["topic", "subscription"]].itertuples(index=False)
    drawn = np.fromiter((key in shown for key in keys), dtype=bool, count=len(backlog))
    return backlog[drawn].reset_index(drop=True)


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
