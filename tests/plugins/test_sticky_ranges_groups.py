"""sticky-ranges finds every STICKY subscription's consumers in one pass and analyses exactly
as with the scan per subscription it replaced (tests/plugins/reference_sticky_ranges.py):
every frame with its dtypes and order, the summary and the choices, on 3.0 and 4.0 clusters
with consumers connected at equal, missing and different times, and readers with ranges."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.plugins.builtin import sticky_ranges
from pulsar_lens.plugins.builtin.sticky_ranges import StickyRanges
from pulsar_lens.plugins.runner import validate_params
from tests.plugins import reference_sticky_ranges
from tests.plugins.vectorised_cases import TABLES, cases

PLUGIN = StickyRanges()
CASES = list(cases((*TABLES, "key_samples")))


@pytest.mark.parametrize(("name", "inputs"), CASES, ids=[name for name, _ in CASES])
def test_sticky_ranges_groups_equal_the_reference(
    name: str, inputs: Inputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = validate_params(PLUGIN, {})
    new, new_choices = PLUGIN.analyze(inputs, params), PLUGIN.param_choices(inputs)
    monkeypatch.setattr(sticky_ranges, "sticky_groups", reference_sticky_ranges.sticky_groups)
    inputs = copy.copy(inputs)  # without the groups the new path derived and kept in it
    old, old_choices = PLUGIN.analyze(inputs, params), PLUGIN.param_choices(inputs)
    for frame_name, frame in old.frames.items():
        pd.testing.assert_frame_equal(new.frames[frame_name], frame, obj=frame_name)
    assert new.summary == old.summary
    assert new_choices == old_choices


def test_sticky_ranges_groups_cases_have_sticky_and_reader_groups() -> None:
    kinds: set[str] = set()
    for _, inputs in CASES:
        subs, consumers = inputs.latest("subscriptions"), inputs.latest("consumers")
        groups = sticky_ranges.sticky_groups(subs, consumers)
        kinds |= {g.kind for g in groups if len(g.members) > (g.kind == "sticky")}
        if len(inputs.history("key_samples")):
            kinds.add("samples")
    assert kinds == {"sticky", "readers", "samples"}


def test_a_readers_subscription_listed_twice_takes_its_first_type() -> None:
    """Readers are the consumers with ranges whose subscription's first row is not
    Key_Shared, as when every consumer was merged with every subscription's first row."""
    from pulsar_lens.core.model import ConsumerRecord, SubscriptionRecord
    from pulsar_lens.plugins.testing import make_inputs_from_records

    topic = "persistent://t/ns/readers"
    subs = [
        SubscriptionRecord(topic, "first-shared", type="Shared"),
        SubscriptionRecord(topic, "first-shared", type="Key_Shared"),
        SubscriptionRecord(topic, "first-key-shared", type="Key_Shared"),
        SubscriptionRecord(topic, "first-key-shared", type="Exclusive"),
    ]
    consumers = [
        ConsumerRecord(topic, name, "r", hash_ranges=((0, 99),))
        for name in ("first-shared", "first-key-shared", "not-listed")
    ]
    inputs = make_inputs_from_records(
        ("subscriptions", "consumers"), [{"subscriptions": subs, "consumers": consumers}]
    )
    frames = inputs.latest("subscriptions"), inputs.latest("consumers")
    (group,) = sticky_ranges.groups.reader_groups(*frames)
    assert [m.name for m in group.members] == ["first-shared/r", "not-listed/r"]
    assert sticky_ranges.groups.reader_groups(*frames) == reference_sticky_ranges.reader_groups(
        *frames
    )
