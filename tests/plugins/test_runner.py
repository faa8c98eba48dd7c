"""The runner: inputs from the store, params, contract checks, error wrapping, the cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from pulsar_lens.api import AnalysisPlugin, BaseModel, Columns, Field, Inputs, Metric, Result, View
from pulsar_lens.core.errors import PluginContractError, PluginParamsError, PluginRunError
from pulsar_lens.core.model import TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.testing import MemoryStore, make_snapshot


class Counting(AnalysisPlugin):
    name = "topic-count"
    title = "Topic count"
    description = "Counts topics per snapshot."
    version = "1.0"
    inputs = ("topics",)
    history = 2
    outputs = ("counts",)
    calls: ClassVar[list[Inputs]] = []

    class Params(BaseModel):
        top: int = Field(3, ge=1)

    def analyze(self, data: Inputs, params: Params) -> Result:
        type(self).calls.append(data)
        topics = data.history("topics")
        counts = topics.groupby("collected_at").size().rename("topics").reset_index()
        return Result(frames={"counts": counts}, summary={"latest": len(data.latest("topics"))})

    def render(self, result: Result) -> list[View]:
        return [Metric("Topics", int(result.summary["latest"]))]


def topics(n: int) -> tuple[TopicRecord, ...]:
    return tuple(
        TopicRecord(f"persistent://public/default/t{i}", "public", "public/default")
        for i in range(n)
    )


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    runner.clear_cache()
    Counting.calls.clear()
    yield
    runner.clear_cache()


def three_polls() -> MemoryStore:
    return MemoryStore([make_snapshot(i * 10, topics=topics(i + 1)) for i in range(3)])


def test_runner_loads_declared_tables_of_the_last_history_snapshots() -> None:
    store = three_polls()
    output = runner.run(Counting(), store)
    assert store.reads == ["topics"]
    assert output.result.frames["counts"]["topics"].tolist() == [2, 3]
    assert output.result.summary == {"latest": 3}
    assert output.snapshot_ids == tuple(store.snapshots()["snapshot_id"].tail(2))
    assert set(output.timings) == {"load", "analyze", "render"}
    assert isinstance(output.views[0], Metric)


def test_runner_caches_by_params_and_snapshots() -> None:
    store = three_polls()
    first = runner.run(Counting(), store)
    again = runner.run(Counting(), store, {"top": 3})
    other = runner.run(Counting(), store, {"top": 4})
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert len(Counting.calls) == 2
    store.items.append(make_snapshot(40, topics=topics(1)))
    assert runner.run(Counting(), store).cached is False


def test_runner_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "CACHE_MAX_ENTRIES", 2)
    store = three_polls()
    for top in (1, 2, 3):
        runner.run(Counting(), store, {"top": top})
    assert runner.run(Counting(), store, {"top": 1}).cached is False
    assert runner.run(Counting(), store, {"top": 3}).cached is True


def test_runner_rejects_unknown_and_invalid_params() -> None:
    with pytest.raises(PluginParamsError, match="unknown bottom; known: top"):
        runner.run(Counting(), three_polls(), {"bottom": 1})
    with pytest.raises(PluginParamsError, match=r"top: Input should be greater than or equal to 1"):
        runner.run(Counting(), three_polls(), {"top": 0})


def test_runner_coerces_string_params_like_a_form() -> None:
    assert runner.validate_params(Counting(), {"top": "7"}).model_dump() == {"top": 7}


class Broken(Counting):
    name = "broken"
    mode: ClassVar[str] = "raise"

    def analyze(self, data: Inputs, params: Any) -> Result:
        if self.mode == "raise":
            raise ZeroDivisionError("division by zero")
        if self.mode == "outputs":
            return Result(frames={"other": pd.DataFrame()})
        if self.mode == "type":
            return {"counts": pd.DataFrame()}  # type: ignore[return-value]
        return Result(frames={"counts": pd.DataFrame()})

    def render(self, result: Result) -> list[View]:
        if self.mode == "render":
            return ["not a view"]  # type: ignore[list-item]
        return []


@pytest.mark.parametrize(
    ("mode", "error", "text"),
    [
        ("raise", PluginRunError, "analyze raised ZeroDivisionError: division by zero"),
        ("outputs", PluginContractError, "expected ['counts'], found ['other']"),
        ("type", PluginContractError, "must return pulsar_lens.api.Result, found dict"),
        (
            "render",
            PluginContractError,
            "must return Chart, Table, Metric, Note, Section, Columns or Tabs",
        ),
    ],
)
def test_runner_wraps_plugin_failures(
    mode: str, error: type[Exception], text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Broken, "mode", mode)
    with pytest.raises(error) as info:
        runner.run(Broken(), three_polls())
    assert "'broken'" in str(info.value) and text in str(info.value)


def test_runner_empty_store_gives_empty_inputs() -> None:
    output = runner.run(Counting(), MemoryStore())
    assert output.snapshot_ids == () and output.result.frames["counts"].empty


def test_runner_reads_a_real_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for i in range(3):
        store.write(make_snapshot(i * 10, topics=topics(i + 2)))
    output = runner.run(Counting(), store)
    assert output.result.frames["counts"]["topics"].tolist() == [3, 4]
    assert runner.run(BundleOwnership(), store).result.frames["bundles"].empty


class TwoWindows(Counting):
    """topics over the newest poll only, bundles over all three."""

    name = "two-windows"
    inputs = ("topics", "bundles")
    history = 1
    history_of: ClassVar[dict[str, int]] = {"bundles": 3}


def test_runner_reads_each_table_over_its_own_window() -> None:
    store = three_polls()
    output = runner.run(TwoWindows(), store)
    data = TwoWindows.calls[-1]
    ids = list(store.snapshots()["snapshot_id"])
    assert list(data.snapshots["snapshot_id"]) == ids  # the widest window
    assert set(data.history("topics")["snapshot_id"]) == {ids[-1]}
    assert output.result.summary == {"latest": 3}
    assert output.snapshot_ids == tuple(ids)


class Nested(Counting):
    name = "nested"

    def render(self, result: Result) -> list[View]:
        return [Columns(((Metric("ok", 1),), ("not a view",)))]


def test_runner_checks_views_inside_columns_and_tabs() -> None:
    with pytest.raises(PluginContractError, match="found <class 'str'>"):
        runner.run(Nested(), three_polls())
