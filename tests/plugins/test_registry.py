"""Discovery: built-ins, entry points and drop-in files; validation and load failures."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import create_model

from pulsar_lens.api import (
    API_VERSION,
    AnalysisPlugin,
    BaseModel,
    Field,
    Inputs,
    Page,
    Result,
    View,
)
from pulsar_lens.core.errors import PluginLoadError, PluginUnavailable
from pulsar_lens.core.settings import Settings
from pulsar_lens.plugins import validation as validation_module
from pulsar_lens.plugins.registry import BUILTIN_PLUGINS, discover, validate_plugin

GOOD = """
import pandas as pd
from pulsar_lens.api import AnalysisPlugin, Result

class {cls}(AnalysisPlugin):
    name = "{slug}"
    title = "Counts"
    description = "Counts topics."
    version = "0.1"
    inputs = ("topics",)
    outputs = ("counts",)

    def analyze(self, data, params):
        return Result(frames={{"counts": pd.DataFrame({{"n": [len(data.latest("topics"))]}})}})

    def render(self, result):
        return []

PLUGINS = ({cls},)
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


class Valid(AnalysisPlugin):
    name = "valid-one"
    title = "Valid"
    description = "A plugin that passes validation."
    version = "1.0"
    inputs = ("topics",)
    outputs = ("out",)

    def analyze(self, data: Inputs, params: Any) -> Result:
        raise NotImplementedError

    def render(self, result: Result) -> list[View]:
        return []


def test_registry_loads_every_builtin_without_failure() -> None:
    registry = discover(entry_points=False, plugin_dirs=())
    assert registry.failures == []
    assert len(registry) == len(BUILTIN_PLUGINS)
    assert {"bundle-ownership", "subscription-status", "stuck-hashes"} <= set(registry.plugins)
    loaded = registry.get("stuck-hashes")
    assert loaded.source == "builtin pulsar_lens.plugins.builtin.stuck_hashes:StuckHashes"
    assert (loaded.version, loaded.engine) == (loaded.plugin.version, "light")
    assert not loaded.isolated  # a built-in runs in the calling process


def test_registry_drop_in_directory_loads_listed_classes(tmp_path: Path) -> None:
    write(tmp_path, "counts.py", GOOD.format(cls="Counts", slug="topic-counts"))
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[tmp_path])
    assert registry.failures == []
    assert registry.get("topic-counts").source == str(tmp_path / "counts.py")


def test_registry_a_drop_in_printing_at_import_prints_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "print('hello from import')\n" + GOOD.format(cls="Counts", slug="topic-counts")
    write(tmp_path, "counts.py", text)
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[tmp_path])
    assert registry.failures == []
    out, err = capsys.readouterr()
    assert "hello from import" not in out  # stdout carries `analyze --json`
    assert "hello from import" in err


def test_registry_broken_drop_in_is_reported_and_others_load(tmp_path: Path) -> None:
    write(tmp_path, "a_good.py", GOOD.format(cls="Counts", slug="topic-counts"))
    write(tmp_path, "b_syntax.py", "def broken(:\n")
    write(tmp_path, "c_raises.py", "raise RuntimeError('boom at import')\n")
    write(tmp_path, "d_unlisted.py", "X = 1\n")
    write(tmp_path, "_private.py", "raise RuntimeError('never imported')\n")
    registry = discover(entry_points=False, plugin_dirs=[tmp_path])
    assert "topic-counts" in registry.plugins and "stuck-hashes" in registry.plugins
    failed = {Path(f.source).name: f.message for f in registry.failures}
    assert set(failed) == {"b_syntax.py", "c_raises.py", "d_unlisted.py"}
    assert "SyntaxError" in failed["b_syntax.py"]
    assert "RuntimeError: boom at import" in failed["c_raises.py"]
    assert "PLUGINS" in failed["d_unlisted.py"]


