"""Bundles reloaded between polls, one poll against the poll before it
(`BundleOwnership.step`), put together for the window by `reloaded_by_poll`.

`Renewals` answers for every poll of a window at once: a bundle "reloaded" at a poll that lists
bundles when each consumer of its topics has a newer `connectedSince` than when it was last
listed in an earlier such poll of the window, and each topic with publishers in the poll before
that lists bundles has none connected before it. Read that way, every pass read 60 polls of
consumers and topics (12 million consumer rows at 100,000 topics). Here a step reads the poll
and the one before it, and says:

* `votes`: per (namespace, bundle) of the poll, the clients compared (`votes`), those that did
  not reconnect (`stale`) and the clients counted (`total`), for every consumer also listed in
  the poll before and every publisher, when both polls list bundles;
* `arrivals`: the poll's consumers the poll before does not account for (not listed there, or
  it listed no bundles), one row per topic row of the poll they vote for: what they compare
  with is the window's to find;
* `departures`: consumers the poll before lists and this poll does not (all of them when this
  poll lists no bundles), with their `connectedSince` then: what a later arrival compares with;
* `had` and `publishers`: when a poll lists no bundles, the topics the poll before had with
  publishers (and when it was taken); when the poll before listed none, this poll's topics
  with publishers, for the window to compare with the last poll that listed bundles;
* `stored_events`: the bundle events the collector stored with the poll (`events` rows of a
  kind starting with "bundle"), which the analysis lists beside its own. A pass read 60 polls
  of every event to find them (335,000 rows at 100,000 topics, about 60 of them bundle
  events).

The window's first poll alone says nothing but its stored events: no earlier poll of the
window is there. The answers are those of `Renewals` over the whole window, and the stored
events those of the window's `events` (tests/plugins/test_bundle_steps.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pulsar_lens.plugins.builtin.bundle_ownership.events import bundle_kinds
from pulsar_lens.plugins.builtin.bundle_ownership.renewals import (
    CONSUMER_KEY,
    Renewals,
    _matches,
)

TIME = "datetime64[us, UTC]"
STORED_EVENT_COLUMNS = ("kind", "subject", "namespace", "before", "after")
"""The columns of the `events` table the analysis reads (with `collected_at`)."""
SINCE = "datetime64[us]"  # `Renewals` compares naive UTC times
PAIR = {"namespace": "object", "bundle": "object"}
FRAMES: Mapping[str, Mapping[str, str]] = {
    "votes": {"poll": "object", **PAIR, "votes": "int64", "stale": "int64", "total": "int64"},
    "arrivals": {"poll": "object", "at": TIME, "key": "object", "since": SINCE, **PAIR},
    "departures": {"at": TIME, "key": "object", "since": SINCE},
    "had": {"at": TIME, "before_at": TIME, "topic": "object", "rows": "int64"},
    "publishers": {
        "poll": "object",
        "at": TIME,
        "topic": "object",
        "since": TIME,
        "clients": "int64",
        **PAIR,
    },
    "stored_events": {  # as the `events` table has them: the step keeps the rows' own dtypes
        "collected_at": TIME,
        **{column: "str" for column in STORED_EVENT_COLUMNS},
    },
}
"""Each step frame with its columns and dtypes (`key`, `topic`: `_key` texts)."""
STEP_OUTPUTS = tuple(FRAMES)


def empty(name: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in FRAMES[name].items()})


def _frame(name: str, columns: Mapping[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame(dict(columns))
    return frame.astype(dict(FRAMES[name])) if len(frame) else empty(name)


def _text(value: Any) -> str | None:
    return (
        None
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))
        else str(value)
    )


def _key(values: Sequence[Any]) -> str:
    """One text per key, nulls kept apart from every name (they match each other, as in
    `Renewals`)."""
    return json.dumps([_text(v) for v in values])


def step(
    bundles: pd.DataFrame,
    topics: pd.DataFrame,
    consumers: pd.DataFrame,
    events: pd.DataFrame,
    snapshots: pd.DataFrame,
) -> dict[str, pd.DataFrame]:
    """The step frames of the poll against the poll before it (see the module); `events`
    holds the poll's own rows (`Inputs.latest`)."""
    found = {name: empty(name) for name in FRAMES}
    ids = [str(s) for s in snapshots["snapshot_id"]]
    if ids:
        found["stored_events"] = stored_events(events)
    if len(ids) < 2:
        return found
    before, now = ids
    times = pd.to_datetime(snapshots["collected_at"], utc=True).astype(TIME)
    before_at, at = times.iloc[0], times.iloc[1]
    listing = set(bundles["snapshot_id"].astype(str)) if len(bundles) else set()
    polls = [sid for sid in ids if sid in listing]
    if not polls:
        return found
    renewals = Renewals(topics, consumers, polls)
    step = _Step(renewals, topics, consumers, now, at)
    if polls == [before]:  # this poll lists no bundles: all the poll before had goes
        renewals.next(None)
        found["departures"] = step.departures(np.zeros(0, dtype=np.int64))
        found["had"] = step.had(before_at)
    elif polls == [now]:  # the poll before listed none: the window has what comes before
        renewals.next(None)
        rows = step.consumer_rows(0)
        found["arrivals"] = step.arrivals(rows[~np.isnat(renewals.connected[rows])])
        found["publishers"] = step.publishers()
    else:
        renewals.next(None)  # remembers the poll before
        found.update(step.compared(before_at))
    return found


