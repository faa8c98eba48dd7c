"""incident-timeline with steps (each poll against the one before it, kept per poll) gives
exactly the timeline of comparing the whole window at once (plugin version 1.1,
tests/plugins/reference_timeline_window.py): on the synthetic clusters, on them with rows
missing from some polls (subscriptions and consumers leaving the listing and coming back, a
window starting while one is away), rows listed twice and backlogs unknown, over windows that
start at any poll; and through a store, pass after pass, with the steps read back."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner, steps
from pulsar_lens.plugins.builtin.incident_timeline import IncidentTimeline, clients
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.runner import validate_params
from pulsar_lens.plugins.steps import with_steps
from tests.plugins import reference_timeline_window as window
from tests.plugins.swaps import swapped
from tests.plugins.test_incident_timeline import TIMES, _events, _poll, _probes, build_store
from tests.plugins.test_incident_timeline_vectorised import CASES, with_results
from tests.plugins.test_incident_timeline_vectorised import _events as EVENTS

PARAMS = ({}, {"backlog_threshold": 20}, {"window": 3, "backlog_threshold": 1})


def with_events(inputs: Inputs, seed: int) -> Inputs:
    """`inputs` with collector events stored with each poll: of every kind the timeline reads
    (and some it does not), between the poll before and the poll (some earlier, some at the
    poll before exactly: their step cannot say which poll shows them), naming the subscriptions
    listed (some gone, some never listed) and hostile or missing names."""
    rng = np.random.default_rng(seed)
    subs = inputs.tables["subscriptions"]
    named = list(zip(subs["topic"], subs["subscription"], strict=True)) or [("t", "s")]
    parts = []
    times = pd.to_datetime(inputs.snapshots["collected_at"], utc=True)
    for i, (sid, at) in enumerate(zip(inputs.snapshots["snapshot_id"], times, strict=True)):
        count = int(rng.integers(0, 12))
        events = EVENTS(rng, count)
        chosen = [named[j] for j in rng.integers(0, len(named), count)]
        keep = rng.random(count) < 0.7  # else the hostile names `EVENTS` made
        events.loc[keep, "topic"] = [t for (t, _), k in zip(chosen, keep, strict=True) if k]
        events.loc[keep, "subscription"] = [s for (_, s), k in zip(chosen, keep, strict=True) if k]
        earlier = times.iloc[i - 1] if i else at - pd.Timedelta(seconds=30)
        events["at"] = earlier + (at - earlier) * rng.random(count)
        late = rng.random(count) < 0.1  # stored with a later poll than the one they follow
        events.loc[late, "at"] = earlier - (at - earlier) * rng.random(int(late.sum()))
        events.loc[rng.random(count) < 0.05, "at"] = earlier  # at the poll before, exactly
        events["subject"] = [f"b{j}" for j in rng.integers(0, 3, count)]
        events["namespace"] = [("t/ns", None)[j] for j in rng.integers(0, 2, count)]
        parts.append(events.assign(snapshot_id=sid, collected_at=at))
    tables = dict(inputs.tables)
    tables["events"] = pd.concat(parts, ignore_index=True) if parts else _no_events()
    return Inputs(tables, inputs.snapshots)


def thinned(inputs: Inputs, seed: int) -> Inputs:
    """`inputs` with a fifth of the subscription and consumer rows dropped from polls (they
    leave the listing and come back), a few listed twice and some backlogs unknown."""
    rng = np.random.default_rng(seed)
    tables = dict(inputs.tables)
    for name in ("subscriptions", "consumers"):
        frame = tables[name]
        if frame.empty:
            continue
        kept = frame[rng.random(len(frame)) > 0.2]
        twice = kept[rng.random(len(kept)) < 0.05]
        frame = pd.concat([kept, twice]).sort_index(kind="stable").reset_index(drop=True)
        if name == "subscriptions":
            frame["msg_backlog"] = frame["msg_backlog"].astype("Int64")
            frame.loc[rng.random(len(frame)) < 0.05, "msg_backlog"] = pd.NA
        tables[name] = frame
    return Inputs(tables, inputs.snapshots)


def retyped(inputs: Inputs, seed: int) -> Inputs:
    """`inputs` with a fifth of the subscription rows given another type, or none: a
    subscription's type changes from poll to poll (and back), so the newest type that chooses
    the page of its consumers' joins differs from the type of the poll they joined in."""
    rng = np.random.default_rng(seed)
    tables = dict(inputs.tables)
    frame = tables["subscriptions"].copy()
    if len(frame):
        kinds = np.array(["Shared", "Failover", "Key_Shared", "Exclusive", None], dtype=object)
        changed = rng.random(len(frame)) < 0.2
        frame["type"] = frame["type"].astype(object)
        frame.loc[changed, "type"] = kinds[rng.integers(0, len(kinds), int(changed.sum()))]
        tables["subscriptions"] = frame
    return Inputs(tables, inputs.snapshots)


