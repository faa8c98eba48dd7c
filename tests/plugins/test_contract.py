"""Contract meta-tests: the built-ins, the public API, the docs, and load-failure isolation."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from pulsar_lens import api
from pulsar_lens.plugins.registry import BUILTIN_PLUGINS, discover, validate_plugin

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "plugins.md"

CONTRACT_NAMES = (
    # the plugin class and its declared attributes and methods
    "AnalysisPlugin",
    "name",
    "title",
    "description",
    "version",
    "engine",
    "inputs",
    "history",
    "outputs",
    "requires",
    "api_version",
    "API_VERSION",
    "Params",
    "analyze",
    "render",
    "param_choices",
    # what analyze receives and returns
    "Inputs",
    "tables",
    "snapshots",
    "latest",
    "results",
    "result",
    "Result",
    "frames",
    "summary",
    # views
    "View",
    "Chart",
    "chart",
    "caption",
    "Table",
    "frame",
    "Metric",
    "label",
    "value",
    "delta",
    "help",
    "Note",
    "markdown",
    "level",
    # authoring helpers and discovery
    "Engine",
    "Field",
    "BaseModel",
    "PLUGINS",
    "pulsar_lens.plugins",
    "PULSAR_LENS_PLUGIN_DIRS",
)


def _builtin_module(reference: str) -> str:
    return reference.partition(":")[0].rsplit(".", 1)[-1]


@pytest.mark.parametrize("reference", BUILTIN_PLUGINS)
def test_contract_builtin_passes_validation(reference: str) -> None:
    module, _, cls = reference.partition(":")
    plugin_class = getattr(__import__(module, fromlist=[cls]), cls)
    plugin = validate_plugin(plugin_class, f"builtin {reference}")
    assert plugin.engine in api.ENGINES


@pytest.mark.parametrize("reference", BUILTIN_PLUGINS)
def test_contract_builtin_has_a_test_module(reference: str) -> None:
    """Light plugins are tested in tests/plugins/, Spark ones (parity) in tests/spark/."""
    name = f"test_{_builtin_module(reference)}.py"
    paths = [ROOT / "tests" / tier / name for tier in ("plugins", "spark")]
    assert any(p.is_file() for p in paths), f"{reference} needs tests in tests/plugins/{name}"


def test_contract_api_all_is_complete() -> None:
    defined = {
        name
        for name, obj in vars(api).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == api.__name__
    }
    required = {"AnalysisPlugin", "Inputs", "Result", "Chart", "Table", "Metric", "Note"}
    required |= {"View", "Engine", "Field", "BaseModel"}
    exported = set(api.__all__)
    assert defined <= exported, f"missing from __all__: {sorted(defined - exported)}"
    assert required <= exported, f"missing from __all__: {sorted(required - exported)}"
    assert all(hasattr(api, name) for name in api.__all__)


def test_contract_every_field_is_documented() -> None:
    text = DOCS.read_text()
    missing = [n for n in CONTRACT_NAMES if not re.search(rf"`[^`]*\b{re.escape(n)}\b[^`]*`", text)]
    assert not missing, f"docs/plugins.md does not mention: {missing}"


def test_contract_docs_state_the_drop_in_trust_model() -> None:
    text = DOCS.read_text().lower()
    assert "arbitrary code" in text and "only" in text and "configured" in text


def test_contract_broken_drop_in_is_reported_and_others_load(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    registry = discover(entry_points=False, plugin_dirs=[tmp_path])
    assert [Path(f.source).name for f in registry.failures] == ["broken.py"]
    assert "ModuleNotFoundError" in registry.failures[0].message
    assert len(registry.plugins) == len(BUILTIN_PLUGINS)
