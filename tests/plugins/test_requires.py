"""One plugin building on another's result: `requires`, `Inputs.result`, and their order."""

from __future__ import annotations

import inspect
import os
import pickle
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import AnalysisPlugin, Inputs, Metric, Result, View
from pulsar_lens.core.errors import PluginLoadError, PluginRunError
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import registry as registry_module
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.precompute import compute_results, requirements_first
from pulsar_lens.plugins.registry import BUILTIN_PLUGINS, Registry, discover, validate_plugin
from pulsar_lens.plugins.results import ResultStore
from pulsar_lens.plugins.testing import MemoryStore
from tests.cli.test_plugins_cmd import stalled_store


class Builds(AnalysisPlugin):
    """A plugin that reads nothing but the results it requires."""

    name = "builds-on"
    title = "Builds on"
    description = "Counts the rows of the frames of the plugins it requires."
    version = "1.0"
    inputs = ()
    outputs = ("rows",)

    def analyze(self, data: Inputs, params: Any) -> Result:
        rows = {
            slug: sum(len(frame) for frame in data.result(slug).frames.values())
            for slug in self.requires
        }
        frame = pd.DataFrame({"plugin": list(rows), "rows": list(rows.values())})
        return Result(frames={"rows": frame})

    def render(self, result: Result) -> list[View]:
        return []


class StatusCounts(Builds):
    """Built-in style: in-process, reads subscription-status."""

    name = "status-counts"
    outputs = ("counts",)
    requires = ("subscription-status",)

    def analyze(self, data: Inputs, params: Any) -> Result:
        status = data.result("subscription-status")
        counts = status.frames["status"].groupby("status").size().rename("n").reset_index()
        return Result(frames={"counts": counts}, summary={"worst": status.summary["worst"]})

    def render(self, result: Result) -> list[View]:
        return [Metric("Worst", str(result.summary["worst"]))]


class AlwaysFails(Builds):
    name = "always-fails"

    def analyze(self, data: Inputs, params: Any) -> Result:
        raise RuntimeError("no luck")


def _variant(slug: str, requires: object = (), **attrs: Any) -> type[AnalysisPlugin]:
    return type(
        slug.title().replace("-", ""), (Builds,), {"name": slug, "requires": requires, **attrs}
    )


NEEDS_FAILING = _variant("needs-failing", ("always-fails",))
NEEDS_MISSING = _variant("needs-missing", ("no-such-plugin", "subscription-status"))
NEEDS_NEEDS_MISSING = _variant("needs-needs-missing", ("needs-missing",))
BAD_ENGINE = _variant("bad-engine", engine="gpu")
NEEDS_BAD_ENGINE = _variant("needs-bad-engine", ("bad-engine",))
CYCLE_A = _variant("cycle-a", ("cycle-b",))
CYCLE_B = _variant("cycle-b", ("cycle-c",))
CYCLE_C = _variant("cycle-c", ("cycle-a",))
NEEDS_CYCLE = _variant("needs-cycle", ("cycle-b",))
NEEDS_ITSELF = _variant("needs-itself", ("needs-itself",))
TWO_LEVELS = _variant("two-levels", ("status-counts", "subscription-status"))


def with_builtins(monkeypatch: pytest.MonkeyPatch, *names: str) -> Registry:
    """The registry with these classes of this module loaded as built-ins (in-process)."""
    extra = tuple(f"{__name__}:{name}" for name in names)
    monkeypatch.setattr(registry_module, "BUILTIN_PLUGINS", (*BUILTIN_PLUGINS, *extra))
    return discover(entry_points=False, plugin_dirs=())


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    runner.clear_cache()
    yield
    runner.clear_cache()


