"""A long results pass goes on two cores (`plugins.splitpass`): the light plugins in two
helper processes, with the results a pass in one process stores."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from benchmarks.synth_store import generate
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.cpus import usable_cpus
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import splitpass
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.precompute import compute_results, requirements_first, run_pass
from pulsar_lens.plugins.registry import LoadedPlugin, discover, instance_of
from pulsar_lens.plugins.results import ResultStore
from pulsar_lens.plugins.splitpass import Splitter, parts, staying
from tests.plugins.same_results import assert_same_results
from tests.plugins.split_plugins import AlsoWhere, Follower, WhereAmI


def _names(plugins) -> list[str]:
    return [instance_of(p).name for p in plugins]


def _plugin(name: str, requires: tuple[str, ...] = (), isolated: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name=name, requires=requires, isolated=isolated)


def test_plugins_that_build_on_one_another_share_a_part_and_the_parts_are_balanced() -> None:
    plugins = [
        _plugin("owner"),
        _plugin("latency", ("owner",)),
        _plugin("timeline", ("owner", "latency")),
        _plugin("map"),
        _plugin("status"),
        _plugin("failover"),
    ]
    seconds = {"owner": 0.9, "latency": 0.1, "timeline": 1.0, "map": 1.0, "status": 0.5}
    here, there = parts(plugins, seconds)  # failover untimed: the mean, 0.7
    assert {"owner", "latency", "timeline"} <= set(_names(here)) or {
        "owner",
        "latency",
        "timeline",
    } <= set(_names(there))
    assert sorted(_names(here) + _names(there)) == sorted(_names(plugins))
    load = {**seconds, "failover": 0.7}
    difference = abs(sum(load[n] for n in _names(here)) - sum(load[n] for n in _names(there)))
    assert difference <= 0.3 + 1e-9
    for part in (here, there):  # each part in the pass's order
        assert _names(part) == [n for n in _names(plugins) if n in _names(part)]


def test_a_third_party_plugin_and_what_it_builds_on_stay_here() -> None:
    plugins = [_plugin("base"), _plugin("theirs", ("base",), isolated=True), _plugin("other")]
    here, there = parts(plugins, {"base": 5.0, "theirs": 5.0, "other": 1.0})
    assert (_names(here), _names(there)) == (["base", "theirs"], ["other"])
    assert _names(staying(plugins)) == ["base", "theirs"]  # no helper takes them
    assert staying([_plugin("a"), _plugin("b", ("a",))]) == []


def test_a_single_group_is_not_split() -> None:
    plugins = [_plugin("a"), _plugin("b", ("a",))]
    here, there = parts(plugins, {})
    assert (_names(here), there) == (["a", "b"], [])


def test_the_process_may_use_at_least_one_cpu() -> None:
    assert usable_cpus() > 0


def _store(tmp_path: Path) -> Store:
    generate(tmp_path, topics=40, days=2 * 30 / 86400)
    return Store(tmp_path)


def _pids(results: ResultStore, plugin: str) -> set[int]:
    return {
        int(stored.result.frames["pid"]["pid"].iloc[0])
        for entry, _ in results.entries(plugin)
        if (stored := results.newest(plugin, "1", {})) is not None and stored.result is not None
    }


def test_a_split_pass_runs_its_two_parts_in_two_helper_processes(tmp_path: Path) -> None:
    store = _store(tmp_path)
    results = ResultStore(store.root)
    where = LoadedPlugin(WhereAmI(), "test", "1")
    follower = LoadedPlugin(Follower(), "test", "1", requirements=(where,))
    plugins = [where, follower, LoadedPlugin(AlsoWhere(), "test", "1")]
    splitter = Splitter(min_seconds=0.0, cpus=2)
    view = ClusterView(store, None).pinned()
    outcomes = run_pass(view, plugins, results, splitter=splitter)
    assert [(o.plugin, o.status) for o in outcomes] == [
        ("where-am-i", "ok"),
        ("follower", "ok"),
        ("also-where", "ok"),
    ]
    (first,) = _pids(results, "where-am-i")
    assert _pids(results, "follower") == {first}  # built on it: the same process
    (second,) = _pids(results, "also-where")
    assert len({first, second, os.getpid()}) == 3  # the collect process analyses none
    assert set(splitter.seconds) == {"where-am-i", "follower", "also-where"}


def test_a_helper_allocates_from_the_collect_processs_arrow_pool_not_the_forkservers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the helpers fork from the plugins' forkserver, whose pool is the system allocator
    # (`plugins.isolation`); a pass's reads are a third slower there at 1,000,000 topics
    ours = "jemalloc" if hasattr(pa, "jemalloc_memory_pool") else "mimalloc"
    monkeypatch.setattr(splitpass, "arrow_pool", lambda: ours)
    store = _store(tmp_path)
    results = ResultStore(store.root)
    plugins = [LoadedPlugin(WhereAmI(), "test", "1"), LoadedPlugin(AlsoWhere(), "test", "1")]
    view = ClusterView(store, None).pinned()
    outcomes = run_pass(view, plugins, results, splitter=Splitter(min_seconds=0.0, cpus=2))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    for name in ("where-am-i", "also-where"):
        stored = results.newest(name, "1", {})
        assert stored is not None and stored.result is not None
        frame = stored.result.frames["pid"]
        assert int(frame["pid"].iloc[0]) != os.getpid()  # a helper analysed it
        assert frame["arrow_pool"].iloc[0] == ours


def test_no_split_below_two_cpus_or_for_a_short_previous_pass(tmp_path: Path) -> None:
    store = _store(tmp_path)
    view = ClusterView(store, None).pinned()
    plugins = [WhereAmI(), AlsoWhere()]
    assert not Splitter(min_seconds=0.0, cpus=1).wanted(view, plugins)
    short = Splitter(min_seconds=60.0, cpus=2)
    short.remember([SimpleNamespace(plugin="where-am-i", status="ok", seconds=0.5)])
    assert not short.wanted(view, plugins)
    run_pass(view, plugins, ResultStore(store.root), splitter=short)  # remembered, not split
    assert short.last_pass_seconds is not None and short.last_pass_seconds < 60.0
    assert _pids(ResultStore(store.root), "also-where") == {os.getpid()}


def test_a_first_pass_is_split_though_no_pass_was_timed(tmp_path: Path) -> None:
    """How long a first pass on a new store takes is not known: it goes to the helpers (at
    a million topics it would raise the collect process's peak by more than a GiB)."""
    store = _store(tmp_path)
    view = ClusterView(store, None).pinned()
    plugins = [WhereAmI(), AlsoWhere()]
    splitter = Splitter(min_seconds=60.0, cpus=2)
    assert splitter.last_pass_seconds is None and splitter.wanted(view, plugins)
    run_pass(view, plugins, ResultStore(store.root), splitter=splitter)
    assert os.getpid() not in _pids(ResultStore(store.root), "also-where")
    assert not splitter.wanted(view, plugins)  # now timed: shorter than a minute


def test_when_the_helper_dies_its_plugins_are_analysed_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    results = ResultStore(store.root)
    home = os.getpid()
    plugins = [WhereAmI(home), AlsoWhere(home)]  # either exits any process but this one
    view = ClusterView(store, None).pinned()
    with caplog.at_level(logging.WARNING, logger="pulsar_lens.plugins.splitpass"):
        outcomes = run_pass(view, plugins, results, splitter=Splitter(min_seconds=0.0, cpus=2))
    assert [(o.plugin, o.status) for o in outcomes] == [("where-am-i", "ok"), ("also-where", "ok")]
    assert _pids(results, "where-am-i") == _pids(results, "also-where") == {home}
    assert "exit code 3" in caplog.text and "analysing" in caplog.text


def test_every_built_in_stores_the_same_result_split_as_in_one_process(tmp_path: Path) -> None:
    generate(tmp_path / "split", topics=200, days=4 * 30 / 86400)
    shutil.copytree(tmp_path / "split", tmp_path / "one")
    plugins = list(discover(entry_points=False))
    split, one = Store(tmp_path / "split"), Store(tmp_path / "one")
    splitter = Splitter(min_seconds=0.0, cpus=2)
    outcomes = compute_results(split, plugins, results=ResultStore(split.root), splitter=splitter)
    compute_results(one, plugins, results=ResultStore(one.root))
    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]
    assert [o.plugin for o in outcomes] == _names(light)
    assert_same_results(light, split.root, one.root, one)


