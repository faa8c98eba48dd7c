"""The vocabulary of `bundle-ownership`'s result and the frames and charts drawn from it.

`bundle-ownership` writes the ownership map, its timeline and each event's `by`;
`unload-latency` reads them through `requires` (`data.result("bundle-ownership")`) and draws
the same broker summary and charts for one namespace. Both take them from here, so the words
in a result and the code that reads them stay one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    import altair as alt

UNOWNED = "(unowned)"
BROKER_COLUMNS = ["owner_broker", "bundles", "topics", "msg_rate_in", "msg_rate_out"]
# who an event is `by` (see bundle_ownership/load_manager.py): its counters grew, or were all
# read and none grew
BY_LOAD_MANAGER = "load manager"
NOT_LOAD_MANAGER = "not the load manager"


def compute_brokers(current: pd.DataFrame) -> pd.DataFrame:
    """Bundles, topics and rates per owning broker (unowned bundles under "(unowned)")."""
    owners = current.assign(owner_broker=current["owner_broker"].fillna(UNOWNED))
    out = owners.groupby("owner_broker", as_index=False).agg(
        bundles=("bundle", "count"),
        topics=("topic_count", "sum"),
        msg_rate_in=("msg_rate_in", "sum"),
        msg_rate_out=("msg_rate_out", "sum"),
    )
    return out.reindex(columns=BROKER_COLUMNS)


def chart_ownership(bundles: pd.DataFrame) -> alt.Chart:
    """Broker x bundle: one cell per bundle under its owner, coloured by topic count."""
    import altair as alt  # on use: discovering plugins needs no altair

    cells = bundles.assign(
        owner=bundles["owner_broker"].fillna(UNOWNED),
        label=bundles["namespace"] + "/" + bundles["bundle"],
    )
    chart: alt.Chart = (
        alt.Chart(cells)
        .mark_rect()
        .encode(
            x=alt.X("owner:N", title="Broker"),
            y=alt.Y("label:N", title="Bundle", sort=None),
            color=alt.Color("topic_count:Q", title="Topics"),
            tooltip=["label:N", "owner:N", "topic_count:Q", "msg_rate_in:Q", "msg_rate_out:Q"],
        )
    )
    return chart


def chart_timeline(timeline: pd.DataFrame) -> alt.Chart:
    """Owner of each bundle at each snapshot."""
    import altair as alt  # on use: discovering plugins needs no altair

    lanes = timeline.assign(label=timeline["namespace"] + "/" + timeline["bundle"])
    chart: alt.Chart = (
        alt.Chart(lanes)
        .mark_tick(thickness=6, size=14)
        .encode(
            x=alt.X("collected_at:T", title="Collected at"),
            y=alt.Y("label:N", title="Bundle"),
            color=alt.Color("owner:N", title="Owner"),
            tooltip=["label:N", "owner:N", "collected_at:T", "topic_count:Q"],
        )
    )
    return chart
