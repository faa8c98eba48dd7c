"""`history_param`: a plugin whose analysis reads only the newest `window` polls of its tables
(a Params field) is read only those, in the results pass and for a page's other value, and
analyses as when its whole `history` was read."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from pulsar_lens.api import AnalysisPlugin, BaseModel, Field
from pulsar_lens.core.errors import PluginLoadError
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.sharedreads import planned_reads
from pulsar_lens.plugins.testing import make_snapshot
from pulsar_lens.plugins.validation import validate_plugin
from pulsar_lens.plugins.window import polls_read, snapshot_window
from tests.plugins.vectorised_cases import cluster_polls

POLLS = 12


class WholeHistory(SubscriptionStatus):
    """subscription-status reading its 30 polls whatever the window, as before."""

    history_param: ClassVar[str | None] = None


class CountingStore(Store):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.asked: list[tuple[str, int]] = []

    def read(self, name: str, **kw: Any) -> Any:  # type: ignore[override]
        table = super().read(name, **kw)
        self.asked.append((name, len(kw.get("snapshot_ids") or ())))
        return table


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> CountingStore:
    store = CountingStore(Path(tmp_path_factory.mktemp("store")))
    for i, poll in enumerate(cluster_polls(4, 40, POLLS, "4.0.7")):
        polled = {k: v for k, v in poll.items() if k != "key_samples"}
        store.write(make_snapshot(i * 30.0, **polled))
    return store


@pytest.mark.parametrize("window", [None, 2, 7, POLLS, 30])
def test_subscription_status_reads_its_window_and_analyses_as_over_its_history(
    store: CountingStore, window: int | None
) -> None:
    params = {} if window is None else {"window": window}
    store.asked.clear()
    mine = runner.run(SubscriptionStatus(), store, params, use_cache=False, use_stored=False)
    asked = dict(store.asked)
    full = runner.run(WholeHistory(), store, params, use_cache=False, use_stored=False)
    assert asked["subscriptions"] == min(window or 5, POLLS)
    assert asked["consumers"] == 1
    for name, frame in full.result.frames.items():
        pd.testing.assert_frame_equal(mine.result.frames[name], frame, obj=name)
    assert mine.result.summary == full.result.summary
    assert mine.choices == full.choices


def test_the_results_pass_plans_the_default_window(store: CountingStore) -> None:
    plugin = SubscriptionStatus()
    assert polls_read(plugin) == 5 and polls_read(WholeHistory()) == 30
    planned = planned_reads(plugin, store)
    counts = {key[0]: len(key[1] or ()) for key in planned}
    assert counts == {"subscriptions": 5, "consumers": 1}
    assert len(snapshot_window(plugin, store)) == POLLS  # the window keying its results


class Trend(AnalysisPlugin):
    name = "trend"
    title = "Trend"
    description = "A trend over a chosen window."
    version = "1.0"
    inputs = ("subscriptions",)
    history = 10
    history_param: ClassVar[str | None] = "window"
    outputs = ("x",)

    class Params(BaseModel):
        window: int = Field(3, ge=1, le=10)
        label: str = ""

    def analyze(self, data: Any, params: Any) -> Any:
        raise NotImplementedError

    def render(self, result: Any, params: Any = None) -> list[Any]:
        return []


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({"history_param": "nope"}, "history_param: expected the name of a Params field"),
        ({"history_param": 3}, "history_param: expected the name of a Params field"),
        ({"history_param": "label"}, "history_param: Params field 'label' must be an int"),
        ({"engine": "spark"}, "history_param: for plugins analysed after each poll"),
    ],
)
def test_the_contract_of_history_param_is_checked_at_load_time(
    attrs: dict[str, Any], expected: str
) -> None:
    assert validate_plugin(Trend, "src").history_param == "window"
    with pytest.raises(PluginLoadError) as info:
        validate_plugin(type("Variant", (Trend,), attrs), "test-source")
    assert expected in str(info.value)
