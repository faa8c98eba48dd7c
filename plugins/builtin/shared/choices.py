"""The topic and subscription controls of the pages that list subscriptions: the values a
control offers (`offered`) and the rows a choice keeps (`chosen`; empty means every one),
and the rows left when system topics are not asked for (`without_system`)."""

from __future__ import annotations

import pandas as pd

from pulsar_lens.api import parse_topic_name


def offered(subscriptions: pd.DataFrame) -> dict[str, list[str]]:
    """The topics and the subscription names of `subscriptions`, each sorted after `""` (all).
    Names are compared whole: a subscription name says nothing about its topic."""
    return {  # tolist() first: walking an Arrow-backed column value by value is slower
        column: ["", *sorted(str(v) for v in subscriptions[column].dropna().unique().tolist())]
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


def is_system_topic(topic: str) -> bool:
    """Whether `topic` is one of Pulsar's own (its local name starts with `__`: the
    namespace's `__change_events`, the transaction and load-balancer topics)."""
    if "__" not in topic:  # most names: no parse needed
        return False
    try:
        return parse_topic_name(topic).local.startswith("__")
    except ValueError:
        return False


def without_system(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose `topic` is not a system topic (a row naming no topic stays); each
    distinct name with `__` is parsed once."""
    topics = frame["topic"]
    if not (pd.api.types.is_object_dtype(topics) or pd.api.types.is_string_dtype(topics)):
        return frame  # no names at all (a column of NaN)
    maybe = topics.str.contains("__", regex=False).fillna(False).astype(bool)
    if not maybe.any():
        return frame
    system = [t for t in frame.loc[maybe, "topic"].unique() if is_system_topic(t)]
    return frame[~frame["topic"].isin(system)].reset_index(drop=True)