def test_registry_reads_the_dirs_the_settings_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    write(one, "p1.py", GOOD.format(cls="P1", slug="first-plugin"))
    write(two, "p2.py", GOOD.format(cls="P2", slug="second-plugin"))
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", f"{one}{os.pathsep}{two}")
    dirs = Settings.from_env().plugin_dirs
    registry = discover(builtins=False, entry_points=False, plugin_dirs=dirs)
    assert sorted(registry.plugins) == ["first-plugin", "second-plugin"]


def test_registry_reads_no_directory_unless_configured(tmp_path: Path) -> None:
    write(tmp_path, "p1.py", GOOD.format(cls="P1", slug="first-plugin"))
    registry = discover(builtins=False, entry_points=False)
    assert len(registry) == 0 and registry.failures == []


def test_registry_missing_directory_is_a_failure(tmp_path: Path) -> None:
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[tmp_path / "nope"])
    assert [f.source for f in registry.failures] == [str(tmp_path / "nope")]


def test_registry_duplicate_slug_names_both_sources(tmp_path: Path) -> None:
    write(tmp_path, "dup.py", GOOD.format(cls="Dup", slug="stuck-hashes"))
    registry = discover(entry_points=False, plugin_dirs=[tmp_path])
    (failure,) = registry.failures
    assert failure.plugin == "stuck-hashes"
    assert str(tmp_path / "dup.py") in str(failure)
    assert "builtin pulsar_lens.plugins.builtin.stuck_hashes:StuckHashes" in str(failure)
    assert registry.get("stuck-hashes").source.startswith("builtin ")


def _params(**fields: Any) -> type[BaseModel]:
    return create_model("Params", **fields)


def _variant(**attrs: Any) -> type:
    return type("Variant", (Valid,), attrs)


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({"name": "Not_Kebab"}, "name: expected a kebab-case slug"),
        ({"name": "trailing-"}, "name: expected a kebab-case slug"),
        ({"title": ""}, "title: expected a non-empty string"),
        ({"version": 1}, "version: expected a non-empty string, found 1"),
        ({"engine": "gpu"}, "engine: expected one of light, spark, found 'gpu'"),
        ({"inputs": ("topics", "nope")}, "inputs: expected tables among brokers"),
        ({"inputs": "topics"}, "inputs: expected a tuple of table names"),
        ({"history": 0}, "history: expected an integer >= 1, found 0"),
        ({"outputs": ()}, "outputs: expected a non-empty tuple"),
        ({"outputs": ("a", "a")}, "outputs: expected unique frame names"),
        ({"analyze": AnalysisPlugin.analyze}, "analyze: expected the plugin to define"),
        ({"Params": dict}, "Params: expected a pydantic BaseModel subclass"),
        (
            {"Params": _params(top_n=(int, Field(0, ge=1)))},
            "Params.top_n: its default 0 breaks its own rule: Input should be greater than or "
            "equal to 1",
        ),
        (
            {"Params": _params(window=(int, "five"))},
            "Params.window: its default 'five' breaks its own rule: Input should be a valid "
            "integer",
        ),
        (
            {"Params": _params(window=(int, ...))},
            "Params.window: expected a default value (forms and the CLI start from it)",
        ),
        ({"history_of": {"events": 5}}, "history_of: 'events' is not one of the declared"),
        ({"history_of": {"topics": 0}}, "history_of['topics']: expected an integer >= 1"),
        ({"history_of": [("topics", 2)]}, "history_of: expected a mapping of table name"),
        ({"columns_of": {"events": ("kind",)}}, "columns_of: 'events' is not one of the"),
        ({"columns_of": {"topics": "topic"}}, "columns_of['topics']: expected a tuple of column"),
        ({"columns_of": {"topics": ("nope",)}}, "columns_of['topics']: no such column(s) ['nope']"),
        ({"columns_of": [("topics", ())]}, "columns_of: expected a mapping of table name"),
        ({"page": "Topics"}, "page: expected None or a pulsar_lens.api.Page, found 'Topics'"),
        ({"page": Page(title=" ")}, "page.title: expected a non-empty string"),
        ({"page": Page(title="T", url_path="Bad Path")}, "page.url_path: expected a kebab-case"),
        (
            {"page": Page(title="T", controls=("nope",))},
            "page.controls: 'nope' are not Params fields (none)",
        ),
    ],
)
def test_registry_validation_names_plugin_source_expected_found(
    attrs: dict[str, Any], expected: str
) -> None:
    with pytest.raises(PluginLoadError) as info:
        validate_plugin(_variant(**attrs), "test-source")
    assert expected in str(info.value)
    assert "test-source" in str(info.value)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (
            API_VERSION + 1,
            f"api_version: declares plugin API {API_VERSION + 1}, written for a newer Pulsar "
            f"Lens; this version runs plugin API 1 to {API_VERSION}",
        ),
        ("1", "api_version: expected an integer, found '1'; this version runs plugin API 1 to 2"),
        (True, "api_version: expected an integer, found True"),
        (1.0, "api_version: expected an integer, found 1.0"),
        (0, "api_version: declares plugin API 0, which this version no longer runs"),
    ],
)
def test_registry_refuses_a_plugin_for_another_api_naming_what_it_declared(
    declared: object, expected: str
) -> None:
    with pytest.raises(PluginLoadError) as info:
        validate_plugin(_variant(api_version=declared), "test-source")
    assert str(info.value).startswith("plugin 'valid-one' from test-source: ")
    assert expected in str(info.value)