def stored_events(events: pd.DataFrame) -> pd.DataFrame:
    """Of the `events` rows of the step's poll, those of a bundle kind, in the table's order
    and dtypes."""
    if events.empty or "kind" not in events:
        return empty("stored_events")
    columns = ["collected_at", *STORED_EVENT_COLUMNS]
    return bundle_kinds(events)[columns].reset_index(drop=True)


class _Step:
    """The frames of one step, from a `Renewals` over its one or two polls that list bundles."""

    def __init__(
        self,
        renewals: Renewals,
        topics: pd.DataFrame,
        consumers: pd.DataFrame,
        now: str,
        at: pd.Timestamp,
    ) -> None:
        self.r, self.topics, self.consumers, self.now, self.at = (
            renewals,
            topics,
            consumers,
            now,
            at,
        )

    def consumer_rows(self, poll: int) -> np.ndarray:
        r = self.r
        return r.consumer_order[r.consumer_bounds[poll] : r.consumer_bounds[poll + 1]]

    def topic_rows(self, poll: int) -> np.ndarray:
        r = self.r
        return r.topic_order[r.topic_bounds[poll] : r.topic_bounds[poll + 1]]

    def _keys(self, rows: np.ndarray) -> list[str]:
        # the rows taken first: the whole column as Python objects was most of a step at
        # 1,000,000 topics (4.2 M consumer rows, three columns, for arrivals and departures)
        columns = [self.consumers[c].iloc[rows].to_numpy(dtype=object) for c in CONSUMER_KEY]
        return [_key(values) for values in zip(*columns, strict=True)]

    def compared(self, before_at: pd.Timestamp) -> dict[str, pd.DataFrame]:
        """Both polls list bundles: the votes of consumers listed in both and of publishers,
        the arrivals and the departures."""
        r = self.r
        rows = self.consumer_rows(1)
        after = r.connected[rows]
        last = r.last[r.consumer_key[rows]]
        known = ~np.isnat(after)
        both = rows[known & ~np.isnat(last)]
        new = rows[known & np.isnat(last)]
        now = self.topic_rows(1)
        found: dict[str, pd.DataFrame] = {}
        if len(now):
            voters, topic_rows = _matches(r.consumer_topic[both], r.topic_code[now])
            renewed = (r.connected[both] > r.last[r.consumer_key[both]])[voters]
            pairs = r.pair_code[now[topic_rows]]
            clients = np.ones(len(pairs), dtype=np.int64)
            if r.has_since:
                more = r._publisher_votes(1, now, before_at)
                pairs, renewed, clients = (
                    np.concatenate(p) for p in zip((pairs, renewed, clients), more, strict=True)
                )
            found["votes"] = self._votes(pairs, renewed, clients)
            found["arrivals"] = self.arrivals(new)
        still = r.consumer_key[rows[known]]
        found["departures"] = self.departures(still)
        return found

    def _votes(self, pairs: np.ndarray, renewed: np.ndarray, clients: np.ndarray) -> pd.DataFrame:
        voted = pairs >= 0
        pairs, renewed, clients = pairs[voted], renewed[voted], clients[voted]
        if not len(pairs):
            return empty("votes")
        size = len(self.r.pairs)
        votes = np.bincount(pairs, minlength=size)
        stale = np.bincount(pairs[~renewed], minlength=size)
        total = np.bincount(pairs, weights=clients, minlength=size)
        chosen = np.flatnonzero(votes > 0)
        return _frame(
            "votes",
            {
                "poll": [self.now] * len(chosen),
                "namespace": [self.r.pairs[i][0] for i in chosen],
                "bundle": [self.r.pairs[i][1] for i in chosen],
                "votes": votes[chosen],
                "stale": stale[chosen],
                "total": total[chosen].astype(np.int64),
            },
        )

    def arrivals(self, rows: np.ndarray) -> pd.DataFrame:
        """Consumer rows of this poll (known `connectedSince`), one per topic row of the poll
        they vote for (of a known namespace and bundle)."""
        r = self.r
        now = self.topic_rows(len(r.topic_bounds) - 2)
        if not len(rows) or not len(now):
            return empty("arrivals")
        voters, topic_rows = _matches(r.consumer_topic[rows], r.topic_code[now])
        pairs = r.pair_code[now[topic_rows]]
        kept = pairs >= 0
        voters, pairs = voters[kept], pairs[kept]
        chosen = rows[voters]
        return _frame(
            "arrivals",
            {
                "poll": [self.now] * len(chosen),
                "at": [self.at] * len(chosen),
                "key": self._keys(chosen),
                "since": r.connected[chosen],
                "namespace": [r.pairs[p][0] for p in pairs],
                "bundle": [r.pairs[p][1] for p in pairs],
            },
        )

    def departures(self, still: np.ndarray) -> pd.DataFrame:
        """Consumers the poll before remembers (known `connectedSince`) whose keys are not
        among `still`, with that `connectedSince`."""
        r = self.r
        rows = self.consumer_rows(0)
        rows = rows[~np.isnat(r.connected[rows])]
        gone = rows[~np.isin(r.consumer_key[rows], still)]
        keys, first = np.unique(r.consumer_key[gone], return_index=True)
        chosen = gone[first]
        return _frame(
            "departures",
            {
                "at": [self.at] * len(chosen),
                "key": self._keys(chosen),
                "since": r.last[keys],
            },
        )

    def had(self, before_at: pd.Timestamp) -> pd.DataFrame:
        """The topics of the poll before with a known oldest publisher, with how many rows
        each (a row votes once per row it matches); a row without a topic marks the step."""
        r = self.r
        marker = {"at": [self.at], "before_at": [before_at], "topic": [None], "rows": [0]}
        if not r.has_since:
            return _frame("had", marker)
        rows = self.topic_rows(0)
        rows = rows[r.since_known[rows]]
        names = self.topics["topic"].iloc[rows].to_numpy(dtype=object)
        counts = pd.Series([_key([t]) for t in names], dtype=object).value_counts(sort=False)
        return _frame(
            "had",
            {
                "at": [self.at] * (len(counts) + 1),
                "before_at": [before_at] * (len(counts) + 1),
                "topic": [None, *counts.index.tolist()],
                "rows": [0, *counts.tolist()],
            },
        )

    def publishers(self) -> pd.DataFrame:
        """This poll's topic rows with a known oldest publisher, of a known bundle."""
        r = self.r
        if not r.has_since:
            return empty("publishers")
        rows = self.topic_rows(0)
        rows = rows[r.since_known[rows] & (r.pair_code[rows] >= 0)]
        since = pd.to_datetime(r.since.iloc[rows], utc=True)
        clients = r.producers.iloc[rows].fillna(1).astype("int64").to_numpy()
        names = self.topics["topic"].iloc[rows].to_numpy(dtype=object)
        return _frame(
            "publishers",
            {
                "poll": [self.now] * len(rows),
                "at": [self.at] * len(rows),
                "topic": [_key([t]) for t in names],
                "since": since.to_numpy(),
                "clients": clients,
                "namespace": [r.pairs[p][0] for p in r.pair_code[rows]],
                "bundle": [r.pairs[p][1] for p in r.pair_code[rows]],
            },
        )


