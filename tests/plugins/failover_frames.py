"""The selected Failover group's partitions as failover-assignment's frames give them."""

from __future__ import annotations

import pandas as pd

from pulsar_lens.api import Result


def assignment(result: Result, column: str) -> dict[str, str | None]:
    """Each partition of the selected group (`summary["selected"]`) and its consumer in
    `column` of the `partitions` frame ("observed", "alternative", "modulo", ...); None where
    it names none."""
    parts = result.frames["partitions"]
    mine = parts[parts["label"] == result.summary["selected"]]
    return {
        str(t): None if pd.isna(c) else str(c)
        for t, c in zip(mine["topic"], mine[column], strict=True)
    }
