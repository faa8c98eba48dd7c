"""`unload-history`'s rule on pandas: the same parts the Spark plan computes (see the package
docstring), with the outages found by `shared.outages.probe_outages` itself (one
definition of an outage), and `pandas_result`, the whole analysis of a store without Spark.
"""

from __future__ import annotations

import os

import pandas as pd

from pulsar_lens.api import Result
from pulsar_lens.plugins.builtin.shared.outages import (
    OUTAGE_COLUMNS,
    SLOW_MS,
    probe_outages,
)
from pulsar_lens.plugins.builtin.unload_history.frames import (
    BY_BROKER,
    BY_BUNDLE,
    BY_HOUR,
    KEY,
    MOVES,
    OUTAGES,
    RUN_KEY,
    TOP,
    TREND,
    UNKNOWN,
    Parts,
    finish,
    typed,
)


def compute_moves(bundles: pd.DataFrame) -> pd.DataFrame:
    """Each change of a bundle's owner between two consecutive polls that list it: from and
    to broker (None for unowned) and the two polls' times (`since`, `at`)."""
    polls = typed(bundles, [*KEY, "collected_at", "owner_broker"])
    polls = polls.sort_values([*KEY, "collected_at"], kind="stable")
    grouped = polls.groupby(KEY, sort=False)
    before = grouped["owner_broker"].shift()
    since = grouped["collected_at"].shift()
    after = polls["owner_broker"]
    same = (before == after) | (before.isna() & after.isna())
    changed = since.notna() & ~same
    moves = pd.DataFrame(
        {
            "namespace": polls["namespace"][changed],
            "bundle": polls["bundle"][changed],
            "since": since[changed],
            "at": polls["collected_at"][changed],
            "from_broker": before[changed],
            "to_broker": after[changed],
        }
    )
    return typed(moves, MOVES)


def with_owners(outages: pd.DataFrame, bundles: pd.DataFrame, moves: pd.DataFrame) -> pd.DataFrame:
    """The outages with `broker`, the owner of their bundle at the newest poll at or before
    `cut_at` (UNKNOWN when none, or unowned then), and the move whose polls enclose the cut
    (`since <= cut_at < at`), if any."""
    if outages.empty:
        return typed(outages, OUTAGES)
    polls = typed(bundles, [*KEY, "collected_at", "owner_broker"])
    polls = polls.rename(columns={"collected_at": "polled_at"}).sort_values("polled_at")
    owners = pd.merge_asof(
        outages.sort_values("cut_at", kind="stable"),
        polls,
        left_on="cut_at",
        right_on="polled_at",
        by=KEY,
        direction="backward",
        allow_exact_matches=True,
    )
    owners["broker"] = owners["owner_broker"].where(owners["owner_broker"].notna(), UNKNOWN)
    ids = [*RUN_KEY, "first_seq"]
    pairs = owners[[*ids, *KEY, "cut_at"]].merge(moves, on=KEY, how="inner")
    pairs = pairs[(pairs["since"] <= pairs["cut_at"]) & (pairs["cut_at"] < pairs["at"])]
    enclosing = pairs[[*ids, "since", "at", "from_broker", "to_broker"]].rename(
        columns={"since": "moved_since", "at": "moved_at"}
    )
    out = owners.merge(enclosing, on=ids, how="left")
    out["moved"] = out["moved_at"].notna()
    return typed(out, OUTAGES)