def from_poll(inputs: Inputs, start: int) -> Inputs:
    """`inputs` as a window that starts at poll `start`: nothing of the polls before it."""
    index = inputs.snapshots.iloc[start:].reset_index(drop=True)
    ids = set(index["snapshot_id"].astype(str))
    tables = {
        name: frame[frame["snapshot_id"].astype(str).isin(ids)].reset_index(drop=True)
        if "snapshot_id" in frame
        else frame
        for name, frame in inputs.tables.items()
    }
    return Inputs(tables, index)


VARIANTS = [
    (f"{name}, {how}", variant)
    for seed, (name, inputs) in enumerate(CASES)
    for how, variant in (
        ("as made", inputs),
        ("thinned", thinned(inputs, seed)),
        ("with events", with_events(thinned(inputs, seed + 50), seed)),
        ("thinned, from poll 2", from_poll(with_events(thinned(inputs, seed + 100), seed), 2)),
        ("retyped, with events", with_events(retyped(thinned(inputs, seed + 150), seed), seed)),
    )
    if len(variant.snapshots)
]


def whole_and_stepped(inputs: Inputs, params: dict[str, Any]) -> tuple[Any, Any]:
    plugin, full = IncidentTimeline(), with_results(inputs)
    validated = validate_params(plugin, params)
    stepped = plugin.analyze(with_steps(plugin, full, validated), validated)
    with swapped(window.WHOLE_WINDOW):
        whole = plugin.analyze(full, validated)
    return whole, stepped


@pytest.mark.parametrize(("name", "inputs"), VARIANTS, ids=[name for name, _ in VARIANTS])
@pytest.mark.parametrize("params", PARAMS)
def test_steps_give_the_timeline_of_the_whole_window(
    name: str, inputs: Inputs, params: dict[str, Any]
) -> None:
    whole, stepped = whole_and_stepped(inputs, params)
    pd.testing.assert_frame_equal(stepped.frames["events"], whole.frames["events"])
    assert stepped.summary == whole.summary


def test_the_variants_reach_what_steps_must_put_together() -> None:
    """Backlog rows of subscriptions back in the listing, whether over the threshold before
    they left or not, consumers reconnecting, subscriptions changing type, and client rows
    linked in their step, in the window, and linked in their step but anew in the window (a
    join whose subscription's type changed after it) come up in the variants."""
    plugin = IncidentTimeline()
    validated = validate_params(plugin, {"backlog_threshold": 20})
    seen = {"arrived over": 0, "arrived under": 0, "left over": 0, "reconnects": 0}
    seen |= {"joins": 0, "load managers": 0, "untyped": 0, "retyped": 0}
    seen |= {"linked in a step": 0, "linked in the window": 0, "joins linked anew": 0}
    for _, inputs in VARIANTS:
        found = with_steps(plugin, inputs, validated)
        changes, left = found.steps("backlog_changes"), found.steps("backlog_left")
        back = changes[
            changes["arrived"] & changes["at"].gt(inputs.snapshots["collected_at"].min())
        ]
        seen["arrived over"] += int(back["over"].sum())
        seen["arrived under"] += int((~back["over"]).sum())
        seen["left over"] += int(left["over"].sum())
        seen["reconnects"] += len(found.steps("reconnects"))
        client = found.steps("clients")
        seen["joins"] += int(client["kind"].isin(clients.JOINS).sum()) if len(client) else 0
        seen["load managers"] += len(found.steps("load_managers"))
        seen["untyped"] += len(found.steps("untyped"))
        seen["retyped"] += len(found.steps("retyped"))
        if len(client):
            linked = client["link"].notna()
            seen["linked in a step"] += int(linked.sum())
            seen["linked in the window"] += int((~linked).sum())
            changed = pd.concat([found.steps("untyped"), found.steps("retyped")])
            again = clients.unlinked(client, changed) & linked.to_numpy(dtype=bool)
            seen["joins linked anew"] += int(again.sum())
    assert all(count > 0 for count in seen.values()), seen


def test_a_subscription_back_in_the_listing_compares_with_its_row_before_it_left() -> None:
    subs = pd.DataFrame(
        {
            "snapshot_id": ["a", "b", "c", "c", "d"],
            "collected_at": pd.to_datetime([0, 30, 60, 60, 90], unit="s", utc=True),
            "topic": ["t", "t", "t", "u", "t"],
            "subscription": ["s", "s", "s", "s", "s"],
            "type": ["Shared", "Shared", None, "Failover", None],
            "msg_backlog": [5, 50, None, 1, 60],
        }
    )
    subs = subs[subs.index != 2].reset_index(drop=True)  # t/s is not listed in poll c
    index = pd.DataFrame(
        {
            "snapshot_id": list("abcd"),
            "collected_at": pd.to_datetime([0, 30, 60, 90], unit="s", utc=True),
        }
    )
    plugin = IncidentTimeline()
    validated = validate_params(plugin, {"backlog_threshold": 20})
    tables = {"subscriptions": subs, "consumers": _no_consumers(), "events": _no_events()}
    found = with_steps(plugin, Inputs(tables, index), validated)
    left = found.steps("backlog_left")
    assert left[["topic", "subscription", "over"]].values.tolist() == [
        ["t", "s", True],  # not listed in c: over in b
        ["u", "s", False],  # not listed in d
    ]
    changes = found.steps("backlog_changes")
    assert changes[["topic", "backlog", "over", "arrived"]].values.tolist() == [
        ["t", 50, True, False],  # b: over, from under in a
        ["u", 1, False, True],  # c: first listed (under: nothing to say)
        ["t", 60, True, True],  # d: back, over as it was before it left: no event
    ]
    rows = clients.backlog_rows(changes, left, 20)
    assert [(r["topic"], r["kind"]) for r in rows] == [("t", "backlog_over")]
    types = clients.NewestTypes(subs[subs["snapshot_id"] == "d"], found.steps("untyped"))
    assert types.of({("t", "s"), ("u", "s"), ("v", "s")}) == {
        ("t", "s"): "Shared",  # typed last in poll b
        ("u", "s"): "Failover",  # typed last in poll c, not listed in d
    }


