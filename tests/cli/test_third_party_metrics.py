"""A third-party plugin can do what a built-in does: a drop-in file's metrics() hook puts its
family on a real /metrics scrape, and it gets its own dashboard page; a plugin whose hook
breaks the rules is reported, and the scrape goes on."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.cli.main import build_parser
from pulsar_lens.lab.localpulsar import free_port
from tests.cli.test_metrics_cmd import GatedSource, wait_scrape

BACKLOG_TOP = """
from pulsar_lens.api import (
    AnalysisPlugin, BaseModel, Columns, Field, GaugeMetricFamily, Metric, MetricsContext, Page,
    Result, Section, Table, Tabs, finite,
)

class BacklogTop(AnalysisPlugin):
    name = "backlog-top"
    title = "Largest backlogs"
    description = "Subscriptions with the largest backlog."
    version = "1.0"
    inputs = ("subscriptions",)
    outputs = ("top",)
    page = Page(title="Backlogs", icon=":material/stacks:", order=5, controls=("top_n",))

    class Params(BaseModel):
        top_n: int = Field(5, ge=1, le=50, title="Subscriptions to show")
        note: str = Field("", description="Shown under the table")

    def analyze(self, data, params):
        subs = data.latest("subscriptions")
        top = subs.nlargest(params.top_n, "msg_backlog")[["topic", "subscription", "msg_backlog"]]
        return Result(frames={"top": top.reset_index(drop=True)}, summary={"shown": len(top)})

    def render(self, result):
        top = result.frames["top"]
        largest = Metric("Largest", str(top["msg_backlog"].max()))
        return [
            Section("Largest backlogs", caption="from the newest snapshot"),
            Metric("Shown", result.summary["shown"]),
            Columns(((Table(top, title="Top"),), (largest,))),
            Tabs((("Table", (Table(top),)), ("Again", (Table(top),)))),
        ]

    def metrics(self, result, context: MetricsContext):
        gauge = GaugeMetricFamily(
            "pulsar_lens_backlog_top_messages", "Backlog of the largest subscriptions.",
            labels=["topic", "subscription"],
        )
        for row in result.frames["top"].to_dict("records"):
            if context.keeps(row["topic"], row["subscription"]):
                labels = [row["topic"], row["subscription"]]
                gauge.add_metric(labels, finite(row["msg_backlog"]) or 0)
        return [gauge]

class Rude(BacklogTop):
    name = "rude"
    title = "Rude"
    page = None

    def metrics(self, result, context):
        return [GaugeMetricFamily("up", "takes a name that is not ours")]

