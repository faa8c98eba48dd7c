"""Bundles whose every client reconnected between two polls, for every poll of a window at once.

A bundle whose owner stayed the same "reloaded" between two polls when every client of its
topics reconnected since the first: each consumer listed before has a newer connectedSince
than when it was last listed (in any earlier poll of the window, so a poll taken while the
clients were reconnecting does not hide it), and each topic with publishers in the poll before
has none connected before that poll. Asked poll after poll with frames, that rebuilt and
merged the set of consumers seen so far 60 times a pass (most of `bundle-ownership`'s time on
a large cluster). Here the consumers' and topics' names become integer codes once, each
consumer's last `connectedSince` is an array indexed by its code, and each poll compares and
updates it in numpy.

The answers are those of the per-poll merges (tests/plugins/reference_bundle_events.py),
merge semantics included: a consumer listed twice votes twice, a topic listed twice in a poll
gives its consumers' votes to each of its rows, null names match null names, and a vote whose
namespace or bundle is null is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.plugins.builtin.shared.positions import snapshot_positions

CONSUMER_KEY = ["topic", "subscription", "consumer_name"]
CONSUMER_COLUMNS = (*CONSUMER_KEY, "connected_since")
"""The columns of `consumers` read here (and by `bundle-ownership`: `columns_of`)."""
PUBLISHER_SINCE = "oldest_publisher_since"


def _times(values: pd.Series) -> np.ndarray:
    """Timestamps as numpy datetime64 (NaT for null), for comparing and holding."""
    found: np.ndarray = pd.to_datetime(values, utc=True).dt.tz_localize(None).to_numpy()
    return found


def _codes(columns: Sequence[pd.Series], *, nulls_match: bool) -> np.ndarray:
    """One int64 code per row for the values of `columns` together: equal rows, equal codes.
    With `nulls_match`, a null is a value like any other (as a merge's keys match); else a
    row with a null anywhere is -1."""
    found = np.zeros(len(columns[0]), dtype=np.int64)
    missing = np.zeros(len(found), dtype=bool)
    for column in columns:
        codes, uniques = column.factorize(use_na_sentinel=not nulls_match)
        missing |= codes < 0
        found, _ = pd.factorize(found * (len(uniques) + 1) + (codes + 1), use_na_sentinel=False)
    if nulls_match:
        return found.astype(np.int64, copy=False)
    dense = np.full(len(found), -1, dtype=np.int64)
    dense[~missing] = pd.factorize(found[~missing], use_na_sentinel=False)[0]
    return dense


def _by_poll(positions: np.ndarray, polls: int) -> tuple[np.ndarray, np.ndarray]:
    """Row order grouped by poll (rows of a poll in their order) and each poll's bounds."""
    kept = np.flatnonzero(positions >= 0)
    if len(kept) and not bool(np.all(np.diff(positions[kept]) >= 0)):
        kept = kept[np.argsort(positions[kept], kind="stable")]
    bounds = np.searchsorted(positions[kept], np.arange(polls + 1))
    return kept, bounds


class Renewals:
    """The reconnected bundles of each of `polls` (distinct snapshot ids, oldest first) in
    turn (`next`), each from the consumers of the polls before it."""

    def __init__(
        self,
        topics: pd.DataFrame,
        consumers: pd.DataFrame,
        polls: Sequence[str],
    ) -> None:
        self.polls = len(polls)
        both = pd.concat([topics["topic"], consumers["topic"]], ignore_index=True)
        topic_codes = _codes([both], nulls_match=True)
        self.topic_code = topic_codes[: len(topics)]
        self.pair_code, self.pairs = _pairs(topics)
        self.topic_order, self.topic_bounds = _by_poll(
            snapshot_positions(topics, polls), self.polls
        )
        self.has_since = PUBLISHER_SINCE in topics
        if self.has_since:
            self.since = topics[PUBLISHER_SINCE]
            self.since_known = self.since.notna().to_numpy()
            self.producers = topics["producer_count"]
        self.consumer_topic = topic_codes[len(topics) :]
        topic = pd.Series(self.consumer_topic, index=consumers.index)
        names = [consumers[c] for c in CONSUMER_KEY[1:]]
        self.consumer_key = _codes([topic, *names], nulls_match=True)
        self.connected = _times(consumers["connected_since"])
        self.consumer_order, self.consumer_bounds = _by_poll(
            snapshot_positions(consumers, polls), self.polls
        )
        self.last = np.full(
            int(self.consumer_key.max()) + 1 if len(self.consumer_key) else 0,
            np.datetime64("NaT"),
            dtype=self.connected.dtype if len(self.connected) else "datetime64[us]",
        )
        self.seen = 0  # polls whose consumers `last` holds

    def _rows(self, order: np.ndarray, bounds: np.ndarray, poll: int) -> np.ndarray:
        return order[bounds[poll] : bounds[poll + 1]]

    def next(self, before_at: Any) -> dict[tuple[str, str], int]:
        """The bundles of the next poll whose every client reconnected since the poll before
        it (collected at `before_at`), with the count of clients compared; then that poll's
        consumers are remembered. The first poll has nothing before it: {}."""
        poll = self.seen
        found = self._answer(poll, before_at) if poll > 0 else {}
        self._remember(poll)
        return found

    def _remember(self, poll: int) -> None:
        rows = self._rows(self.consumer_order, self.consumer_bounds, poll)
        known = rows[~np.isnat(self.connected[rows])]
        keys = self.consumer_key[known][::-1]
        keys, first = np.unique(keys, return_index=True)  # the last row of each consumer
        self.last[keys] = self.connected[known[::-1][first]]
        self.seen += 1

    def _answer(self, poll: int, before_at: Any) -> dict[tuple[str, str], int]:
        now = self._rows(self.topic_order, self.topic_bounds, poll)
        if not len(now):  # no topics listed: nothing to say
            return {}
        pairs, renewed, clients = self._consumer_votes(poll, now)
        if self.has_since and before_at is not None:
            more = self._publisher_votes(poll, now, before_at)
            pairs, renewed, clients = (
                np.concatenate(p) for p in zip((pairs, renewed, clients), more, strict=True)
            )
        voted = pairs >= 0  # a null namespace or bundle is no group
        pairs, renewed, clients = pairs[voted], renewed[voted], clients[voted]
        if not len(pairs):
            return {}
        size = len(self.pairs)
        votes = np.bincount(pairs, minlength=size)
        stale = np.bincount(pairs[~renewed], minlength=size)
        total = np.bincount(pairs, weights=clients, minlength=size)
        whole = np.flatnonzero((votes > 0) & (stale == 0))
        return {self.pairs[i]: int(total[i]) for i in whole}

    def _consumer_votes(
        self, poll: int, now: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = self._rows(self.consumer_order, self.consumer_bounds, poll)
        after = self.connected[rows]
        before = self.last[self.consumer_key[rows]]
        compared = ~np.isnat(after) & ~np.isnat(before)
        rows, after, before = rows[compared], after[compared], before[compared]
        voters, topic_rows = _matches(self.consumer_topic[rows], self.topic_code[now])
        renewed = (after > before)[voters]
        pairs = self.pair_code[now[topic_rows]]
        return pairs, renewed, np.ones(len(pairs), dtype=np.int64)

    def _publisher_votes(
        self, poll: int, now: np.ndarray, before_at: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        before = self._rows(self.topic_order, self.topic_bounds, poll - 1)
        had = before[self.since_known[before]]
        listed = now[self.since_known[now]]
        if not len(had) or not len(listed):
            return _no_votes()
        voters, _ = _matches(self.topic_code[listed], self.topic_code[had])
        rows = listed[voters]
        since = pd.to_datetime(self.since.iloc[rows], utc=True)
        renewed = (since > pd.Timestamp(before_at)).to_numpy(dtype=bool)
        clients = self.producers.iloc[rows].fillna(1).astype("int64").to_numpy()
        return self.pair_code[rows], renewed, clients


def _no_votes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64)


def _pairs(topics: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Each topic row's (namespace, bundle) as a code (-1 when either is null), and the
    pairs by code."""
    codes = _codes([topics["namespace"], topics["bundle"]], nulls_match=False)
    if not len(codes):
        return codes, []
    firsts = np.unique(codes, return_index=True)[1]  # -1 first, when it is there
    rows = firsts[1:] if codes[firsts[0]] < 0 else firsts
    pairs = zip(topics["namespace"].iloc[rows], topics["bundle"].iloc[rows], strict=True)
    return codes, [(str(ns), str(b)) for ns, b in pairs]


def _matches(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j) with left[i] == right[j], as an inner merge makes them (a value listed
    twice on the right matches twice): the i's and the j's."""
    order = np.argsort(right, kind="stable")
    ranked = right[order]
    low = np.searchsorted(ranked, left, "left")
    counts = np.searchsorted(ranked, left, "right") - low
    lefts = np.repeat(np.arange(len(left)), counts)
    starts = np.repeat(low - (np.cumsum(counts) - counts), counts)
    return lefts, order[np.arange(len(lefts)) + starts]
