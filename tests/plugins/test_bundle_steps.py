"""bundle-ownership with steps (each poll against the one before it, kept per poll) finds the
bundles reloaded at each poll exactly as `Renewals` does over the whole window, and the same
events: on the random windows of test_bundle_events_vectorised (consumers and publishers
reconnecting, coming, going and coming back, polls that list no bundles, rows listed twice,
null names, rows of other snapshots, rows out of order), over windows starting at any poll."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens.api import Inputs
from pulsar_lens.core.model import SCHEMAS
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership, events, steps
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.runner import validate_params
from pulsar_lens.plugins.steps import with_steps
from pulsar_lens.plugins.testing import make_snapshot
from tests.plugins import reference_bundle_window as whole
from tests.plugins.swaps import swapped
from tests.plugins.test_bundle_events_vectorised import SEEDS, window
from tests.plugins.test_columns_of import topics_of
from tests.plugins.vectorised_cases import cluster_polls


def from_poll(frames: tuple[pd.DataFrame, ...], start: int) -> tuple[pd.DataFrame, ...]:
    """The window's frames as a window starting at poll `start`."""
    bundles, topics, consumers, index = frames
    index = index.iloc[start:].reset_index(drop=True)
    ids = set(index["snapshot_id"].astype(str))

    def mine(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["snapshot_id"].astype(str).isin(ids)].reset_index(drop=True)

    return mine(bundles), mine(topics), mine(consumers), index


def no_events() -> pd.DataFrame:
    return SCHEMAS["events"].empty_table().to_pandas()


def stepped(frames: tuple[pd.DataFrame, ...]) -> dict[str, dict[tuple[str, str], int]]:
    bundles, topics, consumers, index = frames
    plugin = BundleOwnership()
    tables = {"bundles": bundles, "topics": topics, "consumers": consumers, "events": no_events()}
    inputs = Inputs(tables, index)
    found = with_steps(plugin, inputs, validate_params(plugin, {}))
    return steps.reloaded_by_poll({name: found.steps(name) for name in steps.STEP_OUTPUTS})


CASES = [(seed, start) for seed in SEEDS for start in (0, 1, 3)]


@pytest.mark.parametrize(("seed", "start"), CASES)
def test_steps_find_the_reloads_of_the_whole_window(seed: int, start: int) -> None:
    frames = from_poll(window(seed), start)
    whole = events.whole_window(*frames)
    assert stepped(frames) == whole
    bundles, _, _, index = frames
    pd.testing.assert_frame_equal(
        events.compute_events(bundles, index, stepped(frames)),
        events.compute_events(bundles, index, whole),
    )


def test_the_windows_need_what_steps_put_together() -> None:
    """Reloads found through consumers back in the listing and through publishers compared
    across polls that listed no bundles come up in the windows."""
    seen: dict[str, int] = {"reloads": 0, "arrivals resolved": 0, "publishers across": 0}
    for seed in SEEDS:
        frames = from_poll(window(seed), 1)
        bundles, topics, consumers, index = frames
        plugin = BundleOwnership()
        tables = {"bundles": bundles, "topics": topics, "consumers": consumers}
        inputs = Inputs({**tables, "events": no_events()}, index)
        found = with_steps(plugin, inputs, validate_params(plugin, {}))
        every = {name: found.steps(name) for name in steps.STEP_OUTPUTS}
        every = {name: f if len(f) else steps.empty(name) for name, f in every.items()}
        arrivals, departures = every["arrivals"], every["departures"]
        seen["arrivals resolved"] += int(arrivals["key"].isin(departures["key"]).sum())
        seen["publishers across"] += len(every["publishers"]) * bool(len(every["had"]))
        seen["reloads"] += sum(len(v) for v in stepped(frames).values())
    assert all(count > 0 for count in seen.values()), seen


