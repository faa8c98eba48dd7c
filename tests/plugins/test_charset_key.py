"""The broker JVM's charset (PULSAR_LENS_JVM_CHARSET) changes what the name-hashing analyses
find, so it is part of their params, hence of their result's key: a cached or stored result
computed under one charset is never served under the other, and the analysis itself reads no
environment. The setting reaches the params through `core.parts.use_charset_setting`, which
an entry point calls with the settings it loaded; the tests set what it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_lens.api import jvm_charset
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import Registry, discover
from pulsar_lens.plugins.results import result_key
from tests.plugins.test_key_shared_map import LABEL, ascii_broker_snapshot

CHARSET_PLUGINS = ("key-shared-map", "key-distribution", "failover-assignment", "failover-history")


@pytest.fixture(scope="module")
def registry() -> Registry:
    return discover(entry_points=False, plugin_dirs=())


@pytest.mark.parametrize("slug", CHARSET_PLUGINS)
def test_two_charsets_give_two_result_keys(
    slug: str, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = registry.get(slug).plugin
    keys = {}
    for setting, name in (("UTF-8", "utf-8"), ("US-ASCII", "ascii")):
        monkeypatch.setattr("pulsar_lens.core.parts._charset", setting)
        params = runner.validate_params(plugin, None).model_dump(mode="json")
        assert params["jvm_charset"] == name
        keys[name] = result_key(plugin.name, plugin.version, params, ["s1"])
    assert keys["utf-8"] != keys["ascii"]


def test_an_asked_charset_wins_over_the_setting(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = registry.get("key-shared-map").plugin
    monkeypatch.setattr("pulsar_lens.core.parts._charset", "US-ASCII")
    params = runner.validate_params(plugin, {"jvm_charset": "UTF-8"})
    assert params.model_dump()["jvm_charset"] == "utf-8"


def test_the_cache_serves_no_result_of_the_other_charset(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same snapshot analysed under each setting, the in-memory cache on: the second
    run is computed afresh under its own charset, not read back from the first."""
    loaded = registry.get("key-shared-map")
    store = Store(tmp_path)
    store.write(ascii_broker_snapshot())  # ranges of a broker hashing names as US-ASCII
    drift = {}
    for setting in ("UTF-8", "US-ASCII"):
        monkeypatch.setattr("pulsar_lens.core.parts._charset", setting)
        output = runner.run(loaded, store, use_cache=True, use_stored=False)
        subs = output.result.frames["subscriptions"].set_index("label")
        drift[setting] = bool(subs.loc[LABEL]["drift"])
    assert drift == {"UTF-8": True, "US-ASCII": False}


def test_the_analysis_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_LENS_JVM_CHARSET", "US-ASCII")
    monkeypatch.setattr("pulsar_lens.core.parts._charset", "US-ASCII")
    assert jvm_charset("") == "utf-8"
    assert jvm_charset("", "US-ASCII") == "ascii"
    with pytest.raises(ValueError, match="EBCDIC"):
        jvm_charset("EBCDIC")
