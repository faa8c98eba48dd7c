"""Steps (`pulsar_lens.plugins.steps`): what each poll says against the poll before it,
computed once, kept beside the stored results and read back by later passes; the contract's
checks at load time and at run time; a third-party plugin's step in its worker."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from pulsar_lens.api import STEPS_API_VERSION, AnalysisPlugin, Field, Inputs, Result, View
from pulsar_lens.core.errors import PluginContractError, PluginLoadError, PluginRunError
from pulsar_lens.core.model import ConsumerRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner, steps
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.testing import make_inputs, make_snapshot
from pulsar_lens.plugins.validation import validate_plugin

# consumers listed in each poll: who joins and leaves between polls
LISTED = (("a", "b"), ("a", "b", "c"), ("b", "c"), ("c",), ("a", "c"), ("a", "b", "c"), ("d",))


class Churn(AnalysisPlugin):
    """Consumers joining and leaving between polls, by steps; `whole` says the same from the
    whole window, as the reference."""

    api_version = STEPS_API_VERSION
    name = "churn"
    title = "Churn"
    description = "Consumers joining and leaving between polls."
    version = "1.0"
    inputs = ("topics",)
    history = 4
    step_inputs = ("consumers",)
    columns_of = {"consumers": ("consumer_name",)}
    step_outputs = ("moves",)
    step_params = ("prefix",)
    outputs = ("moves",)

    class Params(AnalysisPlugin.Params):
        prefix: str = Field("", description="Only consumers whose name starts with this")
        limit: int = Field(100, description="At most this many rows (not a step param)")

    def step(self, data: Inputs, params: Any) -> Result:
        return Result(frames={"moves": moves(data, params.prefix)})

    def analyze(self, data: Inputs, params: Any) -> Result:
        return Result(frames={"moves": data.steps("moves").head(params.limit)})

    def render(self, result: Result, params: Any = None) -> list[View]:
        return []


def moves(data: Inputs, prefix: str) -> pd.DataFrame:
    """Who joined and left at each poll of `data` against the poll before (none at the first)."""
    consumers = data.history("consumers")
    ids = [str(s) for s in data.snapshots["snapshot_id"]]
    rows = []
    for before, now in itertools.pairwise(ids):
        names = {
            sid: set(consumers.loc[consumers["snapshot_id"] == sid, "consumer_name"].astype(str))
            for sid in (before, now)
        }
        for kind, found in (
            ("joined", names[now] - names[before]),
            ("left", names[before] - names[now]),
        ):
            rows += [(now, kind, n) for n in sorted(found) if n.startswith(prefix)]
    return pd.DataFrame(rows, columns=["snapshot_id", "kind", "consumer"]).astype(object)


def snapshots() -> list[Any]:
    return [
        make_snapshot(30.0 * i, consumers=[ConsumerRecord("t", "s", n) for n in listed])
        for i, listed in enumerate(LISTED)
    ]


def whole(store: Store, prefix: str = "") -> pd.DataFrame:
    """The moves of the newest `history` polls, compared all at once."""
    index = store.snapshots().tail(Churn.history).reset_index(drop=True)
    consumers = store.read("consumers", snapshot_ids=list(index["snapshot_id"])).to_pandas()
    found = moves(Inputs({"consumers": consumers}, index), prefix)
    return pa.Table.from_pandas(found).to_pandas()  # as a step frame reads back


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []
    original = Churn.step

    def step(self: Churn, data: Inputs, params: Any) -> Result:
        calls.append(tuple(data.snapshots["snapshot_id"].astype(str)))
        return original(self, data, params)

    monkeypatch.setattr(Churn, "step", step)
    return calls


def run(store: Store, *, keep: bool = True, **params: Any) -> pd.DataFrame:
    output = runner.run(Churn(), store, params, use_cache=False, use_stored=not keep, views=False)
    return output.result.frames["moves"].reset_index(drop=True)


def test_a_pass_computes_the_newest_step_and_reads_the_others_back(
    tmp_path: Path, counted: list[tuple[str, ...]]
) -> None:
    store = Store(tmp_path)
    ids: list[str] = []
    for i, snap in enumerate(snapshots()):
        ids.append(store.write(snap))
        counted.clear()
        found = run(store)
        pd.testing.assert_frame_equal(found, whole(store))
        first = max(0, i + 1 - Churn.history)
        expected = {(ids[first],)} | ({(ids[i - 1], ids[i])} if i else set())
        if i >= Churn.history:  # the window slides: its new first poll alone, and the newest
            assert sorted(counted) == sorted(expected)
        else:  # the window grows: the newest poll's step only
            assert counted == [tuple(ids[max(0, i - 1) : i + 1])]
    kept = steps.step_store(store)
    assert kept is not None and kept.root == tmp_path / steps.STEPS_DIR
    assert all(meta["params"] == {"prefix": ""} for _, meta in kept.entries("churn"))


def test_other_params_than_step_params_read_the_kept_steps(
    tmp_path: Path, counted: list[tuple[str, ...]]
) -> None:
    store = Store(tmp_path)
    for snap in snapshots():
        store.write(snap)
    run(store)
    counted.clear()
    limited = run(store, keep=False, limit=1)
    assert counted == []  # `limit` is not a step param: every step read back
    assert len(limited) == 1
    by_prefix = run(store, keep=False, prefix="a")
    assert len(counted) == Churn.history  # another prefix: every step computed, none kept
    pd.testing.assert_frame_equal(by_prefix, whole(store, "a"))
    kept = steps.step_store(store)
    assert kept is not None
    assert {meta["params"]["prefix"] for _, meta in kept.entries("churn")} == {""}


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The polls of each read of the consumers table, in order."""
    calls: list[list[str]] = []
    original = Store.read

    def counted_read(self: Store, name: str, **window: Any) -> Any:
        if name == "consumers":
            calls.append(list(window["snapshot_ids"]))
        return original(self, name, **window)

    monkeypatch.setattr(Store, "read", counted_read)
    return calls


