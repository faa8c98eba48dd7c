"""`render` receives the params the result was computed with (in-process, from a stored
result and in a third-party plugin's worker); a render written with one argument still runs.
`param_choices` that fails is said, not swallowed."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from pulsar_lens.api import AnalysisPlugin, BaseModel, Field, Inputs, Metric, Result, View
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from tests.plugins.test_results import store_with_polls


class Shown(AnalysisPlugin):
    name = "shown"
    title = "Shown"
    description = "Shows its top_n param."
    version = "1.0"
    inputs = ("topics",)
    outputs = ("topics",)
    seen: ClassVar[list[object]] = []

    class Params(BaseModel):
        top_n: int = Field(3, ge=1, description="rows")

    def analyze(self, data: Inputs, params: Params) -> Result:
        return Result(frames={"topics": data.latest("topics")[["topic"]]})

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        type(self).seen.append(params)
        assert params is not None
        return [Metric("top_n", params.top_n)]


class OneArgument(Shown):
    name = "one-argument"

    def render(self, result: Result) -> list[View]:  # type: ignore[override]
        return [Metric("rows", len(result.frames["topics"]))]


class ChoicesFail(Shown):
    name = "choices-fail"

    def param_choices(self, data: Inputs) -> dict[str, list[str]]:
        raise LookupError("no namespaces table")


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    runner.clear_cache()
    Shown.seen.clear()
    yield
    runner.clear_cache()


def metric_values(output: runner.RunOutput) -> list[object]:
    return [v.value for v in output.views if isinstance(v, Metric)]


def test_render_gets_the_params_and_a_one_argument_render_still_runs(tmp_path: Path) -> None:
    store = store_with_polls(tmp_path)
    output = runner.run(Shown(), store, {"top_n": "7"})
    assert metric_values(output) == [7]
    assert isinstance(Shown.seen[-1], Shown.Params)
    assert metric_values(runner.run(OneArgument(), store, {"top_n": 7})) == [3]  # 3 topics


def test_a_stored_result_is_rendered_with_its_params(tmp_path: Path) -> None:
    store = store_with_polls(tmp_path)
    compute_results(store, [Shown()], results=ResultStore(tmp_path))
    stored = runner.run(Shown(), store)
    assert stored.stored and metric_values(stored) == [3]  # the defaults it was computed with
    assert metric_values(runner.run(Shown(), store, {"top_n": 5})) == [5]


DROP_IN = """
from pulsar_lens.api import AnalysisPlugin, BaseModel, Field, Metric, Result

class Remote(AnalysisPlugin):
    name = "remote"
    title = "Remote"
    description = "Shows its param from a worker."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    class Params(BaseModel):
        label: str = Field("a", description="a label")

    def analyze(self, data, params):
        return Result(frames={"x": data.latest("topics")[["topic"]]})

    def render(self, result, params):
        return [Metric(type(params).__name__, params.label)]

    def param_choices(self, data):
        raise KeyError("namespace")

PLUGINS = (Remote,)
"""


def test_a_third_party_render_gets_its_params_in_its_worker(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "remote.py").write_text(textwrap.dedent(DROP_IN))
    store = store_with_polls(tmp_path / "store")
    loaded = discover(builtins=False, entry_points=False, plugin_dirs=[folder]).get("remote")
    output = runner.run(loaded, store, {"label": "b"})
    assert [(v.label, v.value) for v in output.views if isinstance(v, Metric)] == [("Params", "b")]
    default = runner.run(loaded, store)
    assert default.choices == {}
    why = "param_choices raised KeyError: 'namespace' (at "
    assert (default.choices_error or "").startswith(why), default.choices_error
    line = textwrap.dedent(DROP_IN).splitlines().index('        raise KeyError("namespace")') + 1
    assert (default.choices_error or "").endswith(f"remote.py:{line})")  # the plugin's line


def test_a_failing_param_choices_is_kept_with_the_stored_result(tmp_path: Path) -> None:
    store = store_with_polls(tmp_path)
    computed = runner.run(ChoicesFail(), store, use_cache=False)
    why = computed.choices_error
    assert computed.choices == {} and why is not None
    assert why.startswith("param_choices raised LookupError: no namespaces table (at ")
    plain = runner.run(Shown(), store, use_cache=False)
    assert (plain.choices, plain.choices_error) == ({}, None)  # no hook: nothing failed
    compute_results(store, [ChoicesFail()], results=ResultStore(tmp_path))
    read = runner.run(ChoicesFail(), store, use_cache=False)
    assert read.stored and read.choices_error == why
