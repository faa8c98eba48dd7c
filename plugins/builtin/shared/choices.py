"""The topic and subscription controls of the pages that list subscriptions: the values a
control offers (`offered`) and the rows a choice keeps (`chosen`). Empty means every one."""

from __future__ import annotations

import pandas as pd


def offered(subscriptions: pd.DataFrame) -> dict[str, list[str]]:
    """The topics and the subscription names of `subscriptions`, each sorted after `""` (all).
    Names are compared whole: a subscription name says nothing about its topic."""
    return {
        column: ["", *sorted(str(v) for v in subscriptions[column].dropna().unique())]
        for column in ("topic", "subscription")
    }


def chosen(frame: pd.DataFrame, topic: str, subscription: str) -> pd.DataFrame:
    """The rows of `topic` and `subscription` (each, when not empty)."""
    if not topic and not subscription:
        return frame  # the default: every row, nothing compared
    keep = pd.Series(True, index=frame.index)
    if topic:
        keep &= frame["topic"] == topic
    if subscription:
        keep &= frame["subscription"] == subscription
    return frame[keep]