PLUGINS = (BacklogTop, Rude)
"""


@pytest.fixture
def drop_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "backlog_top.py").write_text(textwrap.dedent(BACKLOG_TOP))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    return folder


def scrape_two_polls(store: Path, *, needs: tuple[str, ...]) -> str:
    """`collect --max-polls 2 --metrics-port`: the first scrape of its first poll that carries
    all of `needs`; the second poll is let go after it, and the command must have ended."""
    port = free_port()
    source = GatedSource()
    argv = ["collect", "--admin-url", "http://b:8080", "--store", str(store)]
    args = build_parser().parse_args([*argv, "--interval", "1s", "--metrics-port", str(port)])
    args.source_factory = source
    args.max_polls = 2
    worker = threading.Thread(target=args.func, args=(args,), daemon=True)
    worker.start()
    try:
        text = wait_scrape(port, timeout=60, needs=needs)
    finally:
        source.release.set()
        worker.join(timeout=60)
    assert not worker.is_alive(), "collect --max-polls 2 did not end"
    return text


def test_a_drop_in_exports_a_metric_like_a_builtin(drop_ins: Path, tmp_path: Path) -> None:
    # the results pass stores one plugin's result after another, and a scrape meanwhile
    # presents those stored so far: wait for both plugins' facts
    needs = ("pulsar_lens_backlog_top_messages{", 'pulsar_lens_plugin_errors{plugin="rude"} 1.0')
    text = scrape_two_polls(tmp_path / "store", needs=needs)
    assert 'pulsar_lens_backlog_top_messages{subscription="' in text
    assert 'pulsar_lens_plugin_errors{plugin="backlog-top"} 0.0' in text
    assert 'pulsar_lens_plugin_errors{plugin="rude"} 1.0' in text
    assert "\nup " not in text


def _analysis_page() -> None:
    from pulsar_lens.dashboard.app_pages.analysis import draw_analysis

    draw_analysis("backlog-top")


def test_a_drop_in_gets_a_page_like_a_builtin(
    drop_ins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_lens.dashboard.navigation import analysis_url, page_plan
    from pulsar_lens.plugins.precompute import compute_results
    from pulsar_lens.plugins.registry import discover
    from pulsar_lens.plugins.results import ResultStore
    from tests.dashboard.scenario import write_scenario

    registry = discover(plugin_dirs=[drop_ins])
    plan = page_plan(registry)
    cluster = [(spec.target, spec.url_path, spec.title) for spec in plan["Cluster"]]
    # its own page in the Cluster section, ordered before the built-ins' (order 5 < 10)
    assert cluster[:3] == [
        ("overview.py", "overview", "Overview"),
        ("backlog-top", "backlog-top", "Backlogs"),
        ("key-shared-map", "key-shared", "Key_Shared"),
    ]
    assert analysis_url("rude") in {spec.url_path for spec in plan["Analyses"]}
    store = tmp_path / "store"
    monkeypatch.setenv("PULSAR_LENS_STORE", str(store))
    written = write_scenario(store)
    compute_results(written, list(registry), results=ResultStore(store))
    at = AppTest.from_function(_analysis_page, default_timeout=60).run()
    assert not at.exception and not at.error
    assert [t.value for t in at.title] == ["Backlogs"]
    assert [m.label for m in at.metric] == ["Shown", "Largest"]
    assert [s.value for s in at.subheader] == ["Largest backlogs"]
    assert len(at.tabs) == 2 and len(at.columns) >= 2
    assert any("analysed once when the snapshot arrived" in c.value for c in at.caption)
    # its control sits above the views, the other field in the expander, as for a built-in
    at.number_input(key="analysis_backlog-top_top_n").set_value(2).run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Shown"] == "2"
    assert any("computed for these parameters" in c.value for c in at.caption)


COUNTED = """
from pulsar_lens.api import AnalysisPlugin, GaugeMetricFamily, Metric, Result

CALLS = {calls!r}

class Counted(AnalysisPlugin):
    name = "counted"
    title = "Counted"
    description = "Notes each snapshot it analyses."
    version = "1.0"
    inputs = ("subscriptions",)
    outputs = ("seen",)
    page = None

    def analyze(self, data, params):
        seen = data.latest("subscriptions")[["snapshot_id"]].head(1)
        sid = str(seen["snapshot_id"].iloc[0])
        with open(CALLS, "a") as f:
            f.write(sid + "\\n")
        return Result(frames={{"seen": seen}}, summary={{"snapshot": sid}})

    def render(self, result):
        return [Metric("Snapshot", result.summary["snapshot"])]

    def metrics(self, result, context):
        gauge = GaugeMetricFamily("pulsar_lens_counted_runs", "Analysed.")
        gauge.add_metric([], 1)
        return [gauge]

PLUGINS = (Counted,)
"""


def test_the_collect_process_analyses_each_snapshot_once_for_pages_and_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/metrics presents what the results pass stored: it does not analyse the snapshot again
    beside it (it used to, on every poll, from the moment the poll was tallied)."""
    folder, calls = tmp_path / "plugins", tmp_path / "calls.txt"
    folder.mkdir()
    (folder / "counted.py").write_text(textwrap.dedent(COUNTED.format(calls=str(calls))))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    text = scrape_two_polls(tmp_path / "store", needs=("\npulsar_lens_counted_runs 1.0",))
    assert 'pulsar_lens_plugin_errors{plugin="counted"} 0.0' in text
    analysed = calls.read_text().split()
    assert analysed and len(analysed) == len(set(analysed)), analysed
