"""One engine seam: what differs between a light and a Spark plugin is said by its engine
object (`pulsar_lens.plugins.engines`), and nowhere else is an engine name compared; whether
a plugin runs isolated is decided when it is loaded, not read back from its source text."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from pulsar_lens import api
from pulsar_lens.api import Inputs, Page
from pulsar_lens.core.errors import PluginLoadError
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.engines import BY_NAME, LIGHT, SPARK, engine_of
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.validation import validate_plugin

REPO = Path(__file__).resolve().parents[2]
PARTS = ("core", "collectors", "lab", "plugins", "exporter", "dashboard", "cli", "pulsar_lens")
SEAM = REPO / "plugins" / "engines.py"
NAMES = set(api.ENGINES)


def _constants(node: ast.expr) -> list[object]:
    """The constants a comparison operand is or holds (`x in ("spark", ...)` too)."""
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return []


def _seam_breaks(path: Path, root: Path = REPO) -> list[str]:
    """Where `path` compares an engine name or reads isolation from a plugin's source text."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(c in NAMES for operand in operands for c in _constants(operand)):
                found.append(f"{path.relative_to(root)}:{node.lineno} compares an engine name")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and any(str(c).startswith("builtin") for a in node.args for c in _constants(a))
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno} reads a source's text")
    return found


def test_no_module_but_the_engine_seam_compares_an_engine_name() -> None:
    modules = [p for part in PARTS for p in sorted((REPO / part).rglob("*.py")) if p != SEAM]
    assert len(modules) > 100  # the scan sees the code, not an empty folder
    breaks = [b for path in modules for b in _seam_breaks(path)]
    assert breaks == []


def test_the_scan_finds_a_comparison(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        'def f(p):\n    return p.engine == "spark" or p.engine in ("light",)\n'
        'def g(p):\n    return p.source.startswith("builtin ")\n'
    )
    assert len(_seam_breaks(probe, tmp_path)) == 3


def test_every_engine_a_plugin_may_declare_has_its_object() -> None:
    assert tuple(BY_NAME) == api.ENGINES
    registry = discover(entry_points=False, plugin_dirs=())
    for loaded in registry:
        assert engine_of(loaded) is BY_NAME[loaded.plugin.engine] is engine_of(loaded.plugin)
    light = {p.name for p in registry if engine_of(p).per_poll}
    assert {"bundle-ownership", "stuck-hashes", "unload-latency"} <= light
    assert {"stuck-hash-history", "unload-history"}.isdisjoint(light)
    assert (LIGHT.section, LIGHT.run_control, SPARK.section, SPARK.run_control) == (
        "Cluster",
        "live",
        "History",
        "job",
    )
    assert SPARK.in_process == {"analyze", "param_choices"} and not LIGHT.in_process


def test_the_engines_and_the_read_path_import_no_pyspark() -> None:
    code = (
        "import sys\n"
        "import pulsar_lens.plugins.engines, pulsar_lens.plugins.runner\n"
        "import pulsar_lens.dashboard.navigation\n"
        "print('pyspark' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "False"


PID_PLUGIN = """
import os
from pulsar_lens.api import AnalysisPlugin, Result, empty_frame

class Where(AnalysisPlugin):
    name = "where"
    title = "Where"
    description = "Says which process analysed it."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    def analyze(self, data, params):
        return Result(frames={"x": empty_frame(["x"])}, summary={"pid": os.getpid()})

    def render(self, result):
        return []

PLUGINS = (Where,)
"""


def test_a_drop_in_runs_isolated_whatever_its_path_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drop-in folder named like the built-ins' source text ("builtin ...") is still
    third-party code: it runs in a worker, not in this process."""
    monkeypatch.chdir(tmp_path)
    folder = Path("builtin plugins")
    folder.mkdir()
    (folder / "where.py").write_text(textwrap.dedent(PID_PLUGIN))
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[folder])
    loaded = registry.get("where")
    assert loaded.source.startswith("builtin ") and loaded.isolated
    inputs = Inputs(tables={"topics": pd.DataFrame()}, snapshots=pd.DataFrame())
    output = runner.run_on_inputs(loaded, inputs)
    assert output.result.summary["pid"] != os.getpid()


def test_builtins_run_in_process() -> None:
    registry = discover(entry_points=False, plugin_dirs=())
    assert len(registry) and not any(p.isolated for p in registry)


def test_a_page_may_ask_for_a_dashboard_panel_it_names() -> None:
    class Drills(api.AnalysisPlugin):
        name = "drills"
        title = "Drills"
        description = "A page with the unload drill on it."
        version = "1"
        inputs = ("topics",)
        outputs = ("x",)
        page = Page(title="Drills", panels=("unload-drill",))

        def analyze(self, data: Inputs, params: object) -> api.Result:
            return api.Result(frames={"x": api.empty_frame(["x"])})

        def render(self, result: api.Result) -> list[api.View]:
            return []

    assert validate_plugin(Drills, "test").page == Page(title="Drills", panels=("unload-drill",))

    class Unknown(Drills):
        page = Page(title="Drills", panels=("reboot-broker",))

    with pytest.raises(PluginLoadError, match=r"page\.panels: expected a tuple of unload-drill"):
        validate_plugin(Unknown, "test")
