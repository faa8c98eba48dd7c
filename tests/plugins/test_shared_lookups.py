"""`looked_up` and `snapshot_positions`: each row's value of a small table, as `Series.map`
with a default gives it, whatever the text's dtype and with nulls."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.plugins.builtin.shared.positions import looked_up, snapshot_positions

TABLE = {"moved": "bundles", "reconnect": "clients", "ümlaut \u2028": "ünicode"}


@pytest.mark.parametrize("dtype", [object, "str", "string[pyarrow]"])
@given(rows=st.lists(st.sampled_from([*TABLE, "other", "", None]), max_size=40))
def test_each_row_takes_its_value_or_the_missing_one(dtype: object, rows: list[str | None]) -> None:
    values = pd.Series(rows, dtype=dtype)
    found = looked_up(values, TABLE, "none")
    assert found.dtype == object
    assert found.tolist() == [TABLE.get(v, "none") if isinstance(v, str) else "none" for v in rows]
    ranks = looked_up(values, {k: i for i, k in enumerate(TABLE)}, len(TABLE), np.int64)
    assert ranks.dtype == np.int64
    expected = values.map({k: i for i, k in enumerate(TABLE)}).fillna(len(TABLE))
    assert ranks.tolist() == [int(v) for v in expected]


def test_snapshot_positions_are_places_in_the_window() -> None:
    frame = pd.DataFrame({"snapshot_id": ["b", "a", None, "c", "b"]})
    assert snapshot_positions(frame, ["a", "b"]).tolist() == [1, 0, -1, -1, 1]
    assert snapshot_positions(frame.iloc[0:0], ["a"]).tolist() == []