@pytest.fixture
def status_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts subscription-status analyses."""
    calls: list[int] = []
    analyze = SubscriptionStatus.analyze

    def counted(self: SubscriptionStatus, data: Inputs, params: Any) -> Result:
        calls.append(1)
        return analyze(self, data, params)

    monkeypatch.setattr(SubscriptionStatus, "analyze", counted)
    return calls


# ---- load time -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        ("subscription-status", "requires: expected a tuple of plugin slugs"),
        (("Not_A_Slug",), "requires: expected a tuple of plugin slugs"),
        (("a-b", "a-b"), "requires: expected unique plugin slugs"),
        (("needs-itself",), "requires: expected other plugins, found its own slug"),
    ],
)
def test_requires_is_checked_like_the_other_attributes(requires: object, expected: str) -> None:
    with pytest.raises(PluginLoadError, match=expected):
        validate_plugin(_variant("needs-itself", requires=requires), "src")


def test_plugins_whose_requirements_are_missing_failed_or_cyclic_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = with_builtins(
        monkeypatch,
        "NEEDS_NEEDS_MISSING",  # listed before what it requires: order does not matter
        "NEEDS_MISSING",
        "BAD_ENGINE",
        "NEEDS_BAD_ENGINE",
        "CYCLE_A",
        "CYCLE_B",
        "CYCLE_C",
        "NEEDS_CYCLE",
        "NEEDS_ITSELF",
        "StatusCounts",
        "TWO_LEVELS",
    )
    failed = {f.plugin: str(f) for f in registry.failures}
    assert set(failed) == {
        "needs-needs-missing",
        "needs-missing",
        "bad-engine",
        "needs-bad-engine",
        "cycle-a",
        "cycle-b",
        "cycle-c",
        "needs-cycle",
        "needs-itself",
    }
    assert failed["needs-missing"].startswith(
        f"plugin 'needs-missing' from builtin {__name__}:NEEDS_MISSING: requires: expected "
        "loaded plugins, found 'no-such-plugin' (no plugin has this name); loaded plugins: "
    )
    assert "found 'needs-missing' (it failed to load)" in failed["needs-needs-missing"]
    assert "found 'bad-engine' (it failed to load)" in failed["needs-bad-engine"]
    assert (
        "requires: expected no cycle, found cycle-a -> cycle-b -> cycle-c -> cycle-a"
        in (failed["cycle-a"])
    )
    assert "found cycle-b -> cycle-c -> cycle-a -> cycle-b" in failed["cycle-b"]
    assert "found 'cycle-b' (it failed to load)" in failed["needs-cycle"]
    assert "found its own slug 'needs-itself'" in failed["needs-itself"]
    builtins = {registry_module._load_reference(r).name for r in BUILTIN_PLUGINS}
    assert set(registry.plugins) == {*builtins, "status-counts", "two-levels"}
    two = registry.get("two-levels")
    assert [r.name for r in two.requirements] == ["status-counts", "subscription-status"]
    (status,) = two.requirements[0].requirements
    assert status is registry.get("subscription-status") is two.requirements[1]
    assert registry.get("subscription-status").requirements == ()


# ---- run time --------------------------------------------------------------------------


def test_an_in_process_plugin_gets_the_default_result_of_what_it_requires(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status_calls: list[int]
) -> None:
    registry = with_builtins(monkeypatch, "StatusCounts", "TWO_LEVELS")
    store = Store(stalled_store(tmp_path / "store"))
    output = runner.run(registry.get("status-counts"), store)
    assert output.result.summary == {"worst": "STALL"}
    assert output.result.frames["counts"].to_dict("records") == [{"status": "STALL", "n": 1}]
    assert output.views == (Metric("Worst", "STALL"),)
    status = runner.run(registry.get("subscription-status"), store)
    defaults = registry.get("subscription-status").plugin.Params()
    assert status.cached and status.params == defaults
    two = runner.run(registry.get("two-levels"), store).result.frames["rows"]
    assert dict(zip(two["plugin"], two["rows"], strict=True)) == {
        "status-counts": 1,
        "subscription-status": 4,  # one status row, three backlog rows
    }
    assert len(status_calls) == 1  # computed once, then read from the cache


def test_the_results_pass_reads_a_requirement_without_drawing_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status_calls: list[int]
) -> None:
    """With no memory cache (the results pass), a requirement's views are not drawn: only
    its result is needed, and nothing would keep them."""
    drawn: list[int] = []
    render = SubscriptionStatus.render

    def counted(self: SubscriptionStatus, result: Result, params: Any = None) -> list[View]:
        drawn.append(1)
        return render(self, result, params)

    monkeypatch.setattr(SubscriptionStatus, "render", counted)
    registry = with_builtins(monkeypatch, "StatusCounts")
    store = Store(stalled_store(tmp_path / "store"))
    results = ResultStore(store.root)
    outcomes = compute_results(store, list(registry), results=results)
    assert {o.plugin: o.status for o in outcomes}["status-counts"] == "ok"
    assert (len(status_calls), drawn) == (1, [])  # analysed once, stored, read, never drawn
    output = runner.run(registry.get("status-counts"), store, use_stored=False)
    assert output.result.summary == {"worst": "STALL"} and drawn == [1]  # a page's cache


def test_a_drop_in_plugin_reads_the_required_frames_in_its_worker(
    tmp_path: Path, status_calls: list[int]
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "stalled.py").write_text(textwrap.dedent(DROP_IN))
    registry = discover(entry_points=False, plugin_dirs=[folder])
    assert registry.failures == []
    stalled = registry.get("stalled-only")
    assert stalled.isolated
    store = Store(stalled_store(tmp_path / "store"))
    results = ResultStore(store.root)
    outcomes = compute_results(
        store, [stalled, registry.get("subscription-status")], results=results
    )
    assert [(o.plugin, o.status, o.error) for o in outcomes] == [
        ("subscription-status", "ok", None),
        ("stalled-only", "ok", None),
    ]
    runner.clear_cache()
    output = runner.run(stalled, store, use_stored=False)
    assert output.result.frames["stalled"].to_dict("records") == [
        {"topic": "persistent://public/default/orders", "subscription": "billing"}
    ]
    summary = output.result.summary
    assert summary["worker"] != os.getpid()  # analysed in a worker process
    assert summary["worst"] == "STALL"
    assert summary["undeclared"] == (
        "\"plugin 'bundle-ownership' was not declared in requires; declared: subscription-status\""
    )
    assert len(status_calls) == 1  # the requirement was computed once, then read


DROP_IN = """
import os