def test_missing_steps_are_computed_a_few_polls_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: list[list[str]]
) -> None:
    monkeypatch.setattr(Churn, "history", len(LISTED))
    monkeypatch.setattr(steps, "CHUNK", 2)
    store = Store(tmp_path)
    for snap in snapshots():
        store.write(snap)
    found = run(store)
    assert max(len(ids) for ids in read) <= 3  # two steps: at most three polls
    assert len(read) == -(-len(LISTED) // 2)
    pd.testing.assert_frame_equal(found, whole(store))


def test_a_sliding_pass_reads_its_two_new_steps_apart(
    tmp_path: Path, read: list[list[str]]
) -> None:
    """The window's new first poll and its newest pair share no poll: each is read alone,
    so neither step's rows are picked out of the other's."""
    store = Store(tmp_path)
    ids = [store.write(snap) for snap in snapshots()[:-1]]
    run(store)
    ids.append(store.write(snapshots()[-1]))
    read.clear()
    found = run(store)
    first = len(ids) - Churn.history
    assert read == [[ids[first]], ids[-2:]]
    pd.testing.assert_frame_equal(found, whole(store))


def test_run_on_inputs_computes_every_step_from_the_window() -> None:
    inputs = make_inputs(snapshots()[-Churn.history :], ("topics", "consumers"))
    output = runner.run_on_inputs(Churn(), inputs, {}, views=False)
    expected = pa.Table.from_pandas(moves(inputs, "")).to_pandas()
    pd.testing.assert_frame_equal(output.result.frames["moves"], expected)
    with pytest.raises(PluginContractError, match="its steps read consumers"):
        runner.run_on_inputs(Churn(), make_inputs(snapshots(), ("topics",)), {}, views=False)


def test_the_results_pass_keeps_steps_and_prunes_those_no_window_holds(tmp_path: Path) -> None:
    store = Store(tmp_path)
    results = ResultStore(tmp_path)
    for snap in snapshots():
        store.write(snap)
        outcomes = compute_results(store, [Churn()], results=results)
        assert [o.status for o in outcomes] == ["ok"]
    kept = steps.step_store(store)
    assert kept is not None
    live = set(str(s) for s in store.snapshots()["snapshot_id"].tail(Churn.history))
    left = [tuple(meta["snapshot_ids"]) for _, meta in kept.entries("churn")]
    assert left and all(pair[-1] in live for pair in left)
    assert len(left) <= Churn.history + 1  # a step per poll, and the first poll alone


def test_a_step_that_breaks_the_contract_fails_the_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path)
    for snap in snapshots()[:2]:
        store.write(snap)

    def wrong_frames(self: Churn, data: Inputs, params: Any) -> Result:
        return Result(frames={"other": pd.DataFrame()})

    monkeypatch.setattr(Churn, "step", wrong_frames)
    with pytest.raises(PluginContractError, match=r"step must return exactly the declared"):
        run(store)

    def unkeepable(self: Churn, data: Inputs, params: Any) -> Result:
        return Result(frames={"moves": pd.DataFrame({"x": [object()]})})

    monkeypatch.setattr(Churn, "step", unkeepable)
    with pytest.raises(PluginContractError, match=r"step frame 'moves' cannot be kept"):
        run(store)

    def raising(self: Churn, data: Inputs, params: Any) -> Result:
        raise ValueError("no such poll")

    monkeypatch.setattr(Churn, "step", raising)
    with pytest.raises(PluginRunError, match="step raised") as info:
        run(store)
    assert info.value.phase == "step"
    kept = steps.step_store(store)
    assert kept is not None and list(kept.entries("churn")) == []