def test_a_step_of_the_windows_first_poll_says_nothing_but_its_stored_events() -> None:
    bundles, topics, consumers, index = window(3)
    first = index.iloc[:1]
    found = steps.step(bundles, topics, consumers, no_events(), first)
    assert all(frame.empty for frame in found.values())
    assert set(found) == set(steps.STEP_OUTPUTS)
    sid, at = str(first["snapshot_id"].iloc[0]), first["collected_at"].iloc[0]
    stored = pd.DataFrame(
        {
            "snapshot_id": [sid, sid, sid],
            "collected_at": pd.to_datetime([at] * 3, utc=True),
            "kind": ["bundle_removed", "consumer_joined", "bundle_added"],
            "subject": ["ns/a", "t/s/c", "ns/b"],
            "namespace": ["ns", "ns", "ns"],
            "before": ["b1", None, None],
            "after": [None, None, "b2"],
        }
    )
    found = steps.step(bundles, topics, consumers, stored, first)
    assert found["stored_events"]["subject"].tolist() == ["ns/a", "ns/b"]  # of a bundle kind


def test_the_stepped_analysis_equals_the_whole_windows_on_a_store(tmp_path: Path) -> None:
    """Through the runner and a store, pass after pass (steps kept and read back), the
    result is the whole-window analysis's, frame for frame."""
    store = Store(tmp_path)
    plugin = discover(entry_points=False).get("bundle-ownership")
    for i, poll in enumerate(cluster_polls(5, 60, 6, "4.0.7")):
        polled = {k: v for k, v in poll.items() if k != "key_samples"}
        topics, bundles = topics_of(polled["subscriptions"], i)
        store.write(make_snapshot(i * 30.0, **polled, topics=topics, bundles=bundles))
        stepped = runner.run(plugin, store, None, use_cache=False, use_stored=False, views=False)
        with swapped(whole.WHOLE_WINDOW):
            full = runner.run(plugin, store, None, use_cache=False, use_stored=False, views=False)
        for name, frame in full.result.frames.items():
            pd.testing.assert_frame_equal(stepped.result.frames[name], frame, obj=name)
        assert stepped.result.summary == full.result.summary
    assert stepped.result.summary["events"]  # owners moved: not an empty comparison


def test_the_collectors_bundle_events_come_from_the_steps_as_from_the_window(
    tmp_path: Path,
) -> None:
    """The bundle events the collector stored are listed from the steps (version 1.3), as the
    whole window's `events` listed them: polls leaving a short window, events of other kinds
    left out, one namespace asked for, the collector's owner changes the analysis finds too."""
    from pulsar_lens.collectors.events import diff
    from pulsar_lens.core.model import EventRecord

    store = Store(tmp_path)
    plugin = discover(entry_points=False).get("bundle-ownership")
    previous = None
    listed = 0
    with swapped([(BundleOwnership, "history", 3)]):
        for i, poll in enumerate(cluster_polls(7, 40, 7, "4.0.7")):
            polled = {k: v for k, v in poll.items() if k != "key_samples"}
            topics, bundles = topics_of(polled["subscriptions"], i)
            snapshot = make_snapshot(i * 30.0, **polled, topics=topics, bundles=bundles)
            namespace = bundles[i % len(bundles)].namespace
            extra = [
                EventRecord(
                    snapshot.collected_at,
                    "bundle_removed",
                    f"{namespace}/gone{i}",
                    namespace,
                    before="b9:8080",
                ),
                EventRecord(snapshot.collected_at, "consumer_joined", f"t/s/c{i}", namespace),
            ]
            found = [] if previous is None else diff(previous, snapshot)
            store.write(snapshot, events=[*found, *extra])
            previous = snapshot
            for params in ({}, {"namespace": namespace}):
                stepped = runner.run(
                    plugin, store, params, use_cache=False, use_stored=False, views=False
                )
                with swapped(whole.WHOLE_WINDOW):
                    full = runner.run(
                        plugin, store, params, use_cache=False, use_stored=False, views=False
                    )
                for name, frame in full.result.frames.items():
                    pd.testing.assert_frame_equal(stepped.result.frames[name], frame, obj=name)
                assert stepped.result.summary == full.result.summary
                kept = stepped.result.frames["events"]
                assert not (kept["kind"] == "consumer_joined").any()
                listed = max(listed, int((kept["kind"] == "bundle_removed").sum()))
    assert listed == 3  # one a poll, the window's three
