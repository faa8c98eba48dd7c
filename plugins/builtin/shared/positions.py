"""Each row's poll, as a number: its snapshot's place in a window of snapshot ids; and
each row's value of a small table, looked up once per distinct text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd


def looked_up(
    values: pd.Series, table: Mapping[str, Any], missing: Any, dtype: Any = object
) -> np.ndarray:
    """`table[value]` of each row as an array of `dtype`, `missing` for a value not in the
    table and for a null. The values are encoded first and each distinct one looked up once:
    `Series.map` calls back per row (a third of a second for 350,000 rows)."""
    codes, names = values.factorize()
    lookup = np.array([table.get(str(n), missing) for n in names] + [missing], dtype=dtype)
    found: np.ndarray = lookup[np.asarray(codes)]  # a null (code -1) takes the last: missing
    return found


def snapshot_positions(frame: pd.DataFrame, ids: Sequence[str]) -> np.ndarray:
    """Each row's place in `ids` (oldest first), by its `snapshot_id`; -1 for a row of
    another snapshot or of none."""
    place = {str(sid): i for i, sid in enumerate(ids)}
    return looked_up(frame["snapshot_id"], place, -1, np.int64)