def _stats(outages: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group: outages, median, p99 (linear) and max outage, delayed and lost messages."""
    grouped = outages.groupby(keys)
    out = grouped.agg(
        outages=("outage_ms", "size"),
        median_ms=("outage_ms", "median"),
        max_ms=("outage_ms", "max"),
        delayed=("delayed", "sum"),
        lost=("lost", "sum"),
    )
    out["p99_ms"] = grouped["outage_ms"].quantile(0.99)
    return out.reset_index()


def compute_by_bundle(
    probes: pd.DataFrame, outages: pd.DataFrame, moves: pd.DataFrame
) -> pd.DataFrame:
    """Every probed bundle: its probe messages and duplicate deliveries, its owner moves, and
    the statistics of its outages (none: 0 outages, no lengths)."""
    if probes.empty:
        return typed(pd.DataFrame(), BY_BUNDLE)
    duplicates = (probes["received"].fillna(0) - 1).clip(lower=0)
    probed = (
        probes.assign(duplicates=duplicates)
        .groupby(KEY, as_index=False)
        .agg(messages=("seq", "size"), duplicates=("duplicates", "sum"))
    )
    moved = moves.groupby(KEY).size().rename("moves").reset_index()
    out = probed.merge(moved, on=KEY, how="left")
    if not outages.empty:
        out = out.merge(_stats(outages, KEY), on=KEY, how="left")
    return typed(out, BY_BUNDLE)


def compute_by_broker(outages: pd.DataFrame) -> pd.DataFrame:
    """Per broker that owned the bundle when the outage began: the outage statistics, the
    bundles they hit and how many a move between the polls explains."""
    if outages.empty:
        return typed(pd.DataFrame(), BY_BROKER)
    stats = _stats(outages, ["broker"])
    extra = outages.groupby("broker").agg(moved_outages=("moved", "sum"))
    extra["bundles"] = outages.drop_duplicates(["broker", *KEY]).groupby("broker").size()
    return typed(stats.merge(extra.reset_index(), on="broker", how="left"), BY_BROKER)


def compute_by_hour(outages: pd.DataFrame) -> pd.DataFrame:
    """Per UTC hour of `cut_at`: outages, median and max outage, lost messages."""
    if outages.empty:
        return typed(pd.DataFrame(), BY_HOUR)
    hours = outages.assign(hour=outages["cut_at"].dt.floor("h"))
    out = hours.groupby("hour", as_index=False).agg(
        outages=("outage_ms", "size"),
        median_ms=("outage_ms", "median"),
        max_ms=("outage_ms", "max"),
        lost=("lost", "sum"),
    )
    return typed(out, BY_HOUR)


def compute_trend(outages: pd.DataFrame) -> pd.DataFrame:
    """Per UTC day of `cut_at`: outages and the median outage."""
    if outages.empty:
        return typed(pd.DataFrame(), TREND)
    days = outages.assign(day=outages["cut_at"].dt.floor("D"))
    out = days.groupby("day", as_index=False).agg(
        outages=("outage_ms", "size"), median_ms=("outage_ms", "median")
    )
    return typed(out, TREND)


def pandas_parts(probes: pd.DataFrame, bundles: pd.DataFrame, *, slow_ms: float = SLOW_MS) -> Parts:
    """The parts from the window's probe rows and bundle rows."""
    found = typed(probe_outages(probes, slow_ms=slow_ms), OUTAGE_COLUMNS)
    moves = compute_moves(bundles)
    outages = with_owners(found, bundles, moves)
    return Parts(
        outages=outages,
        by_bundle=compute_by_bundle(probes, outages, moves),
        by_broker=compute_by_broker(outages),
        by_hour=compute_by_hour(outages),
        trend=compute_trend(outages),
        moves=len(moves),
    )


def pandas_result(
    store_root: str | os.PathLike[str], *, slow_ms: float = SLOW_MS, top: int = TOP
) -> Result:
    """The whole analysis over every stored poll, on pandas only (no Spark). Probe rows are
    read from the first poll on, up to now, as `plugins.runner.load_inputs` reads them."""
    from pulsar_lens.core.model import SCHEMAS
    from pulsar_lens.core.store import Store

    store = Store(store_root)
    index = store.snapshots()
    if index.empty:
        probes = SCHEMAS["probes"].empty_table().to_pandas()
        bundles = SCHEMAS["bundles"].empty_table().to_pandas()
    else:
        first = pd.Timestamp(index["collected_at"].iloc[0]).to_pydatetime()
        probes = store.read("probes", since=first).to_pandas()
        bundles = store.read("bundles").to_pandas()
    return finish(pandas_parts(probes, bundles, slow_ms=slow_ms), top=top)
