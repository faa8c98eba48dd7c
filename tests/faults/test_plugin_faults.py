"""Drop-in plugins that raise, hang, eat memory, return the wrong shape, or whose metrics()
hook raises, hangs or exports a foreign name, beside the built-ins on one store, as the
collect process and the dashboard meet them: each is reported on its own page (a message
naming it and the kind of failure; for what it raised, the author's traceback in a
"Traceback" expander and no other) and in a real scrape of /metrics
(`pulsar_lens_plugin_errors{plugin}`), while every other page keeps its data.

tests/plugins/test_isolation.py covers the worker limits in collect and analyze; this adds
the pages, the scrape, the hook, and what a hang and a hog cost. The figures go to
artifacts/plugin-faults.json.
"""

from __future__ import annotations

import json
import resource
import shutil
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.errors import PluginRunError
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.store import Store
from pulsar_lens.exporter.collector import LensCollector
from pulsar_lens.exporter.facts import read_hook_errors
from pulsar_lens.exporter.server import start_metrics_server
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.precompute import Outcome, compute_results
from pulsar_lens.plugins.registry import Registry, discover
from pulsar_lens.plugins.results import ResultStore
from tests.dashboard.scenario import write_scenario
from tests.lens_cli import run_lens
from tests.markdown import shown
from tests.pages import PAGE_SLUGS, plugin_page

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
FIGURES = ROOT / "artifacts" / "plugin-faults.json"
TIMEOUT_S = 6
MEMORY_MIB = 256
PAGE_TIMEOUT = 60.0

TEMPLATE = """
import os, time
import altair as alt
from pydantic import field_validator
from pulsar_lens.api import AnalysisPlugin, BaseModel, Chart, Field, GaugeMetricFamily, Metric
from pulsar_lens.api import Result, Table

MARKS = {marks!r}


def mark(what):
    with open(os.path.join(MARKS, "{slug}." + what), "a") as out:
        out.write(f"{{os.getpid()}}\\n")


class Faulty(AnalysisPlugin):
    name = "{slug}"
    title = "Faulty {slug}"
    description = "A drop-in that misbehaves: {slug}."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    class Params(BaseModel):
        rows: int = Field(10, ge=1, le=100, description="Rows shown")
{params}

    def analyze(self, data, params):
        mark("analyze")
{analyze}
        return Result(frames={{"x": data.latest("topics")[["topic"]].head(params.rows)}})

    def render(self, result):
{render}
{hook}

PLUGINS = (Faulty,)
"""

HOG = """
        chunks = []
        try:
            while True:
                chunks.append(bytearray(16 << 20))
        except MemoryError:
            with open("/proc/self/status") as status:
                peak = [line.split()[1] for line in status if line.startswith("VmHWM:")]
            with open(os.path.join(MARKS, "hogs.peak"), "w") as out:
                out.write(f"{len(chunks) * 16} {int(peak[0]) // 1024}")
            raise
"""


def hook(body: str) -> str:
    return f"\n    def metrics(self, result, context):\n        mark('metrics')\n{body}"


VIEWS = '        return [Metric("topics", len(result.frames["x"])), Table(result.frames["x"])]'
BAD_SPEC = (  # the right type, but a spec Altair refuses when the page draws it
    "        return [Chart(alt.Chart(result.frames['x']).mark_bar()"
    ".encode(x=alt.X('topic:N', bin='sideways')))]"
)
VALIDATOR = """
        @field_validator("rows")
        @classmethod
        def odd(cls, rows):
            if rows == 13:
                raise LookupError("13 is unlucky")
            return rows
"""
FAULTS: dict[str, dict[str, str]] = {  # slug: its analyze body, render body, metrics hook
    "raises": {"analyze": "        raise RuntimeError('the cluster looks odd today')"},
    "hangs": {"analyze": "        time.sleep(3600)"},
    "hogs": {"analyze": HOG},
    "wrong-shape": {"analyze": "        return Result(frames={'y': data.latest('topics')})"},
    "bad-views": {"render": "        return [Metric('topics', {'not': 'a number'})]"},
    "bad-spec": {"render": BAD_SPEC},
    "hook-raises": {"hook": hook("        raise ValueError('no series today')")},
    "hook-hangs": {"hook": hook("        time.sleep(3600)")},
    "hook-lies": {
        "hook": hook(
            "        return [GaugeMetricFamily('node_cpu_seconds', 'not ours', value=1.0)]"
        )
    },
}
HEALTHY = {
    "params": VALIDATOR,  # healthy, unless asked for 13 rows
    "render": f"        print('healthy says hello')\n{VIEWS}",  # on stdout
    "hook": hook(
        "        gauge = GaugeMetricFamily('pulsar_lens_healthy_topics', 'topics seen')\n"
        "        gauge.add_metric([], len(result.frames['x']))\n"
        "        return [gauge]"
    ),
}