def test_registry_api_version_defaults_to_1_and_a_newer_lens_runs_older_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert AnalysisPlugin.api_version == 1
    assert API_VERSION == 2
    assert validate_plugin(Valid, "src").api_version == 1
    assert validate_plugin(_variant(api_version=2), "src").api_version == 2
    with pytest.raises(PluginLoadError, match="this version runs plugin API 1 to 2"):
        validate_plugin(_variant(api_version=3), "src")
    monkeypatch.setattr(validation_module, "API_VERSION", 3)
    assert validate_plugin(_variant(api_version=3), "src").api_version == 3
    assert validate_plugin(Valid, "src").api_version == 1


def test_registry_validation_rejects_non_plugins() -> None:
    with pytest.raises(
        PluginLoadError, match=r"expected a subclass of pulsar_lens\.api\.AnalysisPlugin"
    ):
        validate_plugin(object, "src")


def test_registry_validation_accepts_a_page_and_history_of() -> None:
    variant = _variant(
        Params=_params(top_n=(int, 5)),
        page=Page(title="Topics", url_path="topics-page", controls=("top_n",)),
        history=1,
        history_of={"topics": 12},
    )
    assert validate_plugin(variant, "src").page.controls == ("top_n",)


def test_registry_validation_accepts_a_complete_plugin() -> None:
    plugin = validate_plugin(Valid, "src")
    assert isinstance(plugin, Valid) and issubclass(type(plugin).Params, BaseModel)


def test_registry_get_unknown_and_failed_slugs(tmp_path: Path) -> None:
    write(tmp_path, "dup.py", GOOD.format(cls="Dup", slug="stuck-hashes"))
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[tmp_path])
    with pytest.raises(PluginUnavailable, match="no plugin has this name; loaded plugins: stuck"):
        registry.get("nope")


def test_registry_entry_point_failures_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "fake_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[pulsar_lens.plugins]\nmissing = fake_plugins_nowhere:Plugin\ngood = fake_ep_mod:Good\n"
    )
    write(tmp_path, "fake_ep_mod.py", GOOD.format(cls="Good", slug="ep-good"))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = discover(builtins=False, plugin_dirs=())
    assert (
        registry.get("ep-good").source == "entry point good = fake_ep_mod:Good (fake-plugins 1.0)"
    )
    (failure,) = [f for f in registry.failures if "fake_plugins_nowhere" in f.source]
    assert "ModuleNotFoundError" in failure.message
    sys.modules.pop("fake_ep_mod", None)