def test_the_helper_is_on_unless_the_settings_turn_it_off() -> None:
    from pulsar_lens.core.settings import Settings

    assert Settings.from_env({}).analyses_helper
    assert not Settings.from_env({"PULSAR_LENS_ANALYSES_HELPER": "0"}).analyses_helper


def test_a_new_splitter_learns_from_the_stored_results_of_an_earlier_process(
    tmp_path: Path,
) -> None:
    """A collect process started again on a store splits its first pass already."""
    store = _store(tmp_path)
    results = ResultStore(store.root)
    plugins = [WhereAmI(), AlsoWhere()]
    view = ClusterView(store, None).pinned()
    first = run_pass(view, plugins, results, splitter=Splitter(min_seconds=60.0, cpus=2))
    again = Splitter(min_seconds=1e-6, cpus=2)
    assert again.last_pass_seconds is None  # nothing timed yet
    again.seed(results, plugins)
    assert again.seconds == pytest.approx({o.plugin: o.seconds for o in first})
    assert again.last_pass_seconds == pytest.approx(sum(o.seconds for o in first))
    assert again.wanted(view, plugins)


def test_a_helper_that_cannot_start_leaves_the_pass_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop signal sent to the whole process group ends the forkserver too: starting a
    helper then reads an unexpected EOF from it. The pass goes on here."""
    from pulsar_lens.plugins import isolation

    def gone(process: object) -> None:
        raise EOFError("unexpected EOF")

    monkeypatch.setattr(isolation, "start_process", gone)
    store = _store(tmp_path)
    results = ResultStore(store.root)
    plugins = [WhereAmI(), AlsoWhere()]
    view = ClusterView(store, None).pinned()
    with caplog.at_level(logging.WARNING, logger="pulsar_lens.plugins.splitpass"):
        outcomes = run_pass(view, plugins, results, splitter=Splitter(min_seconds=0.0, cpus=2))
    assert [(o.plugin, o.status) for o in outcomes] == [("where-am-i", "ok"), ("also-where", "ok")]
    assert _pids(results, "also-where") == {os.getpid()}
    assert "could not start" in caplog.text


def test_a_pass_asked_to_stop_starts_no_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_lens.plugins import isolation

    def never(process: object) -> None:
        raise AssertionError("a helper was started for a pass that is stopping")

    monkeypatch.setattr(isolation, "start_process", never)
    store = _store(tmp_path)
    view = ClusterView(store, None).pinned()
    outcomes = run_pass(
        view,
        [WhereAmI(), AlsoWhere()],
        ResultStore(store.root),
        stop=lambda: True,
        splitter=Splitter(min_seconds=0.0, cpus=2),
    )
    assert outcomes == []