ON_PAGE = {  # what the plugin's page says, after "plugin '<slug>' failed: " or the hook's
    "raises": "analyze raised RuntimeError: the cluster looks odd today",
    "hangs": f"analyze timed out after {TIMEOUT_S} s; it was stopped",
    "hogs": f"analyze exceeded its memory limit of {MEMORY_MIB} MiB",
    "wrong-shape": "analyze must return exactly the declared outputs; expected ['x'], found ['y']",
    "bad-views": "render returned a Metric 'topics' whose value is a dict",
    "bad-spec": "a view it rendered could not be drawn: SchemaValidationError",
    "hook-raises": "metrics raised ValueError: no series today",
    "hook-hangs": f"metrics timed out after {TIMEOUT_S} s; it was stopped",
    "hook-lies": "metric 'node_cpu_seconds' must be named pulsar_lens_*",
}
HOOKS = ("hook-raises", "hook-hangs", "hook-lies")
FAILED_ANALYSES = ("raises", "hangs", "hogs", "wrong-shape", "bad-views")
DRAWN_ONLY = ("bad-spec",)  # its result is fine: only the page cannot draw it


@dataclass
class World:
    root: Path
    plugins: Path
    marks: Path
    registry: Registry
    outcomes: dict[str, Outcome]
    scrape: str
    env: dict[str, str]
    figures: dict[str, Any] = field(default_factory=dict)


def _write_plugins(folder: Path, marks: Path) -> None:
    for slug, parts in {**FAULTS, "healthy": HEALTHY}.items():
        source = TEMPLATE.format(
            slug=slug,
            marks=str(marks),
            analyze=parts.get("analyze", ""),
            render=parts.get("render", VIEWS),
            hook=parts.get("hook", ""),
            params=parts.get("params", ""),
        )
        (folder / f"{slug.replace('-', '_')}.py").write_text(textwrap.dedent(source))


def _scrape(url: str) -> tuple[str, float]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=60) as answer:
        text = answer.read().decode()
    return text, time.monotonic() - started


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("faults")
    root, folder, marks = base / "store", base / "plugins", base / "marks"
    folder.mkdir()
    marks.mkdir()
    _write_plugins(folder, marks)
    settings = {
        "PULSAR_LENS_STORE": str(root),
        "PULSAR_LENS_POLL_INTERVAL": "10m",
        "PULSAR_LENS_PLUGIN_DIRS": str(folder),
        "PULSAR_LENS_PLUGIN_TIMEOUT": f"{TIMEOUT_S}s",
        "PULSAR_LENS_PLUGIN_MEMORY": str(MEMORY_MIB),
    }
    with pytest.MonkeyPatch.context() as env:
        for name, value in settings.items():
            env.setenv(name, value)
        store = write_scenario(root)
        loaded = Settings.from_env()
        limits = loaded.plugin_limits
        registry = discover(plugin_dirs=loaded.plugin_dirs, limits=limits)
        figures: dict[str, Any] = {"timeout_s": TIMEOUT_S, "memory_mib": MEMORY_MIB}
        started = time.monotonic()
        outcomes = compute_results(store, list(registry), results=ResultStore(root))
        figures["cycle_with_faults_s"] = round(time.monotonic() - started, 3)
        figures["outcome_seconds"] = {o.plugin: round(o.seconds, 3) for o in outcomes}
        # the plugins discover() finds, as collect does
        collector = LensCollector(Store(root), plugin_dirs=loaded.plugin_dirs, plugin_limits=limits)
        server = start_metrics_server(collector, address="127.0.0.1", port=0)
        try:
            text, figures["first_scrape_s"] = _scrape(server.url)
            _, figures["second_scrape_s"] = _scrape(server.url)
        finally:
            server.close()
        by_slug = {o.plugin: o for o in outcomes}
        world = World(root, folder, marks, registry, by_slug, text, settings)
        world.figures = figures
        yield world
    FIGURES.parent.mkdir(exist_ok=True)
    FIGURES.write_text(json.dumps(world.figures, indent=2, sort_keys=True) + "\n")


