"""Stored results: each analysis computed once per snapshot, then read by every consumer."""

from __future__ import annotations

import datetime as dt
import json
import pickle
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs, Metric, Result, View
from pulsar_lens.core.errors import PluginContractError, PluginRunError
from pulsar_lens.core.model import TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import precompute, runner
from pulsar_lens.plugins import results as results_module
from pulsar_lens.plugins.precompute import ResultsWorker, compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore, StoredFrameError, StoredResult, StoredValues
from pulsar_lens.plugins.testing import make_snapshot


class Counting(AnalysisPlugin):
    name = "topic-count"
    title = "Topic count"
    description = "Counts topics."
    version = "1.0"
    inputs = ("topics",)
    outputs = ("counts",)
    calls: ClassVar[int] = 0

    def analyze(self, data: Inputs, params: object) -> Result:
        type(self).calls += 1
        topics = data.latest("topics")
        frame = pd.DataFrame({"namespace": topics["namespace"], "n": np.int64(1)})
        return Result(frames={"counts": frame}, summary={"topics": np.int64(len(topics))})

    def render(self, result: Result) -> list[View]:
        return [Metric("Topics", int(result.summary["topics"]))]


class Failing(Counting):
    name = "always-fails"

    def analyze(self, data: Inputs, params: object) -> Result:
        raise RuntimeError("no luck")


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    runner.clear_cache()
    Counting.calls = 0
    yield
    runner.clear_cache()


def store_with_polls(root: Path, polls: int = 2) -> Store:
    store = Store(root)
    for i in range(polls):
        topics = tuple(
            TopicRecord(f"persistent://public/default/t{j}", "public", "public/default")
            for j in range(i + 2)
        )
        store.write(make_snapshot(i * 10, topics=topics))
    return store


@pytest.mark.parametrize("frame_format", ["parquet", "arrow"])
def test_a_result_round_trips_with_its_summary(tmp_path: Path, frame_format: str) -> None:
    results = ResultStore(tmp_path, frame_format=frame_format)  # type: ignore[arg-type]
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", None]})
    stored = StoredResult(
        "p", "1", {"k": 1}, ("s1",), "ok", 0.5, Result({"f/1": frame}, {"n": np.int64(2)})
    )
    results.write(stored)
    back = results.read("p", "1", {"k": 1}, ("s1",))
    assert back is not None and back.result is not None
    pd.testing.assert_frame_equal(back.result.frames["f/1"], frame)
    assert back.result.summary == {"n": 2}
    assert results.read("p", "1", {"k": 2}, ("s1",)) is None  # other params: another entry
    assert results.read("p", "2", {"k": 1}, ("s1",)) is None  # another version
    assert not [p for p in (tmp_path / "results" / "p").iterdir() if p.name.startswith(".")]
    assert [f.name for f in (tmp_path / "results" / "p").glob("*/f*")] == [f"f%2f1.{frame_format}"]


def test_an_entry_is_read_in_the_format_it_was_written_in(tmp_path: Path) -> None:
    """A store that writes Arrow files reads the Parquet entries written before it did (their
    meta.json names no format), and the other way round."""
    frames = {
        "plain": pd.DataFrame({"a": [1, 2], "b": ["x", None]}),
        "empty": pd.DataFrame(
            {"t": pd.Series([], dtype=object), "n": pd.Series([], dtype="int64")}
        ),
        "kinds": pd.DataFrame({"c": pd.Categorical(["u", "v", "u"]), "f": [0.5, None, 2.0]}),
    }
    older = StoredResult("p", "1", {}, ("s1",), "ok", 0.1, Result(frames, {}))
    entry = ResultStore(tmp_path).write(older)
    meta = json.loads((entry / "meta.json").read_text())
    del meta["format"]
    (entry / "meta.json").write_text(json.dumps(meta))
    newer = StoredResult("p", "1", {}, ("s2",), "ok", 0.1, Result(frames, {}))
    ResultStore(tmp_path, frame_format="arrow").write(newer)
    for frame_format in ("parquet", "arrow"):
        results = ResultStore(tmp_path, frame_format=frame_format)  # type: ignore[arg-type]
        for ids in (("s1",), ("s2",)):
            back = results.read("p", "1", {}, ids)
            assert back is not None and back.result is not None
            for name, frame in frames.items():
                pd.testing.assert_frame_equal(back.result.frames[name], frame)
    # an Arrow file holds the very table written (Parquet reads a dictionary's large_string
    # values back as string)
    tables = ResultStore(tmp_path).read_tables("p", "1", {}, ("s2",))
    assert tables is not None
    assert all(tables[n].equals(pa.Table.from_pandas(frame)) for n, frame in frames.items())


