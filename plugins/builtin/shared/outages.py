"""What an outage is: the one definition `unload-latency` measures each unload with and
`unload-history` counts over the whole store (its Spark plan is tested against this).

An **outage** is a maximal run of a probe's consecutive messages (by sequence number) whose
publish was slow (`publish_ms > slow_ms`) or never acknowledged. It starts at the last good
acknowledgement before the run (`cut_at`; the run's first send when there is none) and ends
at the first acknowledgement of the run's messages (`back_at`: the queued messages are
acknowledged together once the producer is through again; the next good message's, when
none of the run was acknowledged). Its length is `back_at - cut_at`, so its
resolution is one send interval of the probe. A transfer that delays no message past
`slow_ms` has no outage: its cost is 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.core.model import SLOW_PUBLISH_MS

SLOW_MS = SLOW_PUBLISH_MS
OUTAGE_COLUMNS = [
    "probe",
    "namespace",
    "bundle",
    "topic",
    "first_seq",
    "last_seq",
    "cut_at",
    "back_at",
    "outage_ms",
    "worst_publish_ms",
    "delayed",
    "failed",
    "lost",
]


def probe_outages(probes: pd.DataFrame, *, slow_ms: float = SLOW_MS) -> pd.DataFrame:
    """Every outage of every probe run, oldest first."""
    if probes.empty:
        return pd.DataFrame(columns=OUTAGE_COLUMNS)
    rows = [
        row
        for _, run in probes.groupby(["probe", "topic"], sort=True)
        for row in _runs(run.sort_values("seq", kind="stable").reset_index(drop=True), slow_ms)
    ]
    frame = pd.DataFrame(rows, columns=OUTAGE_COLUMNS)
    return frame.sort_values("cut_at", kind="stable").reset_index(drop=True)


def _runs(run: pd.DataFrame, slow_ms: float) -> Iterator[dict[str, Any]]:
    publish = run["publish_ms"].astype("float64")
    bad = (publish.isna() | (publish > slow_ms)).to_numpy()
    if not bad.any():
        return
    edges = np.flatnonzero(np.diff(np.concatenate(([0], bad.astype(np.int8), [0]))))
    acked = run["acked_at"]
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        part = run.iloc[start:stop]
        # runs are maximal, so the message just before one is good: its ack is the cut
        cut = (
            acked.iloc[start - 1]
            if start > 0 and pd.notna(acked.iloc[start - 1])
            else part["sent_at"].iloc[0]
        )
        acks = part["acked_at"].dropna()
        if acks.empty and stop < len(run):  # none acknowledged: the next (good) one ends it
            acks = acked.iloc[stop : stop + 1].dropna()
        back = acks.min() if len(acks) else pd.NaT
        outage = (back - cut).total_seconds() * 1000 if pd.notna(back) else np.nan
        yield {
            "probe": run["probe"].iloc[0],
            "namespace": run["namespace"].iloc[0],
            "bundle": run["bundle"].iloc[0],
            "topic": run["topic"].iloc[0],
            "first_seq": int(part["seq"].iloc[0]),
            "last_seq": int(part["seq"].iloc[-1]),
            "cut_at": cut,
            "back_at": back,
            "outage_ms": max(0.0, float(outage)) if pd.notna(outage) else np.nan,
            "worst_publish_ms": float(publish.iloc[start:stop].max()),
            "delayed": int(stop - start),
            "failed": int(part["error"].notna().sum()),
            "lost": int((part["received"] == 0).sum()),
        }