@pytest.fixture(autouse=True)
def faulty(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """The world's settings in every test (the suite clears PULSAR_* before each)."""
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    return world


def _series(text: str, name: str) -> dict[str, float]:
    """The samples of family `name`, by their `plugin` label (or '' without one)."""
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return {s.labels.get("plugin", ""): s.value for s in family.samples}
    return {}


def _tracebacks(at: AppTest) -> list[str]:
    """The code in the page's "Traceback" expanders: what a plugin raised, for its author."""
    return [str(c.value) for x in at.expander if x.label == "Traceback" for c in x.code]


def _shown(at: AppTest) -> str:
    """Every text the page shows but the plugin's own traceback, to look for a traceback in
    any of it."""
    parts = []
    for kind in ("error", "warning", "info", "markdown", "caption", "text", "code", "exception"):
        parts.extend(str(getattr(e, "value", "")) for e in getattr(at, kind))
    for traceback in _tracebacks(at):
        parts.remove(traceback)
    return "\n".join(parts)


def _authors_traceback(at: AppTest, slug: str) -> None:
    """One "Traceback" expander, holding the drop-in's frames only."""
    (traceback,) = _tracebacks(at)
    assert traceback.startswith("Traceback (most recent call last):"), traceback
    frames = [line for line in traceback.splitlines() if line.lstrip().startswith("File ")]
    assert frames and all(f"/plugins/{slug}.py" in f for f in frames), traceback


def test_a_collect_cycle_stores_each_fault_and_every_other_result(world: World) -> None:
    outcomes = world.outcomes
    for slug in FAILED_ANALYSES:
        assert outcomes[slug].status == "failed", outcomes[slug]
        assert ON_PAGE[slug] in str(outcomes[slug].error)
    others = [o for slug, o in outcomes.items() if slug not in FAILED_ANALYSES]
    assert others and all(o.status == "ok" for o in others), others
    light = {p.name for p in world.registry if p.engine != "spark"}  # Spark: the job worker's
    assert light == set(outcomes)
    # the hang costs the cycle its time limit, not more: the worker is stopped
    assert TIMEOUT_S <= outcomes["hangs"].seconds < TIMEOUT_S + 15
    assert (world.marks / "hangs.analyze").read_text().count("\n") == 1


def test_the_hog_is_stopped_at_its_memory_limit_and_the_parent_does_not_grow(
    world: World,
) -> None:
    store = Store(world.root)
    hogs = world.registry.get("hogs")
    runner.run(world.registry.get("healthy"), store, use_cache=False, use_stored=False)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    started = time.monotonic()
    with pytest.raises(PluginRunError, match=f"memory limit of {MEMORY_MIB} MiB"):
        runner.run(hogs, store, use_cache=False, use_stored=False)
    took = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    grown, peak = map(int, (world.marks / "hogs.peak").read_text().split())
    world.figures["hog"] = {
        "allocated_before_refused_mib": grown,
        "worker_peak_rss_mib": peak,
        "parent_peak_rss_before_mib": before,
        "parent_peak_rss_after_mib": after,
        "seconds": round(took, 3),
    }
    # the worker got its allowance (on top of what it starts with) and no more
    assert MEMORY_MIB - 32 <= grown <= MEMORY_MIB, grown
    assert after - before < 64, (before, after)  # the parent never held the hog's memory


@pytest.mark.parametrize("slug", sorted(FAULTS))
def test_each_fault_is_told_on_its_own_page_without_a_traceback(world: World, slug: str) -> None:
    at = plugin_page(slug, timeout=PAGE_TIMEOUT)
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == [f"Faulty {slug}"]
    said = [shown(m.value) for m in (*at.error, *at.warning)]
    assert any(slug in m and ON_PAGE[slug] in m for m in said), said
    assert "Traceback" not in _shown(at)
    if slug == "raises":
        _authors_traceback(at, slug)
    else:  # stopped, or a broken contract: nothing of the plugin's raised
        assert not _tracebacks(at)
    if slug in HOOKS:  # the analysis itself is fine: its views are there
        assert any(m.label == "topics" for m in at.metric)
        assert any("/metrics" in w.value for w in at.warning)


def test_every_other_page_keeps_its_data_in_the_same_run(world: World) -> None:
    slow: dict[str, float] = {}
    for slug in (*PAGE_SLUGS, "healthy"):
        started = time.monotonic()
        at = plugin_page(slug, timeout=PAGE_TIMEOUT)
        slow[slug] = round(time.monotonic() - started, 3)
        assert not at.exception and not at.error, (slug, [e.value for e in at.error])
        assert not [w.value for w in at.warning if "/metrics" in w.value], slug
        spark = world.registry.get(slug).engine == "spark"
        if spark:  # no Spark job ran: the page says so and offers Run now
            assert any("no result yet" in i.value for i in at.info), slug
        else:
            assert any("analysed once when the snapshot arrived" in c.value for c in at.caption)
    world.figures["page_seconds"] = slow
    overview = AppTest.from_file(str(APP), default_timeout=PAGE_TIMEOUT).run()
    assert not overview.exception and not overview.error
    assert [t.value for t in overview.title] == ["Overview"]
    assert {m.label: m.value for m in overview.metric}["Brokers"] == "2"
    overview.switch_page("app_pages/plugins.py").run()
    assert not overview.exception
    listed = set(overview.dataframe[0].value["name"])
    assert set(FAULTS) | {"healthy"} | set(PAGE_SLUGS) <= listed


def test_metrics_names_each_faulty_plugin_and_serves_the_others(world: World) -> None:
    errors = _series(world.scrape, "pulsar_lens_plugin_errors")
    failing = (*FAILED_ANALYSES, *HOOKS)
    assert {slug: errors.get(slug) for slug in failing} == dict.fromkeys(failing, 1.0)
    healthy = {slug: v for slug, v in errors.items() if slug not in failing}
    assert set(DRAWN_ONLY) <= set(healthy)  # its analysis and render are fine
    assert healthy and set(healthy.values()) == {0.0}, errors
    assert {"healthy", "subscription-status", "key-shared-map", "sticky-ranges"} <= set(healthy)
    assert _series(world.scrape, "pulsar_lens_healthy_topics") == {"": 6.0}
    assert _series(world.scrape, "pulsar_lens_subscription_status")  # the built-ins' series
    assert "node_cpu_seconds" not in world.scrape
    hooks = read_hook_errors(world.root)["failed"]
    assert {slug: ON_PAGE[slug] in hooks.get(slug, "") for slug in HOOKS} == dict.fromkeys(
        HOOKS, True
    )
    # the hanging hook cost the first scrape its limit once; the next one reads the cache
    assert TIMEOUT_S <= world.figures["first_scrape_s"] < TIMEOUT_S + 30
    assert world.figures["second_scrape_s"] < TIMEOUT_S


def test_a_hang_costs_a_page_its_limit_once_when_nothing_is_stored(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without collect (no stored results) the page analyses on demand: the form's choices
    and the views both ask for the default run, and every rerun asks again; the failure is
    remembered for that snapshot, so the hang is waited for once."""
    bare = tmp_path / "store"
    shutil.copytree(world.root, bare, ignore=shutil.ignore_patterns("results"))
    monkeypatch.setenv("PULSAR_LENS_STORE", str(bare))
    runner.clear_cache()  # results are kept by snapshot ids, which the copy shares
    starts = world.marks / "hangs.analyze"
    before = starts.read_text().count("\n")
    started = time.monotonic()
    at = plugin_page("hangs", timeout=PAGE_TIMEOUT)
    first = time.monotonic() - started
    started = time.monotonic()
    at.number_input(key="analysis_hangs_rows").set_value(10).run()
    at.run()
    again = time.monotonic() - started
    world.figures["on_demand_hang_page"] = {"first_s": round(first, 3), "rerun_s": round(again, 3)}
    assert not at.exception
    assert any(ON_PAGE["hangs"] in shown(e.value) for e in at.error)
    assert starts.read_text().count("\n") - before == 1  # one worker hung, once


def test_a_params_validator_that_crashes_is_told_on_the_page(world: World) -> None:
    at = plugin_page("healthy", timeout=PAGE_TIMEOUT)
    assert not at.error
    at.number_input(key="analysis_healthy_rows").set_value(13).run()
    assert not at.exception
    said = [shown(e.value) for e in at.error]
    assert any("plugin 'healthy'" in e and "raised LookupError: 13 is unlucky" in e for e in said)
    assert "Traceback" not in _shown(at)
    _authors_traceback(at, "healthy")


def test_analyze_json_stays_json_under_the_default_limits_when_a_plugin_prints(
    world: World,
) -> None:
    """A worker's stdout goes to stderr (it used to land in `analyze --json`), and Arrow in a
    worker allocates under the default memory limit (its default allocator reserved a 1 GiB
    arena against RLIMIT_DATA at the first allocation: 'malloc of size 64 failed')."""
    env = {k: v for k, v in world.env.items() if k != "PULSAR_LENS_PLUGIN_MEMORY"}
    argv = ("analyze", "healthy", "--param", "rows=12", "--store", str(world.root), "--json")
    done = run_lens(*argv, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plugin"] == "healthy"
    assert "healthy says hello" in done.stderr