from pulsar_lens.api import AnalysisPlugin, Metric, Result


class StalledOnly(AnalysisPlugin):
    name = "stalled-only"
    title = "Stalled subscriptions"
    description = "The STALL rows of subscription-status."
    version = "1.0"
    inputs = ()
    outputs = ("stalled",)
    requires = ("subscription-status",)
    api_version = 1

    def analyze(self, data, params):
        status = data.result("subscription-status")
        frame = status.frames["status"]
        stalled = frame[frame["status"] == "STALL"][["topic", "subscription"]]
        try:
            data.result("bundle-ownership")
        except KeyError as exc:
            undeclared = str(exc)
        summary = {"worker": os.getpid(), "worst": status.summary["worst"]}
        summary["undeclared"] = undeclared
        return Result(frames={"stalled": stalled.reset_index(drop=True)}, summary=summary)

    def render(self, result):
        return [Metric("Stalled", len(result.frames["stalled"]))]


PLUGINS = (StalledOnly,)
"""


def test_a_failed_requirement_fails_the_dependant_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    registry = with_builtins(monkeypatch, "AlwaysFails", "NEEDS_FAILING")
    needs = registry.get("needs-failing")
    with pytest.raises(PluginRunError) as info:
        runner.run(needs, MemoryStore(), use_cache=False)
    raised_at = f"{__file__}:{inspect.getsourcelines(AlwaysFails.analyze)[1] + 1}"
    assert str(info.value) == (
        "plugin 'needs-failing' failed: its requirement 'always-fails' failed: plugin "
        f"'always-fails' failed: analyze raised RuntimeError: no luck (at {raised_at})"
    )
    origin = info.value.origin  # the requirement's own failure, with its file and line
    assert origin is not None and (origin.kind, origin.where) == ("RuntimeError", raised_at)
    assert info.value.phase == "analyze"
    store = Store(stalled_store(tmp_path / "store"))
    outcomes = compute_results(
        store, [needs, registry.get("always-fails")], results=ResultStore(store.root)
    )
    assert [(o.plugin, o.status) for o in outcomes] == [
        ("always-fails", "failed"),
        ("needs-failing", "failed"),
    ]
    assert "its requirement 'always-fails' failed" in str(outcomes[1].error)
    assert f"no luck (at {raised_at}) (when this snapshot was analysed at " in str(
        outcomes[1].error
    )


def test_precompute_runs_requirements_first_and_keeps_the_order_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status_calls: list[int]
) -> None:
    registry = with_builtins(monkeypatch, "StatusCounts", "TWO_LEVELS")
    listed = [registry.get(s) for s in ("two-levels", "bundle-ownership", "status-counts")]
    listed.append(registry.get("subscription-status"))
    ordered = [p.name for p in requirements_first(listed)]
    assert ordered == ["bundle-ownership", "subscription-status", "status-counts", "two-levels"]
    plain = [registry.get(s) for s in ("stuck-hashes", "bundle-ownership")]
    assert requirements_first(plain) == plain
    store = Store(stalled_store(tmp_path / "store"))
    results = ResultStore(store.root)
    outcomes = compute_results(store, listed, results=results)
    assert [(o.plugin, o.status) for o in outcomes] == [(name, "ok") for name in ordered]
    assert len(status_calls) == 1  # each dependant read the stored result
    assert runner.run(registry.get("two-levels"), store).stored


def test_a_dependant_outside_the_registry_is_refused_before_running() -> None:
    with pytest.raises(PluginRunError, match=r"it requires subscription-status; run the Loaded"):
        runner.run(StatusCounts(), MemoryStore())
    inputs = runner.load_inputs(StatusCounts(), MemoryStore())  # param_choices still works
    assert inputs.results == {}


def test_inputs_result_names_the_declared_ones_and_pickles() -> None:
    result = Result(frames={"status": pd.DataFrame({"status": ["OK"]})}, summary={"worst": "OK"})
    inputs = Inputs(tables={}, snapshots=pd.DataFrame(), results={"subscription-status": result})
    assert inputs.result("subscription-status") is result
    with pytest.raises(KeyError, match="'stuck-hashes' was not declared in requires; declared: "):
        inputs.result("stuck-hashes")
    back = pickle.loads(pickle.dumps(inputs))
    pd.testing.assert_frame_equal(
        back.result("subscription-status").frames["status"], result.frames["status"]
    )
    assert Inputs(tables={}, snapshots=pd.DataFrame()).results == {}