def test_a_result_read_lazily_reads_each_frame_when_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lazy=True` (what /metrics and the results pass ask for) reads a frame's file the first
    time the frame is used, once; the frames equal those read at once, pickle as a plain dict
    (a plugin's worker gets them all), and a frame gone by the time it is used says which."""
    results = ResultStore(tmp_path)
    frames = {
        "small": pd.DataFrame({"a": [1, 2]}),
        "large": pd.DataFrame({"t": [f"t{i}" for i in range(1000)], "n": range(1000)}),
    }
    entry = results.write(StoredResult("p", "1", {}, ("s1",), "ok", 0.1, Result(frames, {})))
    read: list[str] = []
    original = results_module.pq.ParquetFile

    def counted(path: object, *args: object, **kwargs: object) -> object:
        read.append(Path(str(path)).stem)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(results_module.pq, "ParquetFile", counted)
    back = results.read("p", "1", {}, ("s1",), lazy=True)
    assert back is not None and back.result is not None
    assert read == [] and list(back.result.frames) == ["small", "large"]
    pd.testing.assert_frame_equal(back.result.frames["small"], frames["small"])
    pd.testing.assert_frame_equal(back.result.frames["small"], frames["small"])
    assert read == ["small"]  # read once, the large frame not at all
    whole = pickle.loads(pickle.dumps(back.result.frames))
    assert type(whole) is dict and read == ["small", "large"]
    pd.testing.assert_frame_equal(whole["large"], frames["large"])
    again = results.read("p", "1", {}, ("s1",), lazy=True)
    assert again is not None and again.result is not None
    (entry / "large.parquet").unlink()
    with pytest.raises(StoredFrameError, match="'large'"):
        again.result.frames["large"]
    with pytest.raises(KeyError):
        again.result.frames["other"]


def test_a_damaged_entry_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    results = ResultStore(tmp_path)
    entry = results.write(StoredResult("p", "1", {}, ("s1",), "ok", 0.1, Result({}, {})))
    (entry / "meta.json").write_bytes(b"\x00garbage")
    assert results.read("p", "1", {}, ("s1",)) is None


def test_a_long_list_of_choices_is_kept_beside_meta_json_and_read_when_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    results = ResultStore(tmp_path)
    topics = [f"persistent://public/default/t{i}" for i in range(5_000)]
    choices = {"namespace": ["", "public/default"], "topic": ["", *topics]}
    entry = results.write(
        StoredResult("p", "1", {}, ("s1",), "ok", 0.1, Result({}, {}), choices=choices)
    )
    meta_text = (entry / "meta.json").read_text()
    meta = json.loads(meta_text)
    # meta.json (read by every listing, prune and scrape) holds the short list and a count
    assert meta["choices"] == {"namespace": ["", "public/default"], "topic": None}
    assert meta["choice_counts"] == {"topic": 5_001} and len(meta_text) < 2_000

    back = results.read("p", "1", {}, ("s1",))
    assert back is not None and back.choices == choices
    values = results.read("p", "1", {}, ("s1",)).choices["topic"]  # type: ignore[union-attr]
    assert isinstance(values, StoredValues) and len(values) == 5_001
    assert values[1] == topics[0] and values[-2:] == topics[-2:] and topics[77] in values
    assert pickle.loads(pickle.dumps(values)) == ["", *topics]  # a page's cache pickles it

    # pruned between reading meta.json and using the list: no values, said, never a crash
    later = results.read("p", "1", {}, ("s1",)).choices["topic"]  # type: ignore[union-attr]
    shutil.rmtree(entry)
    assert len(later) == 5_001  # the count is meta.json's
    with caplog.at_level("WARNING"):
        assert list(later) == [] and len(later) == 0
    assert "are unreadable" in caplog.text and later.lost and not values.lost


def test_each_snapshot_is_analysed_once_and_every_reader_gets_the_stored_result(
    tmp_path: Path,
) -> None:
    store = store_with_polls(tmp_path)
    results = ResultStore(tmp_path)
    outcomes = compute_results(store, [Counting()], results=results)
    assert [(o.plugin, o.status) for o in outcomes] == [("topic-count", "ok")]
    assert Counting.calls == 1
    again = compute_results(store, [Counting()], results=results)
    assert [o.status for o in again] == ["kept"]
    output = runner.run(Counting(), store)
    runner.clear_cache()
    second = runner.run(Counting(), store)
    assert Counting.calls == 1  # neither reader analysed the cluster again
    assert output.stored and second.stored
    assert output.result.summary == {"topics": 3}
    assert output.views == (Metric("Topics", 3),)
    fresh = runner.run(Counting(), store, use_stored=False, use_cache=False)
    assert Counting.calls == 2 and not fresh.stored
    pd.testing.assert_frame_equal(fresh.result.frames["counts"], output.result.frames["counts"])


def test_the_param_choices_come_with_the_default_result_stored_or_analysed(
    tmp_path: Path,
) -> None:
    store = store_with_polls(tmp_path)
    plugins = list(discover(entry_points=False, plugin_dirs=()))
    bundles = next(p for p in plugins if p.name == "bundle-ownership")
    inputs = runner.load_inputs(bundles, store)
    expected = runner.param_choices(bundles, inputs)
    assert "namespace" in expected
    analysed = runner.run(bundles, store, use_cache=False)  # nothing stored yet
    assert not analysed.stored and analysed.choices == expected
    other = runner.run(bundles, store, {"namespace": "public/default"}, use_cache=False)
    assert other.choices == {}  # they come with the default result only
    compute_results(store, [bundles, Failing()], results=ResultStore(tmp_path))
    stored = runner.run(bundles, store, use_cache=False)
    assert stored.stored and stored.choices == expected


def test_a_failure_is_stored_as_that_plugins_failure_for_that_snapshot(tmp_path: Path) -> None:
    store = store_with_polls(tmp_path)
    outcomes = compute_results(store, [Failing(), Counting()], results=ResultStore(tmp_path))
    assert [(o.plugin, o.status) for o in outcomes] == [
        ("always-fails", "failed"),
        ("topic-count", "ok"),
    ]
    assert "analyze raised RuntimeError: no luck" in str(outcomes[0].error)
    with pytest.raises(PluginRunError, match=r"no luck.*when this snapshot was analysed"):
        runner.run(Failing(), store)


class BadViews(Counting):
    name = "bad-views"
    renders: ClassVar[int] = 0

    def render(self, result: Result) -> list[View]:
        type(self).renders += 1
        return [Metric("Topics", {"not": "a number"})]  # type: ignore[arg-type]


def test_the_pass_stores_results_and_leaves_the_views_to_the_pages(tmp_path: Path) -> None:
    # a built-in's views are not stored, so the pass does not render them; a page does, and
    # says what is wrong with them; a third-party plugin's render runs in the pass too
    # (tests/faults/test_plugin_faults.py: its bad views fail its analysis)
    store = store_with_polls(tmp_path)
    BadViews.renders = 0
    outcomes = compute_results(store, [BadViews()], results=ResultStore(tmp_path))
    assert [(o.plugin, o.status) for o in outcomes] == [("bad-views", "ok")]
    assert BadViews.renders == 0
    bare = runner.run(BadViews(), store, views=False)  # what /metrics asks for
    assert bare.stored and bare.views == () and bare.result.summary == {"topics": 3}
    assert "render" not in bare.timings and BadViews.renders == 0
    with pytest.raises(PluginContractError, match="whose value is a dict"):
        runner.run(BadViews(), store)  # not served drawn from the bare run's cache
    assert BadViews.renders == 1
    analysed = runner.run(BadViews(), store, use_stored=False, use_cache=False, views=False)
    assert not analysed.stored and analysed.views == () and "render" not in analysed.timings
    assert precompute._drawn_here(BadViews()) is False


def test_results_of_snapshots_retention_removed_are_pruned(tmp_path: Path) -> None:
    store = store_with_polls(tmp_path, polls=1)
    results = ResultStore(tmp_path)
    compute_results(store, [Counting()], results=results)
    old = [entry for entry, _ in results.entries()]
    store.write(make_snapshot(600, topics=()))
    store.apply_retention(max_age=dt.timedelta(seconds=300), now=make_snapshot(600).collected_at)
    compute_results(store, [Counting()], results=results)
    kept = [meta["snapshot_ids"] for _, meta in results.entries()]
    assert len(kept) == 1 and not any(entry.exists() for entry in old)


def test_only_the_newest_results_of_a_light_plugin_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(precompute, "KEEP_LIGHT_RESULTS", 3)
    store = Store(tmp_path)
    results = ResultStore(tmp_path)
    for i in range(5):  # one result a poll, as collect stores them
        store.write(make_snapshot(i * 10, topics=()))
        compute_results(store, [Counting()], results=results)
    kept = sorted(meta["snapshot_ids"][-1] for _, meta in results.entries("topic-count"))
    newest = [str(s) for s in store.snapshots()["snapshot_id"]][-3:]
    assert kept == sorted(newest)


def test_every_builtin_is_stored_for_a_snapshot(tmp_path: Path) -> None:
    store = store_with_polls(tmp_path)
    registry = discover(builtins=True, entry_points=False, plugin_dirs=())
    outcomes = compute_results(store, list(registry), results=ResultStore(tmp_path))
    light = [p.name for p in registry if p.engine == "light"]  # Spark ones are jobs
    assert len(light) < len(registry)
    assert {o.plugin: o.status for o in outcomes} == {name: "ok" for name in light}
    metas = [meta for _, meta in ResultStore(tmp_path).entries()]
    assert sorted(m["plugin"] for m in metas) == sorted(light)
    assert all(json.dumps(m) for m in metas)


def test_the_worker_coalesces_submissions_and_drains() -> None:
    calls: list[int] = []
    worker = ResultsWorker(lambda stop: calls.append(1))
    for _ in range(5):
        worker.submit()
    assert worker.drain(timeout=10)
    worker.stop()
    assert 1 <= len(calls) <= 5


def test_a_drain_ends_when_the_worker_is_interrupted() -> None:
    """`collect --max-polls` drains its last analyses under its SIGTERM handler, which can
    only `interrupt()` (no lock in a signal handler): the drain must see that and return."""
    started, release = threading.Event(), threading.Event()

    def compute(stop: Callable[[], bool]) -> None:
        started.set()
        release.wait(120)

    worker = ResultsWorker(compute)
    worker.submit()
    assert started.wait(60)
    worker.submit()  # pending behind the computation under way: never computed once stopping
    outcome: list[bool] = []
    draining = threading.Thread(target=lambda: outcome.append(worker.drain()))
    draining.start()
    worker.interrupt()
    release.set()  # the computation under way ends; the drain waits for it, not for the next
    draining.join(timeout=60)
    assert not draining.is_alive() and outcome == [False]
    worker.stop()


def test_a_stopping_worker_leaves_the_plugins_not_started_yet(tmp_path: Path) -> None:
    """A stopping collect process must not wait for a whole round of analyses."""
    store = store_with_polls(tmp_path)
    asked: list[bool] = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) > 1  # stop is asked for while the first plugin runs

    outcomes = compute_results(
        store, [Counting(), Failing()], results=ResultStore(tmp_path), stop=stop
    )
    assert [o.plugin for o in outcomes] == ["topic-count"]
    assert Counting.calls == 1


class PollArrives(Counting):
    """Writes a new poll into the store while it analyses, as the collector's thread does."""

    name = "poll-arrives"
    store: ClassVar[Store | None] = None

    def analyze(self, data: Inputs, params: object) -> Result:
        assert self.store is not None
        self.store.write(make_snapshot(900, topics=()))
        return super().analyze(data, params)


def test_a_round_analyses_one_snapshot_though_a_poll_arrives_during_it(tmp_path: Path) -> None:
    """At a short interval the next poll lands while a round runs: every plugin of the round
    still analyses the snapshot that was newest when it began, so that one has them all."""
    store = store_with_polls(tmp_path)
    newest = store.latest_snapshot_id()
    PollArrives.store = store
    results = ResultStore(tmp_path)
    try:
        outcomes = compute_results(store, [PollArrives(), Counting()], results=results)
    finally:
        PollArrives.store = None
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert store.latest_snapshot_id() != newest  # the poll did land
    analysed = {meta["plugin"]: meta["snapshot_ids"][-1] for _, meta in results.entries()}
    assert analysed == {"poll-arrives": newest, "topic-count": newest}


def test_an_interrupted_worker_starts_no_further_plugin(tmp_path: Path) -> None:
    """SIGTERM's handler interrupts the analyses under way: the plugins after the running one
    are left out at once, not after the poll loop has wound down."""
    store = store_with_polls(tmp_path)
    outcomes: list[list[str]] = []
    started = threading.Event()
    interrupted = threading.Event()

    class Interrupting(Counting):
        name = "interrupting"

        def analyze(self, data: Inputs, params: object) -> Result:
            started.set()
            interrupted.wait(30)
            return super().analyze(data, params)

    plugins = [Interrupting(), Failing()]
    results = ResultStore(tmp_path)

    def compute(stop: Callable[[], bool]) -> None:
        found = compute_results(store, plugins, results=results, stop=stop)
        outcomes.append([o.plugin for o in found])

    worker = ResultsWorker(compute)
    worker.submit()
    assert started.wait(60)
    worker.interrupt()
    interrupted.set()
    assert worker.drain(timeout=60)
    worker.stop()
    assert outcomes == [["interrupting"]]
