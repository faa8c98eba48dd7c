"""Each row's poll, as a number: its snapshot's place in a window of snapshot ids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def snapshot_positions(frame: pd.DataFrame, ids: Sequence[str]) -> np.ndarray:
    """Each row's place in `ids` (oldest first), by its `snapshot_id`; -1 for a row of
    another snapshot or of none. The ids are encoded once, not looked up row by row."""
    codes, names = frame["snapshot_id"].factorize()
    place = {str(sid): i for i, sid in enumerate(ids)}
    lookup = np.array([place.get(str(n), -1) for n in names] + [-1], dtype=np.int64)
    found: np.ndarray = lookup[np.asarray(codes)]  # a null id (code -1) takes the last: -1
    return found
