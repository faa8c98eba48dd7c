"""`unload-history`'s output frames: their columns, and the shaping both engines share.

Each engine computes `Parts` (annotated outages and the per-bundle, per-broker, per-hour and
per-day aggregates, unordered); `finish` orders them, fixes their types, picks the worst
outages, fits the trend and writes the summary, so the engines differ only in how they find
and aggregate the outages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.api import Result
from pulsar_lens.plugins.builtin.shared.outages import OUTAGE_COLUMNS

KEY = ["namespace", "bundle"]
RUN_KEY = ["probe", "topic"]
UNKNOWN = "(unknown)"
"""The broker of an outage whose bundle no earlier poll lists with an owner."""
TOP = 20

OUTAGES = [*OUTAGE_COLUMNS, "broker", "moved", "from_broker", "to_broker"]
OUTAGES += ["moved_since", "moved_at"]
MOVES = [*KEY, "since", "at", "from_broker", "to_broker"]
STATS = ["median_ms", "p99_ms", "max_ms", "delayed", "lost"]
BY_BUNDLE = [*KEY, "messages", "duplicates", "moves", "outages", *STATS]
BY_BROKER = ["broker", "outages", "bundles", "moved_outages", *STATS]
BY_HOUR = ["hour", "outages", "median_ms", "max_ms", "lost"]
TREND = ["day", "outages", "median_ms"]
WORST = ["rank", *OUTAGES]

TIMES = frozenset(
    {
        "cut_at",
        "back_at",
        "moved_since",
        "moved_at",
        "since",
        "at",
        "hour",
        "day",
        "collected_at",
        "polled_at",
    }
)
INTS = frozenset(
    {
        "first_seq",
        "last_seq",
        "delayed",
        "failed",
        "lost",
        "messages",
        "duplicates",
        "moves",
        "outages",
        "bundles",
        "moved_outages",
        "rank",
    }
)
FLOATS = frozenset({"outage_ms", "worst_publish_ms", "median_ms", "p99_ms", "max_ms"})
TEXTS = frozenset(
    {"probe", "namespace", "bundle", "topic", "broker", "from_broker", "to_broker", "owner_broker"}
)


@dataclass(frozen=True)
class Parts:
    """What an engine computes before `finish`: frames in any row order."""

    outages: pd.DataFrame  # OUTAGES
    by_bundle: pd.DataFrame  # BY_BUNDLE
    by_broker: pd.DataFrame  # BY_BROKER
    by_hour: pd.DataFrame  # BY_HOUR
    trend: pd.DataFrame  # TREND
    moves: int  # ownership moves of every bundle in the window


def typed(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`frame` with exactly `columns`, in order: UTC times, int64 counts, float64 figures,
    strings with None (never NaN) for missing, and `moved` a bool."""
    out = frame.reindex(columns=columns).reset_index(drop=True)
    for name in columns:
        if name in TIMES:
            out[name] = pd.to_datetime(out[name], utc=True).astype("datetime64[us, UTC]")
        elif name == "moved":
            out[name] = out[name].fillna(False).astype(bool)
        elif name in INTS:
            out[name] = out[name].fillna(0).astype("int64")
        elif name in FLOATS:
            out[name] = out[name].astype("float64")
        elif name in TEXTS:
            out[name] = out[name].astype(object).where(out[name].notna(), None)
    return out


def slope_per_day(trend: pd.DataFrame) -> float | None:
    """The least-squares slope of the daily median outage, in ms per day (None below two
    days with a median)."""
    measured = trend.dropna(subset=["median_ms"])
    if len(measured) < 2:
        return None
    first = measured["day"].min()
    days = (measured["day"] - first).dt.total_seconds().to_numpy() / 86_400
    return float(np.polyfit(days, measured["median_ms"].to_numpy(dtype=float), 1)[0])


def _worst_first(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    order = ["max_ms", "outages", *keys]
    ascending = [False, False, *([True] * len(keys))]
    ordered = frame.sort_values(order, ascending=ascending, na_position="last", kind="stable")
    return ordered.reset_index(drop=True)


def finish(parts: Parts, *, top: int = TOP) -> Result:
    """The result from either engine's parts: every frame ordered, typed and summarised."""
    outages = typed(parts.outages, OUTAGES)
    outages = outages.sort_values(["cut_at", *RUN_KEY, "first_seq"], kind="stable")
    outages = outages.reset_index(drop=True)
    measured = outages.dropna(subset=["outage_ms"])
    worst = measured.sort_values(
        ["outage_ms", "cut_at", *RUN_KEY, "first_seq"],
        ascending=[False, True, True, True, True],
        kind="stable",
    ).head(top)
    worst = typed(worst.assign(rank=range(1, len(worst) + 1)), WORST)
    trend = typed(parts.trend, TREND).sort_values("day").reset_index(drop=True)
    frames = {
        "outages": outages,
        "by_bundle": _worst_first(typed(parts.by_bundle, BY_BUNDLE), KEY),
        "by_broker": _worst_first(typed(parts.by_broker, BY_BROKER), ["broker"]),
        "by_hour": typed(parts.by_hour, BY_HOUR).sort_values("hour").reset_index(drop=True),
        "worst": worst,
        "trend": trend,
    }
    return Result(frames=frames, summary=summarise(frames, moves=parts.moves))


def summarise(frames: dict[str, pd.DataFrame], *, moves: int) -> dict[str, Any]:
    """Totals, the worst and median outage, lost messages and the daily trend's slope."""
    outages, by_bundle = frames["outages"], frames["by_bundle"]
    lengths = outages["outage_ms"].dropna()
    return {
        "outages": len(outages),
        "measured": len(lengths),
        "worst_outage_ms": float(lengths.max()) if len(lengths) else None,
        "median_outage_ms": float(lengths.median()) if len(lengths) else None,
        "delayed": int(outages["delayed"].sum()),
        "lost": int(outages["lost"].sum()),
        "probe_messages": int(by_bundle["messages"].sum()),
        "probed_bundles": len(by_bundle),
        "moves": int(moves),
        "moved_outages": int(outages["moved"].sum()),
        "median_slope_ms_per_day": slope_per_day(frames["trend"]),
    }