def reloaded_by_poll(steps: Mapping[str, pd.DataFrame]) -> dict[str, dict[tuple[str, str], int]]:
    """The bundles each poll found reloaded, with the clients counted, from every step of the
    window (`Inputs.steps` of `STEP_OUTPUTS`): `Renewals.next` of each poll that lists bundles."""
    steps = {name: frame if len(frame) else empty(name) for name, frame in steps.items()}
    parts = [steps["votes"][["poll", "namespace", "bundle", "votes", "stale", "total"]]]
    arrivals, departures = steps["arrivals"], steps["departures"]
    if len(arrivals) and len(departures):
        matched = pd.merge_asof(
            arrivals.sort_values("at", kind="stable"),
            departures.rename(columns={"since": "before"}).sort_values("at", kind="stable"),
            on="at",
            by="key",
            allow_exact_matches=False,
        )
        matched = matched[matched["before"].notna()]
        renewed = (matched["since"] > matched["before"]).to_numpy(dtype=bool)
        parts.append(_counted(matched, renewed, np.ones(len(matched), dtype=np.int64)))
    publishers, had = steps["publishers"], steps["had"]
    if len(publishers) and len(had):
        marks = had[had["topic"].isna()][["at", "before_at"]].rename(columns={"at": "had_at"})
        polls = publishers[["poll", "at"]].drop_duplicates()
        last = pd.merge_asof(
            polls.sort_values("at", kind="stable"),
            marks.sort_values("had_at", kind="stable"),
            left_on="at",
            right_on="had_at",
            allow_exact_matches=False,
        ).dropna(subset=["had_at"])
        topics = had[had["topic"].notna()].rename(columns={"at": "had_at"})
        voters = publishers.merge(last[["poll", "had_at", "before_at"]], on="poll").merge(
            topics[["had_at", "topic", "rows"]], on=["had_at", "topic"]
        )
        voters = voters.loc[voters.index.repeat(voters["rows"].to_numpy())]
        renewed = (voters["since"] > voters["before_at"]).to_numpy(dtype=bool)
        parts.append(_counted(voters, renewed, voters["clients"].to_numpy(dtype=np.int64)))
    found = pd.concat([p for p in parts if len(p)]) if any(len(p) for p in parts) else None
    if found is None:
        return {}
    sums = found.groupby(["poll", "namespace", "bundle"], sort=False)[["votes", "stale", "total"]]
    totals = sums.sum()
    whole = totals[(totals["votes"] > 0) & (totals["stale"] == 0)]
    reloaded: dict[str, dict[tuple[str, str], int]] = {}
    for (poll, namespace, bundle), total in zip(whole.index, whole["total"].tolist(), strict=True):
        reloaded.setdefault(str(poll), {})[(str(namespace), str(bundle))] = int(total)
    return reloaded


def _counted(rows: pd.DataFrame, renewed: np.ndarray, clients: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "poll": rows["poll"].to_numpy(dtype=object),
            "namespace": rows["namespace"].to_numpy(dtype=object),
            "bundle": rows["bundle"].to_numpy(dtype=object),
            "votes": np.ones(len(rows), dtype=np.int64),
            "stale": (~renewed).astype(np.int64),
            "total": clients,
        }
    )