def _no_events() -> pd.DataFrame:
    columns = ("snapshot_id", "collected_at", *clients.EVENT_COLUMNS)
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def _no_consumers() -> pd.DataFrame:
    columns = ("snapshot_id", "collected_at", *IncidentTimeline.columns_of["consumers"])
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def _run(store: Store, *, use_stored: bool = False, **params: Any) -> pd.DataFrame:
    """The timeline as the results pass analyses it (`use_stored=False`: steps kept), or as
    a page does."""
    plugin = discover(entry_points=False).get("incident-timeline")
    output = runner.run(plugin, store, params, use_cache=False, use_stored=use_stored, views=False)
    return output.result.frames["events"]


def test_passes_read_back_the_steps_they_kept_and_add_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Poll after poll, a pass computes the newest poll's step and the window's first poll
    alone, reads the others back, and its timeline equals the whole window's; steps no window
    holds any more go with the pass's pruning."""
    monkeypatch.setattr(IncidentTimeline, "history", 3)
    calls: list[tuple[str, ...]] = []
    original = IncidentTimeline.step

    def counted(self: IncidentTimeline, data: Inputs, params: Any) -> Any:
        calls.append(tuple(data.snapshots["snapshot_id"].astype(str)))
        return original(self, data, params)

    monkeypatch.setattr(IncidentTimeline, "step", counted)
    store = Store(tmp_path)
    _probes(store)
    ids: list[str] = []
    for i in range(len(TIMES)):
        ids.append(store.write(_poll(i), events=_events(i)))
        calls.clear()
        stepped = _run(store)
        window_ids = ids[max(0, i - 2) : i + 1]
        expected = {tuple(window_ids[:1])}
        if i:
            expected.add(tuple(ids[i - 1 : i + 1]))
        assert set(calls) <= expected | ({tuple(ids[: i + 1])} if i < 2 else set())
        if i >= 3:  # warm: only the newest poll's step and the new first poll alone
            assert sorted(calls) == sorted(expected)
        with swapped(window.WHOLE_WINDOW):
            whole = _run(store)
        pd.testing.assert_frame_equal(stepped, whole)
        assert _run(store, topic="none") is not None  # other params than step_params: kept
    kept = steps.step_store(store)
    assert kept is not None
    before = {tuple(meta["snapshot_ids"]) for _, meta in kept.entries("incident-timeline")}
    assert (ids[0],) in before
    plugin = discover(entry_points=False).get("incident-timeline")
    steps.prune_steps(store, [plugin])
    after = {tuple(meta["snapshot_ids"]) for _, meta in kept.entries("incident-timeline")}
    assert after and all(pair[-1] in ids[-3:] for pair in after)
    assert (ids[0],) not in after


def test_steps_of_another_threshold_are_kept_apart(tmp_path: Path) -> None:
    store = build_store(tmp_path)
    default, low = _run(store), _run(store, use_stored=True, backlog_threshold=1)
    kept = steps.step_store(store)
    assert kept is not None
    filed = {json_key(meta["params"]) for _, meta in kept.entries("incident-timeline")}
    assert filed == {json_key({"backlog_threshold": 10_000})}  # a page keeps none
    with swapped(window.WHOLE_WINDOW):
        pd.testing.assert_frame_equal(low, _run(store, backlog_threshold=1))
        pd.testing.assert_frame_equal(default, _run(store))


def json_key(params: dict[str, Any]) -> str:
    return repr(sorted(params.items()))


@pytest.mark.parametrize("seed", range(3))
def test_steps_of_random_windows_equal_the_whole_window(seed: int) -> None:
    rng = random.Random(seed)
    _, inputs = CASES[rng.randrange(2, len(CASES))]
    variant = from_poll(thinned(inputs, seed + 7), rng.randrange(0, 3))
    whole, stepped = whole_and_stepped(variant, {"backlog_threshold": rng.choice((1, 20, 100))})
    pd.testing.assert_frame_equal(stepped.frames["events"], whole.frames["events"])