def _variant(**attrs: Any) -> type:
    return type("Variant", (Churn,), {"columns_of": {}, **attrs})


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({"step_inputs": ()}, "step_inputs: expected a non-empty tuple of table names"),
        ({"step_inputs": ("probes",)}, "step_inputs: expected snapshot tables"),
        ({"step_inputs": ("nope",)}, "step_inputs: expected snapshot tables"),
        ({"step_outputs": ()}, "step_outputs: expected a non-empty tuple of frame names"),
        ({"step": AnalysisPlugin.step}, "step: expected the plugin to define step()"),
        ({"step_params": ("nope",)}, "step_params: 'nope' are not Params fields"),
        ({"step_params": "prefix"}, "step_params: expected a tuple of Params field names"),
        ({"api_version": 1}, "step_inputs: steps came with plugin API 2"),
        ({"engine": "spark"}, "steps are for plugins analysed after each poll"),
        ({"columns_of": {"brokers": ("version",)}}, "'brokers' is not one of the declared"),
    ],
)
def test_the_contract_of_steps_is_checked_at_load_time(
    attrs: dict[str, Any], expected: str
) -> None:
    with pytest.raises(PluginLoadError) as info:
        validate_plugin(_variant(**attrs), "test-source")
    assert expected in str(info.value)


def test_a_plugin_without_steps_is_unchanged() -> None:
    plain = _variant(step_inputs=(), step_outputs=(), step_params=(), step=AnalysisPlugin.step)
    assert validate_plugin(plain, "src").step_inputs == ()
    assert not steps.stepped(plain())


DROP_IN = """
import pandas as pd
from pulsar_lens.api import AnalysisPlugin, Inputs, Result

class Seen(AnalysisPlugin):
    api_version = 2
    name = "seen-consumers"
    title = "Seen"
    description = "Consumers listed per poll, by steps."
    version = "1.0"
    inputs = ("topics",)
    history = 3
    step_inputs = ("consumers",)
    step_outputs = ("listed",)
    outputs = ("listed",)

    def step(self, data: Inputs, params) -> Result:
        newest = data.snapshots["snapshot_id"].iloc[-1]
        mine = data.history("consumers")
        count = int((mine["snapshot_id"] == newest).sum())
        return Result(frames={"listed": pd.DataFrame({"snapshot_id": [newest], "n": [count]})})

    def analyze(self, data: Inputs, params) -> Result:
        return Result(frames={"listed": data.steps("listed")})

    def render(self, result, params=None):
        return []

PLUGINS = (Seen,)
"""


def test_a_third_party_plugins_step_runs_in_its_worker(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "seen.py").write_text(textwrap.dedent(DROP_IN))
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[folder])
    assert registry.failures == []
    loaded = registry.get("seen-consumers")
    assert loaded.isolated
    store = Store(tmp_path / "store")
    for snap in snapshots():
        store.write(snap)
    output = runner.run(loaded, store, None, use_cache=False, use_stored=False, views=False)
    assert output.result.frames["listed"]["n"].tolist() == [len(c) for c in LISTED[-3:]]


def test_a_kept_step_of_other_frames_is_computed_again(
    tmp_path: Path, counted: list[tuple[str, ...]]
) -> None:
    store = Store(tmp_path)
    ids = [store.write(snap) for snap in snapshots()[:2]]
    kept = steps.step_store(store)
    assert kept is not None
    for pair in ((ids[0],), tuple(ids)):
        kept.write(
            StoredResult(
                plugin="churn",
                version=Churn.version,
                params={"prefix": ""},
                snapshot_ids=pair,
                status="ok",
                seconds=0.0,
                result=Result(frames={"other": pd.DataFrame({"x": [1]})}),
            )
        )
    pd.testing.assert_frame_equal(run(store), whole(store))
    assert sorted(counted) == sorted([(ids[0],), tuple(ids)])


def test_a_linked_steps_folder_is_neither_read_nor_written(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for snap in snapshots()[:3]:
        store.write(snap)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "store" / steps.STEPS_DIR).mkdir()
    (tmp_path / "store" / steps.STEPS_DIR / "churn").symlink_to(elsewhere)
    pd.testing.assert_frame_equal(run(store), whole(store))
    assert list(elsewhere.iterdir()) == []
