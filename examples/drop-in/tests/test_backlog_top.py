"""Tests of the backlog_top.py drop-in: records in, frames, views and /metrics series out."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_lens.api import Chart, MetricsContext, Table
from pulsar_lens.core.model import SubscriptionRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import discover, validate_plugin
from pulsar_lens.plugins.testing import TOPIC, load_drop_in, make_inputs, make_snapshot

FOLDER = Path(__file__).resolve().parents[1]  # the drop-in folder
backlog_top = load_drop_in(FOLDER / "backlog_top.py")
BacklogTop = backlog_top.BacklogTop


def poll(seconds: float, **backlogs: int) -> object:
    """One poll with a subscription per keyword, `name=backlog`."""
    subs = [SubscriptionRecord(TOPIC, name, msg_backlog=n) for name, n in backlogs.items()]
    return make_snapshot(seconds, subscriptions=subs)


def test_it_passes_the_load_time_checks() -> None:
    assert validate_plugin(BacklogTop, "test").name == "backlog-top"


def test_it_keeps_the_largest_backlogs_of_the_newest_poll() -> None:
    inputs = make_inputs([poll(0, a=90), poll(30, a=5, b=9, c=1)], BacklogTop.inputs)
    output = runner.run_on_inputs(BacklogTop(), inputs, {"top_n": 2})
    assert output.result.frames["top"]["subscription"].tolist() == ["b", "a"]
    chart, table = output.views
    assert isinstance(chart, Chart) and isinstance(table, Table)
    assert table.title == "The 2 largest backlogs"  # render got the params


def test_it_runs_on_a_store_as_the_dashboard_runs_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for snapshot in (poll(0, a=3), poll(30, a=4, b=7)):
        store.write(snapshot)
    loaded = discover(builtins=False, entry_points=False, plugin_dirs=[FOLDER]).get("backlog-top")
    output = runner.run(loaded, store, {"top_n": 1})  # in a worker process, like any drop-in
    assert output.result.summary == {"shown": 1}
    assert output.result.frames["top"]["msg_backlog"].tolist() == [7]


def test_its_metrics_keep_to_the_subscriptions_the_context_keeps() -> None:
    inputs = make_inputs([poll(0, a=5, b=9)], BacklogTop.inputs)
    result = runner.run_on_inputs(BacklogTop(), inputs).result
    context = MetricsContext(subscriptions=((TOPIC, "b"),), max_groups=10)
    (gauge,) = BacklogTop().metrics(result, context)
    assert [(s.labels["subscription"], s.value) for s in gauge.samples] == [("b", 9.0)]


@pytest.mark.parametrize("top_n", [0, 101])
def test_it_refuses_a_top_n_out_of_bounds(top_n: int) -> None:
    inputs = make_inputs([poll(0, a=1)], BacklogTop.inputs)
    with pytest.raises(Exception, match="top_n"):
        runner.run_on_inputs(BacklogTop(), inputs, {"top_n": top_n})
