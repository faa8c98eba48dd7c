"""key-shared-map at the collector's bounds: consumer names of 100,000 characters holding
tens of thousands of ranges each. Names are held and hashed once, charts show them short."""

from __future__ import annotations

import datetime as dt

import mmh3
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.api import Chart, Columns, Inputs, Tabs, View
from pulsar_lens.core.hashing import INT31_MASK, murmur3_31_continued, murmur3_states
from pulsar_lens.core.keyshared.points import hash_points, prefix_of
from pulsar_lens.core.model import ConsumerRecord, SubscriptionRecord, records_to_table
from pulsar_lens.core.selectors import ConsistentHashingSelector, Consumer
from pulsar_lens.plugins.builtin.key_shared_map import KeySharedMap
from pulsar_lens.plugins.builtin.key_shared_map.charts import SHOWN_NAME
from pulsar_lens.plugins.runner import run_on_inputs
from tests.props.strategies import props

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TOPIC = "persistent://public/default/orders"


def inputs_of(names: list[str], ranges_each: int) -> Inputs:
    """One Key_Shared subscription whose consumers take turns over single-hash ranges."""
    n = len(names)
    rows = [
        ConsumerRecord(
            TOPIC,
            "ks",
            name,
            hash_ranges=tuple((h, h) for h in range(1 + c, 1 + n * ranges_each, n)),
            connected_since=T0 + dt.timedelta(seconds=c),
        )
        for c, name in enumerate(names)
    ]
    sub = SubscriptionRecord(
        TOPIC, "ks", type="Key_Shared", key_shared_mode="AUTO_SPLIT", consumer_count=n
    )
    common = {"snapshot_id": "s0", "collected_at": T0, "cluster": "c"}
    tables = {
        name: records_to_table(name, records, **common).to_pandas()
        for name, records in (
            ("subscriptions", [sub]),
            ("consumers", rows),
            ("draining_hashes", []),
            ("key_samples", []),
            ("brokers", []),
        )
    }
    return Inputs(tables=tables, snapshots=pd.DataFrame({k: [v] for k, v in common.items()}))


def charts(views: list[View]) -> list[Chart]:
    found: list[Chart] = []
    for view in views:
        if isinstance(view, Chart):
            found.append(view)
        elif isinstance(view, Columns):
            found += [c for column in view.columns for c in charts(list(column))]
        elif isinstance(view, Tabs):
            found += [c for _, tab in view.tabs for c in charts(list(tab))]
    return found


def layers_data(chart: object) -> list[pd.DataFrame]:
    data = getattr(chart, "data", None)
    own = [data] if isinstance(data, pd.DataFrame) else []
    return own + [d for layer in getattr(chart, "layer", None) or () for d in layers_data(layer)]


@pytest.mark.timeout(120)  # a deadline with a wide margin: seconds now
def test_key_shared_map_long_names_on_many_ranges_are_held_once() -> None:
    names = [f"{c}-" + "n" * 100_000 for c in range(2)]
    output = run_on_inputs(KeySharedMap(), inputs_of(names, 32_767))
    ranges = output.result.frames["ranges"]
    broker = ranges[ranges["source"] == "broker"]
    assert len(broker) == 2 * 32_767
    assert list(ranges["consumer_name"].cat.categories) == names  # each name stored once
    drawn = [frame for chart in charts(list(output.views)) for frame in layers_data(chart.chart)]
    assert drawn
    for frame in drawn:
        for column in frame.columns:
            if frame[column].dtype == object or isinstance(frame[column].dtype, pd.StringDtype):
                assert frame[column].astype(str).str.len().max() <= SHOWN_NAME + 8


@props(200)
@given(prefix=st.binary(max_size=64), suffix=st.binary(max_size=12))
def test_murmur_continued_from_a_prefix_state_is_murmur_of_the_whole_key(
    prefix: bytes, suffix: bytes
) -> None:
    data = np.frombuffer(prefix, np.uint8)
    state = murmur3_states(data, np.asarray([0, len(prefix)], np.int64))
    rest = prefix[len(prefix) // 4 * 4 :] + suffix
    rows = np.frombuffer(rest, np.uint8).reshape(1, len(rest))
    got = murmur3_31_continued(state, rows, np.asarray([len(prefix + suffix)], np.uint32))
    assert int(got[0]) == mmh3.hash(prefix + suffix, 0, signed=False) & INT31_MASK


@props(40)
@given(
    names=st.lists(
        st.text(max_size=30).map(lambda t: t * 7).filter(lambda t: "\x00" not in t),
        min_size=1,
        max_size=5,
    ),
    index=st.integers(0, 12),
    charset=st.sampled_from(["utf-8", "us-ascii"]),
)
def test_ring_points_of_names_of_every_length_match_the_selector(
    names: list[str], index: int, charset: str
) -> None:
    hashed = hash_points([prefix_of(name, index, charset) for name in names], 110)
    selector = ConsistentHashingSelector(points=110, name_encoding=charset)
    for row, name in zip(hashed, names, strict=True):
        assert row.tolist() == selector.point_hashes(Consumer(name), index)
