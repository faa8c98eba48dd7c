"""Bundle and broker totals counted by column (`partmerge.with_topic_totals`,
`with_broker_totals`) equal the record-by-record loops they replace
(`reference_partmerge`), to the last bit of every sum: topics without a bundle, in bundles
no record lists, of namespaces with the same bundle names, without rates, with NaN rates,
owned by brokers not listed or by none; consumers of topics no row holds."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_lens.collectors.partmerge import with_broker_totals, with_topic_totals
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    TopicRecord,
    content_table,
)
from tests.collectors.reference_partmerge import reference_broker_totals, reference_topic_totals

NAMESPACES = ["t/a", "t/b", "u/a"]
BUNDLES = ["0x00000000_0x80000000", "0x80000000_0xffffffff", "0x00000000_0xffffffff"]
BROKERS = ["b0:8080", "b1:8080", "b2:8080"]
rates = st.one_of(
    st.none(),
    st.just(math.nan),
    st.floats(-1e6, 1e12, allow_nan=False),
    st.sampled_from([0.1, 0.2, 0.3, 1e-17, 1e17, -0.0]),
)


@st.composite
def snapshots(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(0, 40))
    topics = [
        TopicRecord(
            f"persistent://{ns}/x{i}",
            ns.split("/")[0],
            ns,
            bundle=draw(st.one_of(st.none(), st.sampled_from(BUNDLES))),
            owner_broker=draw(st.one_of(st.none(), st.sampled_from([*BROKERS, "gone:8080"]))),
            msg_rate_in=draw(rates),
            msg_rate_out=draw(rates),
        )
        for i, ns in enumerate(
            draw(st.lists(st.sampled_from(NAMESPACES), min_size=count, max_size=count))
        )
    ]
    listed = draw(st.sets(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(BUNDLES[:2]))))
    bundles: dict[str, dict[str, BundleRecord]] = {}
    for ns, name in sorted(listed):
        bundles.setdefault(ns, {})[name] = BundleRecord(ns, ns.split("/")[0], name, 0, 1)
    names = [t.topic for t in topics] + ["persistent://t/a/none"]
    consumers = [
        ConsumerRecord(topic, "s", f"c{i}")
        for i, topic in enumerate(draw(st.lists(st.sampled_from(names), max_size=30)))
    ]
    reported = draw(st.booleans())
    brokers = [
        BrokerRecord(
            b,
            num_topics=7 if reported and b == BROKERS[0] else None,
            msg_rate_in=1.5 if reported else None,
        )
        for b in BROKERS
    ]
    return {
        "topics": content_table("topics", topics),
        "consumers": content_table("consumers", consumers),
        "bundles": bundles,
        "brokers": brokers,
    }


def _same(made: list[Any], expected: list[Any]) -> None:
    """Records equal, NaN sums included, and each sum the same float to the bit."""
    assert len(made) == len(expected)
    for got, want in zip(made, expected, strict=True):
        for field in got.__dataclass_fields__:
            a, b = getattr(got, field), getattr(want, field)
            if isinstance(b, float):
                assert isinstance(a, float), field
                assert math.isnan(a) == math.isnan(b), field
                assert math.isnan(b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
            else:
                assert a == b and type(a) is type(b), field


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_totals_by_column_equal_the_loops(case: dict[str, Any]) -> None:
    _same(
        with_topic_totals(case["bundles"], case["topics"]),
        reference_topic_totals(case["bundles"], case["topics"]),
    )
    _same(
        with_broker_totals(case["brokers"], case["topics"], case["consumers"]),
        reference_broker_totals(case["brokers"], case["topics"], case["consumers"]),
    )
